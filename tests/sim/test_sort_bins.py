"""SortBins: layout, start state, the sorted check, its expert, bad arguments.

check_env, seeded determinism, images and a 3-seed expert run cover it with every registered
task in test_tasks.py; here what is particular to bins."""

from __future__ import annotations

import numpy as np
import pytest

from robocompose.sim.experts.sort_bins import SortBinsExpert, SortBinsExpertConfig
from robocompose.sim.pick_place import CUBE_HALF_M
from robocompose.sim.sort_bins import BIN_GAP_M, BIN_RADIUS_M, MAX_EPISODE_STEPS, SortBinsEnv


def test_state_layout_has_blocks_then_bins() -> None:
    env = SortBinsEnv(blocks=("red", "blue"), bins=("red", "green", "blue"))
    obs, _ = env.reset(seed=3)
    assert obs["state"].shape == (4 + 5 * 2 + 2 * 3,)
    np.testing.assert_allclose(obs["state"][4:7], env.cube_pos(0))
    np.testing.assert_allclose(obs["state"][-2:], env.bin_xy(2))
    env.close()


def test_start_state_has_separate_bins_and_no_block_in_a_bin() -> None:
    env = SortBinsEnv()
    for seed in range(20):
        _, info = env.reset(seed=seed)
        assert not info["success"] and info["score"] < 0.9
        bins = [env.bin_xy(k) for k in range(3)]
        gaps = [np.linalg.norm(a - b) for i, a in enumerate(bins) for b in bins[i + 1 :]]
        assert min(gaps) >= BIN_GAP_M
        for i in range(3):
            assert min(np.linalg.norm(env.cube_pos(i)[:2] - b) for b in bins) > BIN_RADIUS_M
    env.close()


def _teleport(env: SortBinsEnv, i: int, xy: np.ndarray) -> None:
    env._place_cube(i, xy, 0.0)
    env.step(np.append(env.ee_pos(), -1.0))  # physics settles; the gripper stays open


def test_success_needs_every_block_in_the_bin_of_its_colour() -> None:
    env = SortBinsEnv()
    env.reset(seed=0)
    far = np.array([0.0, 0.0, 0.2])
    env.gantry.place(env.data, far)  # the hand out of the way, open
    _teleport(env, 0, env.bin_xy(1))  # red into the green bin
    assert not env.sorted_block(0)
    _teleport(env, 0, env.bin_xy(0))
    _teleport(env, 1, env.bin_xy(1))
    assert env.sorted_block(0) and env.sorted_block(1)
    _, _, terminated, _, info = env.step(np.append(far, -1.0))
    assert not terminated and info["score"] < 1.0  # blue is still out
    _teleport(env, 2, env.bin_xy(2) + BIN_RADIUS_M * 0.5)
    _, reward, terminated, _, info = env.step(np.append(far, -1.0))
    assert terminated and info["success"] and reward == 1.0
    assert env.cube_pos(2)[2] == pytest.approx(CUBE_HALF_M, abs=0.005)
    env.close()


def test_expert_sorts_with_a_distractor_bin() -> None:
    env = SortBinsEnv(blocks=("green", "blue"), bins=("red", "green", "blue"))
    expert = SortBinsExpert(SortBinsExpertConfig(action_noise_m=0.003))
    for seed in range(4):
        env.reset(seed=seed)
        expert.reset(env, np.random.default_rng(seed))
        for _ in range(MAX_EPISODE_STEPS):
            _, _, terminated, _, info = env.step(expert.act(env))
            if terminated:
                break
        assert info["success"], f"seed {seed}: {info}"
    env.close()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"blocks": ("red", "mauve")}, "blocks"),
        ({"blocks": ("red", "red")}, "blocks"),
        ({"blocks": ("red", "green", "blue", "yellow")}, "blocks"),
        ({"blocks": "red"}, "blocks"),
        ({"blocks": ("red", "blue"), "bins": ("red", "green")}, "bins"),
        ({"bins": ()}, "bins"),
        ({"camera": "side"}, "camera"),
    ],
)
def test_bad_arguments_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=f"`{field}`"):
        SortBinsEnv(**kwargs)

"""robosuite's Lift and PickPlaceCan: spaces, seeded resets, the scripted experts, and demo files
that robomimic's own reader reads."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("robosuite", reason="robosuite is in the `external` extra")

from robocompose.sim.collect import run_expert_episode  # noqa: E402
from robocompose.sim.experts.robosuite import (  # noqa: E402
    LiftExpert,
    LiftExpertConfig,
    PickPlaceCanExpert,
)
from robocompose.sim.hdf5_dataset import DemoWriter, load_demos  # noqa: E402
from robocompose.sim.robosuite_env import ENV_IDS, LOW_DIM_KEYS, RobosuiteEnv  # noqa: E402


@pytest.fixture(scope="module")
def lift() -> gym.Env:
    env = gym.make(ENV_IDS["Lift"])
    yield env
    env.close()


@pytest.fixture(scope="module")
def can() -> gym.Env:
    env = gym.make(ENV_IDS["PickPlaceCan"])
    yield env
    env.close()


@pytest.mark.parametrize("name", ["lift", "can"])
def test_spaces_and_seeded_resets(name: str, request: pytest.FixtureRequest) -> None:
    env = request.getfixturevalue(name)
    assert tuple(env.observation_space.spaces) == LOW_DIM_KEYS
    assert env.action_space.shape == (7,)
    first, info = env.reset(seed=7)
    assert env.observation_space.contains(first) and info["success"] is False
    assert np.any(first["object"][:3] != 0)  # relative object sensors read right after reset
    rng = np.random.default_rng(0)
    for _ in range(5):  # history must not leak into the next seeded reset
        env.step(rng.uniform(-1, 1, 7).astype(np.float32))
    env.reset(seed=8)
    again, _ = env.reset(seed=7)
    for key in LOW_DIM_KEYS:
        np.testing.assert_array_equal(again[key], first[key], err_msg=key)
    other, _ = env.reset(seed=8)
    assert not np.allclose(other["object"][:3], first["object"][:3])
    stepped = [env.step(np.zeros(7, np.float32))[0] for _ in range(2)]
    env.reset(seed=8)
    replay = [env.step(np.zeros(7, np.float32))[0] for _ in range(2)]
    for a, b in zip(stepped, replay, strict=True):
        np.testing.assert_array_equal(a["robot0_eef_pos"], b["robot0_eef_pos"])


@pytest.mark.parametrize(("name", "expert", "seeds"), [("lift", LiftExpert, [0, 1])])
def test_lift_expert_succeeds(name, expert, seeds, request: pytest.FixtureRequest) -> None:
    env = request.getfixturevalue(name)
    for seed in seeds:
        episode = run_expert_episode(env, expert(), seed)
        assert episode.success, f"seed {seed}"
        assert episode.actions.shape[1] == 7 and np.all(np.abs(episode.actions) <= 1)


def test_can_expert_succeeds(can: gym.Env) -> None:
    episode = run_expert_episode(can, PickPlaceCanExpert(), 0)
    assert episode.success and len(episode.actions) < 400


def test_expert_refuses_another_task(can: gym.Env) -> None:
    with pytest.raises(TypeError, match="LiftExpert drives a RobosuiteEnv of task 'Lift'"):
        LiftExpert().reset(can, np.random.default_rng(0))
    with pytest.raises(ValueError, match="`action_noise` must be >= 0"):
        LiftExpertConfig(action_noise=-1.0)


def test_bad_env_arguments() -> None:
    with pytest.raises(ValueError, match="`task` must be one of"):
        RobosuiteEnv("Stack")
    with pytest.raises(ValueError, match="`obs_keys` must be a non-empty subset"):
        RobosuiteEnv("Lift", obs_keys=("cube_pos",))


def test_robomimic_reads_a_lift_file(lift: gym.Env, tmp_path: Path) -> None:
    pytest.importorskip("robomimic", reason="robomimic reads the file")
    import robomimic.utils.obs_utils as obs_utils
    from robomimic.utils.dataset import SequenceDataset

    path = tmp_path / "lift.hdf5"
    with DemoWriter(path, ENV_IDS["Lift"], {}, valid_fraction=0.0) as writer:
        for seed in (2, 3):
            episode = run_expert_episode(lift, LiftExpert(), seed)
            writer.add_episode(episode.obs, episode.actions, episode.rewards, attrs={"seed": seed})
    obs_utils.initialize_obs_utils_with_obs_specs({"obs": {"low_dim": list(LOW_DIM_KEYS)}})
    dataset = SequenceDataset(
        hdf5_path=str(path),
        obs_keys=LOW_DIM_KEYS,
        dataset_keys=("actions",),
        seq_length=4,
        load_next_obs=False,
    )
    ours = load_demos(path)
    assert len(dataset) == sum(len(e) for e in ours)
    item = dataset[0]
    np.testing.assert_array_equal(item["actions"], ours[0].actions[:4])
    np.testing.assert_array_equal(item["obs"]["object"], ours[0].obs["object"][:4])
    assert item["obs"]["object"].shape == (4, 10)


def test_render_and_image_key() -> None:
    env = gym.make(
        ENV_IDS["Lift"],
        render_mode="rgb_array",
        render_size=32,
        obs_keys=("robot0_eef_pos", "agentview_image"),
        image_size=24,
    )
    obs, _ = env.reset(seed=0)
    assert obs["agentview_image"].shape == (24, 24, 3) and obs["agentview_image"].dtype == np.uint8
    assert env.observation_space.contains(obs)
    frame = env.render()
    assert frame.shape == (32, 32, 3) and frame.std() > 0
    env.close()


@pytest.mark.parametrize(("task", "state_dim"), [("Lift", 19), ("PickPlaceCan", 23)])
def test_preset_makes_the_adapted_env_and_its_expert(task: str, state_dim: int) -> None:
    """configs/task/<task>.yaml: the env through the preset's adapter gives `state` alone, and
    the preset's expert drives it through the wrappers (one Lift episode; the can's only acts)."""
    from robocompose.cli import load_verb_config
    from robocompose.sim.tasks import make_env, make_expert

    load_verb_config("collect", [f"task={task}"])  # loading the preset registers its env
    env = make_env(task)
    assert env.observation_space["state"].shape == (state_dim,)
    expert = make_expert(task)
    if task == "Lift":
        assert run_expert_episode(env, expert, 0).success
    else:
        obs, _ = env.reset(seed=0)
        expert.reset(env, np.random.default_rng(0))
        assert list(obs) == ["state"] and expert.act(env).shape == (7,)
    env.close()

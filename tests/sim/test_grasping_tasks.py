"""The gantry tasks (PickPlace, Stack): gymnasium API, seeding, images, experts, bad arguments."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from robocompose.sim.experts.grasping import (
    PickPlaceExpert,
    PickPlaceExpertConfig,
    StackExpert,
    StackExpertConfig,
)
from robocompose.sim.gantry import MAX_OPENING_M
from robocompose.sim.pick_place import MAX_EPISODE_STEPS as PICK_PLACE_STEPS
from robocompose.sim.pick_place import PickPlaceEnv
from robocompose.sim.stack import MAX_EPISODE_STEPS as STACK_STEPS
from robocompose.sim.stack import StackEnv
from robocompose.sim.tasks import make_env

ENVS = {
    "pick_place_1": lambda **kw: PickPlaceEnv(n_cubes=1, **kw),
    "pick_place_2": lambda **kw: PickPlaceEnv(n_cubes=2, **kw),
    "stack": lambda **kw: StackEnv(**kw),
}
STATE_DIMS = {"pick_place_1": 4 + 5 + 2, "pick_place_2": 4 + 10 + 2, "stack": 4 + 15}


@pytest.mark.parametrize("name", ENVS)
def test_state_layout(name: str) -> None:
    """check_env and seeding run over every registered task in test_tasks.py; here the layout."""
    env = ENVS[name]()
    assert env.observation_space["state"].shape == (STATE_DIMS[name],)
    env.close()


def test_image_observation() -> None:
    env = StackEnv(obs_keys=("state", "image"))
    obs, _ = env.reset(seed=0)
    image = obs["image"]
    assert image.shape == (96, 96, 3) and image.dtype == np.uint8
    assert image.std() > 5, "the rendered image is blank"
    red = (image[..., 0] > 150) & (image[..., 1] < 80) & (image[..., 2] < 80)
    blue = (image[..., 2] > 150) & (image[..., 0] < 80)
    assert red.sum() > 4 and blue.sum() > 4, "the red and blue blocks should be visible"
    env.close()


def test_start_state_is_at_rest_and_not_solved() -> None:
    env = PickPlaceEnv(n_cubes=2)
    for seed in range(5):
        obs, info = env.reset(seed=seed)
        assert not info["success"] and 0.0 <= info["score"] < 0.9
        state = obs["state"]
        assert state[3] == pytest.approx(MAX_OPENING_M)  # open gripper
        np.testing.assert_allclose(state[[6, 11]], 0.02)  # both cubes on the table
    env.close()


def _expert_successes(env, expert, seeds, max_steps: int) -> int:
    successes = 0
    for seed in seeds:
        env.reset(seed=seed)
        expert.reset(env, np.random.default_rng(seed))
        for _ in range(max_steps):
            _, _, terminated, _, info = env.step(expert.act(env))
            if terminated:
                break
        successes += bool(info["success"])
        assert (info["score"] == 1.0) == info["success"]
    return successes


@pytest.mark.parametrize("n_cubes", [1, 2])
def test_pick_place_expert_succeeds(n_cubes: int) -> None:
    env = PickPlaceEnv(n_cubes=n_cubes)
    expert = PickPlaceExpert(PickPlaceExpertConfig(action_noise_m=0.003))
    assert _expert_successes(env, expert, range(5), PICK_PLACE_STEPS) == 5


def test_stack_expert_succeeds_in_a_custom_order() -> None:
    env = StackEnv(blocks=("red", "green", "blue", "yellow"), order=("blue", "red", "yellow"))
    expert = StackExpert(StackExpertConfig(action_noise_m=0.003))
    assert _expert_successes(env, expert, range(5), STACK_STEPS) == 5
    # the order was stacked, the distractor (green) stayed on the table
    blue, red, yellow, green = (
        env.cube_pos(env.blocks.index(b)) for b in ("blue", "red", "yellow", "green")
    )
    np.testing.assert_allclose([red[2] - blue[2], yellow[2] - red[2]], 0.04, atol=0.005)
    assert green[2] == pytest.approx(0.02, abs=0.005)


def test_expert_holds_the_final_pose_then_reports_done() -> None:
    env = PickPlaceEnv()
    expert = PickPlaceExpert(PickPlaceExpertConfig(action_noise_m=0.0, done_margin=3))
    env.reset(seed=0)
    expert.reset(env, np.random.default_rng(0))
    actions = []
    while not expert.done:
        actions.append(expert.act(env))
        env.step(actions[-1])
        assert len(actions) < PICK_PLACE_STEPS
    np.testing.assert_array_equal(actions[-1], actions[-3])


def test_expert_noise_is_seeded_by_the_reset_rng() -> None:
    env = PickPlaceEnv(n_cubes=2)

    def actions(seed: int) -> np.ndarray:
        env.reset(seed=0)
        expert = PickPlaceExpert(PickPlaceExpertConfig(action_noise_m=0.003))
        expert.reset(env, np.random.default_rng(seed))
        return np.stack([expert.act(env) for _ in range(3)])

    np.testing.assert_array_equal(actions(1), actions(1))
    assert not np.allclose(actions(1), actions(2))


def _headed_for(choice: str, seeds: range) -> tuple[float, float]:
    """How often the expert heads for cube 0 and for the cube nearer the gripper (read off its
    first move)."""
    config = PickPlaceExpertConfig(action_noise_m=0.0, cube_choice=choice)
    env, expert, first, nearer = PickPlaceEnv(n_cubes=2), PickPlaceExpert(config), 0, 0
    for seed in seeds:
        env.reset(seed=seed)
        expert.reset(env, np.random.default_rng(seed))
        ee = env.ee_pos()[:2]
        heading = expert.act(env)[:2] - ee
        to_cube = [env.cube_pos(c)[:2] - ee for c in range(2)]
        chosen = int(np.argmax([heading @ v / np.linalg.norm(v) for v in to_cube]))
        first += chosen == 0
        nearer += chosen == int(np.argmin([np.linalg.norm(v) for v in to_cube]))
    return first / len(seeds), nearer / len(seeds)


def test_two_cube_expert_takes_the_cube_its_config_names() -> None:
    assert _headed_for("first", range(40))[0] == 1.0
    assert _headed_for("nearest", range(40))[1] == 1.0
    assert 0.3 < _headed_for("uniform", range(40))[0] < 0.7


@pytest.mark.parametrize(
    ("make", "argument"),
    [
        (lambda: PickPlaceEnv(n_cubes=3), "n_cubes"),
        (lambda: StackEnv(blocks=("red", "green", "mauve")), "blocks"),
        (lambda: StackEnv(blocks=("red", "red", "blue")), "blocks"),
        (lambda: StackEnv(order=("red", "yellow")), "order"),
        (lambda: StackEnv(order=("red",)), "order"),
        (lambda: StackEnv(camera="side"), "camera"),
        (lambda: StackExpertConfig(action_noise_m=-0.1), "action_noise_m"),
        (lambda: PickPlaceExpertConfig(cube_choice="closest"), "cube_choice"),
    ],
)
def test_bad_arguments_name_the_argument(make, argument: str) -> None:
    with pytest.raises(ValueError, match=f"`{argument}`"):
        make()


def test_expert_refuses_the_wrong_task() -> None:
    env = PickPlaceEnv()
    env.reset(seed=0)
    with pytest.raises(TypeError, match="StackEnv"):
        StackExpert().reset(env, np.random.default_rng(0))


@pytest.mark.parametrize("name", ENVS)
def test_proprio_is_the_robot_part_of_state(name: str) -> None:
    """ee xyz and finger opening, the first 4 of `state`, with no cube or target in it."""
    env = ENVS[name](obs_keys=("state", "proprio"))
    assert env.observation_space["proprio"].shape == (4,)
    obs, _ = env.reset(seed=3)
    np.testing.assert_array_equal(obs["proprio"], obs["state"][:4])
    before = obs["proprio"]
    for _ in range(5):
        obs, *_ = env.step(np.array([0.1, -0.1, 0.05, 1.0]))
    np.testing.assert_array_equal(obs["proprio"], obs["state"][:4])
    assert not np.allclose(obs["proprio"], before), "proprio did not follow the gantry"
    env.close()


def test_proprio_does_not_see_the_cube() -> None:
    """Moving the cube changes `state` and leaves `proprio` as it was."""
    env = PickPlaceEnv(obs_keys=("state", "proprio"))
    obs, _ = env.reset(seed=0)
    sim = env.unwrapped
    sim._place_cube(0, np.array([0.1, 0.1]), 0.3)
    mujoco.mj_forward(sim.model, sim.data)
    moved = sim._obs()
    assert not np.allclose(moved["state"], obs["state"])
    np.testing.assert_array_equal(moved["proprio"], obs["proprio"])
    env.close()


def test_proprio_on_a_task_without_it_names_the_key() -> None:
    with pytest.raises(ValueError, match=r"PushTEnv has no `proprio` observation"):
        make_env("PushT", obs_keys=("state", "proprio"))

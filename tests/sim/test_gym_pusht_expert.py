"""The gym-pusht expert: it solves the original PushT within LeRobot's 300 steps, and its pymunk
snapshot replays a rollout exactly."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("gym_pusht", reason="gym-pusht (the `external` extra) provides the env")

from robocompose.sim.experts.gym_pusht import (  # noqa: E402
    GymPushTExpert,
    GymPushTExpertConfig,
    PymunkSnapshot,
    step_physics,
)

MAX_STEPS = 300


def _env() -> gym.Env:
    return gym.make("gym_pusht/PushT-v0", obs_type="state", max_episode_steps=MAX_STEPS)


def _state(task) -> np.ndarray:
    return np.array([*task.agent.position, *task.block.position, task.block.angle])


@pytest.mark.parametrize("seed", [0, 1])
def test_expert_succeeds_within_the_limit(seed: int) -> None:
    env = _env()
    expert = GymPushTExpert()
    env.reset(seed=seed)
    expert.reset(env, np.random.default_rng(seed))
    for _ in range(MAX_STEPS):
        action = expert.act(env)
        assert env.action_space.contains(action)
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    assert info["is_success"] and info["coverage"] > 0.95


def test_snapshot_replays_a_rollout_exactly() -> None:
    """Restoring twice gives the same rollout bit for bit, and from a state without contacts in
    the live world's cache it is the live env's own rollout."""
    env = _env()
    env.reset(seed=0)
    task = env.unwrapped
    targets = [np.array([250.0 + 10 * k, 320.0 - 12 * k]) for k in range(12)]
    snapshot = PymunkSnapshot(task)
    snapshot.take(task)
    assert not any(task.space.shape_query(shape) for shape in task.block.shapes)
    live = []
    for target in targets:
        env.step(target)
        live.append(_state(task))
    for _ in range(2):
        world = snapshot.restore()
        replay = []
        for target in targets:
            step_physics(world, target, snapshot.substeps)
            replay.append(_state(world))
        np.testing.assert_array_equal(np.array(replay), np.array(live))
    assert np.ptp(np.array(live)[:, 2:], axis=0).max() > 1.0  # the pusher moved the block


def test_bad_config_and_env_are_named() -> None:
    with pytest.raises(ValueError, match="push_depths_px"):
        GymPushTExpertConfig(push_depths_px=(0.0,))
    with pytest.raises(TypeError, match="gym_pusht"):
        GymPushTExpert().reset(gym.make("CartPole-v1"), np.random.default_rng(0))

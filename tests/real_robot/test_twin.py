"""The MuJoCo twin: exact harness steps on the manual clock, real-time behaviour as an arm."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from robocompose.real_robot.base import ArmStoppedError
from robocompose.real_robot.drivers.twin import (
    PUSHER_Z_M,
    TwinArm,
    action_from_state,
    ee_target_from_action,
)
from robocompose.sim.tasks import make_env, make_expert

# against the wall clock: `make test` runs these on their own, after the parallel pass
pytestmark = pytest.mark.realtime

os.environ.setdefault("MUJOCO_GL", "egl")


def wait_sim(twin: TwinArm, duration_s: float, timeout_s: float = 20.0) -> None:
    """Wait until the twin's physics has advanced `duration_s` of sim time (load-proof)."""
    start, deadline = twin.sim_time_s, time.monotonic() + timeout_s
    while twin.sim_time_s - start < duration_s:
        assert time.monotonic() < deadline, "the twin's physics thread is not advancing"
        time.sleep(0.005)


@pytest.fixture
def twin():
    arm = TwinArm("PickPlace")
    arm.reset(seed=7)
    yield arm
    arm.close()


@pytest.mark.parametrize("task", ["PickPlace", "PushT"])
def test_manual_clock_steps_exactly_like_the_env(task: str) -> None:
    env, twin = make_env(task), TwinArm(task, realtime=False)
    expert, twin_expert = make_expert(task), make_expert(task)
    obs, _ = env.reset(seed=11)
    first = twin.reset(seed=11)
    expert.reset(env, np.random.default_rng(11))
    twin_expert.reset(twin.env, np.random.default_rng(11))
    np.testing.assert_array_equal(obs["state"], first.obs["state"])
    for _ in range(25):
        obs, _, terminated, _, info = env.step(expert.act(env))
        twin.command_ee(*ee_target_from_action(twin_expert.act(twin.env)))
        twin.advance(1.0 / twin.control_hz)
        now = twin.observe()
        np.testing.assert_array_equal(obs["state"], now.obs["state"])
        assert now.success == info["success"]
        if terminated:
            break
    twin.close()
    env.close()


def test_commands_move_the_gantry_and_hold_keeps_it(twin: TwinArm) -> None:
    start = twin.read_state().ee_pos_m
    target = start + np.array([0.05, -0.03, 0.02])
    twin.command_ee(target, 1.0)
    wait_sim(twin, 0.6)
    state = twin.read_state()
    np.testing.assert_allclose(state.ee_pos_m, target, atol=0.003)
    assert state.gripper > 0.9  # closed on nothing

    twin.command_ee(start)  # gripper None: stays closed
    wait_sim(twin, 0.05)  # under way back
    twin.hold()
    held = twin.read_state().ee_pos_m
    assert np.linalg.norm(held - target) > 0.005
    wait_sim(twin, 0.5)
    settled = twin.read_state()
    assert np.linalg.norm(settled.ee_pos_m - held) < 0.01  # stayed, not went on to `start`
    assert np.linalg.norm(settled.ee_pos_m - start) > 0.02
    assert settled.gripper > 0.9


def test_stop_freezes_and_refuses_until_reset(twin: TwinArm) -> None:
    start = twin.read_state().ee_pos_m
    twin.command_ee(start + np.array([0.1, 0.0, 0.0]))
    wait_sim(twin, 0.1)
    twin.stop()
    assert twin.stopped
    with pytest.raises(ArmStoppedError, match="reset"):
        twin.command_ee(start)
    wait_sim(twin, 0.2)
    after_a_while = twin.read_state().ee_pos_m
    wait_sim(twin, 0.3)
    np.testing.assert_allclose(twin.read_state().ee_pos_m, after_a_while, atol=1e-4)
    twin.reset(seed=7)
    assert not twin.stopped
    twin.command_ee(start)


def test_sim_time_never_runs_ahead_of_the_wall_clock() -> None:
    twin = TwinArm("PickPlace", time_scale=4.0)
    t0 = time.monotonic()
    twin.reset(seed=0)
    wait_sim(twin, 0.4)
    elapsed_s = time.monotonic() - t0
    assert twin.sim_time_s <= 4.0 * elapsed_s + twin.task.model.opt.timestep
    twin.close()


def test_observe_renders_the_image_and_reports_the_task() -> None:
    twin = TwinArm("PushT", obs_keys=("state", "image"), realtime=False)
    first = twin.reset(seed=3)
    assert first.obs["image"].shape == (96, 96, 3) and first.obs["image"].dtype == np.uint8
    assert first.obs["state"].shape == (6,)
    assert not first.success and 0.0 <= first.score < 0.95
    state = twin.read_state()
    np.testing.assert_allclose(state.ee_pos_m[:2], first.obs["state"][:2])
    assert state.ee_pos_m[2] == PUSHER_Z_M
    twin.close()


def test_action_conversions_round_trip() -> None:
    pos, grip = ee_target_from_action(np.array([0.1, -0.1, 0.05, 0.5]))
    np.testing.assert_allclose(pos, [0.1, -0.1, 0.05])
    assert grip == 0.5
    pos, grip = ee_target_from_action(np.array([0.1, 0.2]))
    np.testing.assert_allclose(pos, [0.1, 0.2, PUSHER_Z_M])
    assert grip is None
    with pytest.raises(ValueError, match=r"shape \(4,\).*Got \(3,\)"):
        ee_target_from_action(np.zeros(3))
    twin = TwinArm("PickPlace", realtime=False)
    twin.reset(seed=1)
    hold_action = action_from_state(twin.read_state(), 4)
    twin.command_ee(*ee_target_from_action(hold_action))
    before = twin.read_state().ee_pos_m
    twin.advance(0.5)
    np.testing.assert_allclose(twin.read_state().ee_pos_m, before, atol=1e-3)
    twin.close()


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="`time_scale` must be > 0. Got 0"):
        TwinArm("PickPlace", time_scale=0)
    with pytest.raises(ValueError, match="unknown task 'PickPlate'.*PickPlace"):
        TwinArm("PickPlate")
    twin = TwinArm("Stack", realtime=False)
    with pytest.raises(ValueError, match="`pos_m` must be a finite"):
        twin.command_ee(np.array([0.0, np.nan, 0.1]))
    with pytest.raises(ValueError, match="`pos_m`"):
        twin.command_ee(np.zeros(2))
    with pytest.raises(ValueError, match="`gripper`"):
        twin.command_ee(np.zeros(3), float("inf"))
    twin.close()
    realtime = TwinArm("PickPlace")
    with pytest.raises(RuntimeError, match="realtime=False"):
        realtime.advance(0.1)
    realtime.close()
    realtime.close()  # idempotent

"""The safety layer against the MuJoCo twin: every limit, refusal, the watchdog and the e-stops.

What reached the arm is read off the twin's own servo targets (`data.ctrl`), so these tests see
what the hardware would have received, not what the layer says it sent.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from dataclasses import replace

import numpy as np
import pytest

from robocompose.real_robot.base import Arm, ArmState, ArmStoppedError
from robocompose.real_robot.drivers.twin import TwinArm, ee_target_from_action
from robocompose.real_robot.safety import SafetyEvent, SafetyLayer
from robocompose.real_robot.safety_limits import (
    ROBOT_LIMITS,
    SafetyLimits,
    limits_for,
    twin_limits,
)
from robocompose.sim.tasks import make_expert

HZ = 10.0
DT = 1.0 / HZ
WIDE = SafetyLimits(  # nothing binds unless a test narrows one field
    (-0.2, -0.2, 0.015), (0.2, 0.2, 0.25), max_step_m=1.0, max_speed_m_s=100.0, max_accel_m_s2=1e4
)


def arm_target(twin: TwinArm) -> np.ndarray:
    """The gantry's xyz servo targets: what the arm was last told."""
    return twin.task.data.ctrl[:3].copy()


def wait_for(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.002)


@pytest.fixture
def manual():
    """A twin on the manual clock (nothing moves between commands) at a known pose."""
    twin = TwinArm("PickPlace", realtime=False)
    twin.reset(seed=5)
    twin.command_ee(np.array([0.0, 0.0, 0.1]))
    twin.advance(1.0)
    yield twin
    twin.close()


def layer_on(twin: TwinArm, **limits) -> SafetyLayer:
    return SafetyLayer(twin, replace(WIDE, **limits), control_hz=HZ, watchdog=False)


def kinds(result) -> list[str]:
    return [e.kind for e in result.events]


def test_workspace_box_clips_every_axis(manual: TwinArm) -> None:
    layer = layer_on(manual, workspace_low_m=(-0.1, -0.1, 0.05), workspace_high_m=(0.1, 0.1, 0.2))
    result = layer.command_ee([0.5, -0.5, 0.0])
    assert result.sent and kinds(result) == ["workspace"]
    np.testing.assert_allclose(arm_target(manual), [0.1, -0.1, 0.05])
    event = result.events[0]
    assert event.raw == [0.5, -0.5, 0.0] and event.sent == [0.1, -0.1, 0.05]


def test_float32_rounding_of_a_bound_is_clipped_without_an_event(manual: TwinArm) -> None:
    layer = layer_on(manual)
    result = layer.command_ee(np.array([0.0, 0.0, 0.015], dtype=np.float32))  # 0.01499999966
    assert result.sent and result.events == ()
    assert result.target[2] == 0.015


def test_step_clamp_limits_the_move_per_command(manual: TwinArm) -> None:
    layer = layer_on(manual, max_step_m=0.02)
    result = layer.command_ee([0.1, 0.0, 0.1])
    assert kinds(result) == ["delta"]
    np.testing.assert_allclose(arm_target(manual), [0.02, 0.0, 0.1], atol=1e-4)
    layer.command_ee([0.1, 0.0, 0.1])
    np.testing.assert_allclose(arm_target(manual), [0.04, 0.0, 0.1], atol=1e-4)


def test_speed_limit_uses_the_control_period(manual: TwinArm) -> None:
    layer = layer_on(manual, max_speed_m_s=0.3)  # 3 cm per 10 Hz command
    result = layer.command_ee([0.0, 0.1, 0.1])
    assert kinds(result) == ["speed"]
    np.testing.assert_allclose(arm_target(manual), [0.0, 0.03, 0.1], atol=1e-4)
    fast = SafetyLayer(manual, replace(WIDE, max_speed_m_s=0.3), control_hz=50, watchdog=False)
    fast.command_ee([0.0, 0.1, 0.1])  # a new layer starts from the measured pose (0, 0, 0.1)
    np.testing.assert_allclose(arm_target(manual), [0.0, 0.006, 0.1], atol=1e-4)


def test_acceleration_limit_ramps_speed_up_and_down(manual: TwinArm) -> None:
    layer = layer_on(manual, max_accel_m_s2=1.0)  # the velocity changes <= 0.1 m/s a command
    sent = [arm_target(manual)]
    for _ in range(3):
        result = layer.command_ee([0.2, 0.0, 0.1])
        assert "accel" in kinds(result)
        sent.append(arm_target(manual))
    steps = np.diff(np.array(sent)[:, 0])
    np.testing.assert_allclose(steps, [0.01, 0.02, 0.03], atol=1e-4)
    layer.command_ee(sent[-1])  # "stop here" at 0.3 m/s: braking is limited too
    assert arm_target(manual)[0] - sent[-1][0] == pytest.approx(0.02)


def test_gripper_is_clipped_into_its_range(manual: TwinArm) -> None:
    layer = layer_on(manual, gripper_range=(-1.0, 0.5))
    result = layer.command_ee([0.0, 0.0, 0.1], 2.0)
    assert kinds(result) == ["gripper"] and result.gripper == 0.5
    expected_half_gap = 0.25 * 0.09 * (1.0 - 0.5)
    np.testing.assert_allclose(manual.task.data.ctrl[3:5], expected_half_gap)


@pytest.mark.parametrize(
    ("pos", "gripper", "kind", "message"),
    [
        ([0.0, np.nan, 0.1], None, "nonfinite", "non-finite"),
        ([0.0, 0.0, np.inf], None, "nonfinite", "non-finite"),
        ([0.0, 0.0, 0.1], float("nan"), "nonfinite", "`gripper` has non-finite"),
        ([0.0, 0.0], None, "shape", r"shape \(3,\). Got \(2,\)"),
        ([[0.0, 0.0, 0.1]], None, "shape", r"Got \(1, 3\)"),
        ("0.0 0.0 0.1", None, "shape", "not numeric"),
        ({"x": 0.0}, None, "shape", "not numeric"),
        (None, None, "shape", r"Got \(\)"),
        ([0.0, 0.0, 0.1], [0.1, 0.2], "shape", r"`gripper` must have shape \(1,\)"),
        ([0.0, 0.0, 0.1], "open", "shape", "`gripper` is not numeric"),
    ],
)
def test_bad_commands_are_refused_and_the_arm_holds(manual, pos, gripper, kind, message) -> None:
    layer = layer_on(manual)
    layer.command_ee([0.05, 0.05, 0.1])
    manual.advance(0.05)  # under way to the target
    moving_at = manual.read_state().ee_pos_m
    result = layer.command_ee(pos, gripper)
    assert not result.sent and kinds(result) == [kind]
    assert result.events[0].sent is None
    assert re.search(message, result.events[0].reason)
    np.testing.assert_allclose(arm_target(manual), moving_at)  # held where it was
    json.dumps([e.as_dict() for e in layer.drain_events()])


def test_after_a_refusal_limits_restart_from_the_measured_pose(manual: TwinArm) -> None:
    layer = layer_on(manual, max_step_m=0.01)
    for _ in range(3):
        layer.command_ee([0.1, 0.0, 0.1])
    manual.advance(0.5)
    layer.command_ee([np.nan] * 3)
    manual.advance(0.5)
    at = manual.read_state().ee_pos_m
    layer.command_ee([0.1, 0.0, 0.1])
    assert np.linalg.norm(arm_target(manual) - at) == pytest.approx(0.01)


def test_an_arm_outside_the_box_is_not_pulled_in_by_a_jump(manual: TwinArm) -> None:
    far = layer_on(manual, workspace_low_m=(0.1, -0.2, 0.015), max_step_m=0.02)
    result = far.command_ee([0.15, 0.0, 0.1])
    assert not result.sent and kinds(result) == ["workspace_start"]
    assert "outside the workspace box" in result.events[0].reason
    near = layer_on(manual, workspace_low_m=(0.01, -0.2, 0.015), max_step_m=0.02)
    result = near.command_ee([0.15, 0.0, 0.1])  # 1 cm outside: starts from the box's edge
    assert result.sent
    np.testing.assert_allclose(arm_target(manual), [0.03, 0.0, 0.1], atol=1e-4)


def test_random_commands_never_leave_the_limits(manual: TwinArm) -> None:
    limits = SafetyLimits(
        (-0.15, -0.15, 0.03), (0.15, 0.15, 0.2), max_step_m=0.04, max_speed_m_s=0.3,
        max_accel_m_s2=2.0, gripper_range=(-1.0, 0.8),
    )  # fmt: skip
    layer = SafetyLayer(manual, limits, control_hz=HZ, watchdog=False)
    rng = np.random.default_rng(0)
    previous = arm_target(manual)
    for i in range(300):
        pos = rng.uniform(-0.4, 0.4, 3)
        if i % 17 == 0:
            pos[rng.integers(3)] = rng.choice([np.nan, np.inf, -np.inf])
        result = layer.command_ee(pos, float(rng.uniform(-3, 3)))
        manual.advance(DT)
        target = arm_target(manual)
        assert np.all(target >= np.array(limits.workspace_low_m) - 1e-12)
        assert np.all(target <= np.array(limits.workspace_high_m) + 1e-12)
        if result.sent:
            assert np.linalg.norm(target - previous) <= limits.max_step_m + 1e-9
            assert result.gripper is not None and -1.0 <= result.gripper <= 0.8
        previous = target


def test_joint_commands_need_joint_limits(manual: TwinArm) -> None:
    layer = layer_on(manual)
    result = layer.command_joints(np.zeros(6))
    assert not result.sent and kinds(result) == ["joints"]
    assert "joint_low_rad" in result.events[0].reason


class JointArm(Arm):
    """A recording six-joint arm: the twin has no revolute joints to command, and no arm with
    them runs here."""

    def __init__(self) -> None:
        self.joints = np.zeros(6)
        self.holds = 0

    def read_state(self) -> ArmState:
        return ArmState(time.monotonic(), np.zeros(3), -1.0, self.joints.copy())

    def command_ee(self, pos_m, gripper=None) -> None:
        raise AssertionError("not used")

    def command_joints(self, joints_rad, gripper=None) -> None:
        self.joints = np.array(joints_rad)

    def hold(self) -> None:
        self.holds += 1

    def stop(self) -> None:
        pass


def test_joint_range_and_step_clamps() -> None:
    arm = JointArm()
    layer = SafetyLayer(arm, ROBOT_LIMITS["xarm6"], control_hz=HZ, watchdog=False)
    result = layer.command_joints([0.05, 0.0, 0.5, 0.0, 0.0, 0.0])
    assert kinds(result) == ["joint_range", "joint_delta"]
    np.testing.assert_allclose(arm.joints, [0.05, 0.0, 0.1, 0.0, 0.0, 0.0])  # J3 <= 11 deg
    result = layer.command_joints([0.05, 0.0, 0.5, 0.0, 0.0, np.nan])
    assert not result.sent and kinds(result) == ["nonfinite"] and arm.holds == 1
    assert kinds(layer.command_joints(np.zeros(7))) == ["shape"]


def test_limits_validate_and_name_the_field() -> None:
    with pytest.raises(ValueError, match="`max_speed_m_s` must be a finite number > 0. Got 0"):
        replace(WIDE, max_speed_m_s=0.0)
    with pytest.raises(ValueError, match="`workspace_low_m` must be below"):
        replace(WIDE, workspace_low_m=(0.3, 0.0, 0.0))
    with pytest.raises(ValueError, match="`gripper_range`"):
        replace(WIDE, gripper_range=(0.5, -0.5))
    with pytest.raises(ValueError, match="`workspace_high_m` must be 3 finite"):
        replace(WIDE, workspace_high_m=(1.0, 1.0))
    with pytest.raises(ValueError, match="given together"):
        replace(WIDE, joint_low_rad=(0.0,))
    with pytest.raises(ValueError, match="Did you mean 'ur5e'"):
        limits_for("ur5")
    assert twin_limits("robocompose/PushT-v0") is ROBOT_LIMITS["twin_pusht"]
    with pytest.raises(ValueError, match="`control_hz` must be in"):
        SafetyLayer(JointArm(), WIDE, control_hz=0)


def test_events_reach_the_callback_the_drain_and_the_log(manual: TwinArm, caplog) -> None:
    seen: list[SafetyEvent] = []
    layer = SafetyLayer(
        manual, replace(WIDE, max_step_m=0.01), control_hz=HZ, on_event=seen.append,
        watchdog=False,
    )  # fmt: skip
    with caplog.at_level("INFO", logger="robocompose.real_robot.safety"):
        layer.command_ee([0.1, 0.0, 0.1])
        layer.command_ee([np.nan, 0.0, 0.1])
    assert [e.kind for e in seen] == ["delta", "nonfinite"]
    assert layer.drain_events() == seen and layer.drain_events() == []
    assert seen[1].raw == ["nan", 0.0, 0.1]  # strict JSON
    assert layer.counts == {"delta": 1, "nonfinite": 1}
    assert "safety delta" in caplog.text and "safety nonfinite" in caplog.text


# -- real time: watchdog, e-stops, an expert through the layer ------------------------------------


@pytest.fixture
def live():
    twin = TwinArm("PickPlace")
    twin.reset(seed=100_000)
    yield twin
    twin.close()


def test_watchdog_holds_a_stalled_caller_within_one_period(live: TwinArm) -> None:
    limits = replace(WIDE, watchdog_ms=150.0)  # motion limits wide: the servo sets the pace
    layer = SafetyLayer(live, limits, control_hz=HZ)
    start = live.read_state().ee_pos_m
    far = np.array([-0.19 if start[0] > 0 else 0.19, start[1], start[2]])
    for _ in range(3):
        layer.command_ee(start)
        time.sleep(DT / 2)
    assert layer.counts["watchdog"] == 0
    last_command_s = time.monotonic()
    layer.command_ee(far)  # ~0.4 s away for the servo: only a hold stops the arm short
    wait_for(lambda: layer.counts["watchdog"] == 1)
    event = next(e for e in layer.history if e.kind == "watchdog")
    assert event.time_s - last_command_s <= 0.150 + DT
    time.sleep(0.4)
    settled = live.read_state().ee_pos_m
    np.testing.assert_allclose(arm_target(live), settled, atol=1e-3)  # holding there
    assert abs(settled[0] - far[0]) > 0.03  # stopped well short of the last target
    assert layer.counts["watchdog"] == 1  # holds once, then waits for a command
    layer.close()


def test_estop_function_stops_the_arm_and_refuses_everything(live: TwinArm) -> None:
    layer = SafetyLayer(live, twin_limits("PickPlace"), control_hz=HZ)
    start = live.read_state().ee_pos_m
    layer.command_ee(start + [0.06, 0.0, 0.0])
    time.sleep(0.05)
    layer.estop()
    assert live.stopped and layer.estopped  # the stop went out before estop() returned
    frozen = arm_target(live)
    assert frozen[0] < start[0] + 0.06
    path = [_position_after_sim(live, 0.02)[0] for _ in range(15)]
    assert max(abs(x - frozen[0]) for x in path) < 0.01  # servo overshoot only
    assert abs(path[-1] - frozen[0]) < 1e-3  # at rest on the frozen target
    result = layer.command_ee(start)
    assert not result.sent and kinds(result) == ["estop"]
    np.testing.assert_array_equal(arm_target(live), frozen)
    with pytest.raises(ArmStoppedError):
        live.command_ee(start)
    assert [e.kind for e in layer.drain_events()] == ["estop_engaged", "estop"]
    layer.estop()  # idempotent
    live.reset(seed=1)
    layer.rearm()
    assert layer.command_ee(live.read_state().ee_pos_m).sent
    layer.close()


def _position_after_sim(twin: TwinArm, duration_s: float) -> np.ndarray:
    start = twin.sim_time_s
    wait_for(lambda: twin.sim_time_s - start >= duration_s)
    return twin.read_state().ee_pos_m


def test_estop_by_a_real_sigint(live: TwinArm) -> None:
    calls: list[int] = []
    original = signal.signal(signal.SIGINT, lambda signum, frame: calls.append(signum))
    layer = SafetyLayer(live, twin_limits("PickPlace"), control_hz=HZ)
    try:
        layer.install_sigint_handler()
        layer.command_ee(live.read_state().ee_pos_m + [0.05, 0.0, 0.0])
        os.kill(os.getpid(), signal.SIGINT)
        wait_for(lambda: live.stopped)
        assert layer.estopped and calls == []
        assert not layer.command_ee(live.read_state().ee_pos_m).sent
        os.kill(os.getpid(), signal.SIGINT)  # a second Ctrl-C goes to the previous handler
        wait_for(lambda: calls == [signal.SIGINT])
        layer.close()
        assert signal.getsignal(signal.SIGINT) is not None
        assert signal.getsignal(signal.SIGINT).__name__ == "<lambda>"  # restored
    finally:
        signal.signal(signal.SIGINT, original)
    assert any(e.kind == "estop_engaged" and e.reason == "SIGINT" for e in layer.history)


def test_estop_by_enter_on_a_keyboard_stream(live: TwinArm) -> None:
    layer = SafetyLayer(live, twin_limits("PickPlace"), control_hz=HZ)
    read_fd, write_fd = os.pipe()
    with os.fdopen(read_fd) as keyboard, os.fdopen(write_fd, "w") as typist:
        listener = layer.start_keyboard_listener(keyboard)
        layer.command_ee(live.read_state().ee_pos_m)
        assert not layer.estopped
        typist.write("\n")
        typist.flush()
        wait_for(lambda: live.stopped)
        listener.join(timeout=5)
    assert layer.estopped and not listener.is_alive()
    layer.close()


def test_estop_from_another_thread_while_commands_stream(live: TwinArm) -> None:
    layer = SafetyLayer(live, twin_limits("PickPlace"), control_hz=50.0)
    start = live.read_state().ee_pos_m
    sent_after: list[bool] = []
    stopper = threading.Timer(0.2, layer.estop)
    stopper.start()
    for k in range(30):
        stopped = layer.estopped
        result = layer.command_ee(start + [0.002 * k, 0.0, 0.0])
        if stopped:
            sent_after.append(result.sent)
        time.sleep(0.02)
    stopper.join()
    assert sent_after and not any(sent_after)
    layer.close()


def test_scripted_expert_succeeds_on_the_twin_through_the_layer(live: TwinArm) -> None:
    layer = SafetyLayer(live, twin_limits("PickPlace"), control_hz=HZ)
    expert = make_expert("PickPlace")
    live.reset(seed=100_000)
    expert.reset(live.env, np.random.default_rng(100_000))
    next_tick = time.monotonic()
    for _ in range(150):
        with live.lock:
            action = expert.act(live.env)
        assert layer.command_ee(*ee_target_from_action(action)).sent
        next_tick += DT
        time.sleep(max(0.0, next_tick - time.monotonic()))
        if live.observe().success:
            break
    assert live.observe().success
    assert not {"shape", "nonfinite", "estop"} & set(layer.counts)
    layer.close()

"""The control process: ring buffer, trajectory, and real spawned control processes driving the
twin and the UR driver (against the fake RTDE controller) at the servo rate. No timed
assertions beyond generous tick counts."""

from __future__ import annotations

import functools
import json
import os
import signal
import struct
import time

import numpy as np
import pytest

from robocompose.real_robot.control import ControlProcess
from robocompose.real_robot.control_config import BRAKING, ESTOPPED, HOLDING, SENT, ControlConfig
from robocompose.real_robot.drivers.twin import TwinArm
from robocompose.real_robot.faults.report import limit_violations, received_from_telemetry
from robocompose.real_robot.process_loop import twin_control
from robocompose.real_robot.ring import RingBuffer
from robocompose.real_robot.safety_limits import limits_for
from robocompose.real_robot.trajectory import (
    Sample,
    Trajectory,
    Waypoint,
    pack_waypoint,
    slerp,
    unpack_waypoint,
)

# against the wall clock: `make test` runs these on their own, after the parallel pass
pytestmark = pytest.mark.realtime

RATE_HZ = 250.0


# -- in-process parts ---------------------------------------------------------------------------


def test_ring_buffer_reads_in_order_and_counts_overruns_and_torn_records() -> None:
    ring = RingBuffer.create(capacity=8, width=3)
    reader = RingBuffer.attach(ring.name)
    for i in range(5):
        ring.write(np.full(3, i))
    batch = reader.read_new()
    assert batch.records[:, 0].tolist() == [0, 1, 2, 3, 4] and batch.lost == batch.torn == 0
    assert reader.read_new().records.shape == (0, 3)
    for i in range(5, 25):  # 20 writes into 8 slots: 12 lost
        ring.write(np.full(3, i))
    batch = reader.read_new()
    assert batch.lost == 12 and batch.records[:, 0].tolist() == list(range(17, 25))
    ring.write(np.full(3, 25.0))
    ring._seq[25 % 8] += 1  # caught mid-write (odd counter)
    batch = reader.read_new()
    assert batch.torn == 1 and len(batch.records) == 0
    assert reader.latest() is None  # the newest record is torn: no good latest one
    ring.write(np.full(3, 26.0))
    np.testing.assert_array_equal(reader.latest(), [26.0, 26.0, 26.0])
    reader.close()
    ring.close()


def test_trajectory_interpolates_drops_late_waypoints_and_blends_newer_plans_in() -> None:
    traj = Trajectory("linear", blend_s=0.5)
    here = Sample(np.zeros(3), None, -1.0)
    assert traj.insert(Waypoint(1.0, np.array([1.0, 0, 0]), None, 1.0), now_s=0.0, current=here)
    assert traj.insert(Waypoint(2.0, np.array([1.0, 1.0, 0]), None, -1.0), 0.0, here)
    np.testing.assert_allclose(traj.sample(0.0).pos_m, [0, 0, 0])  # continuous from here
    assert traj.sample(0.9).gripper == 1.0  # stepwise: the waypoint being approached
    np.testing.assert_allclose(traj.sample(1.5).pos_m, [1.0, 0.5, 0])  # the plan, blend done
    assert traj.sample(1.5).gripper == -1.0
    np.testing.assert_allclose(traj.sample(9.0).pos_m, [1.0, 1.0, 0])  # held at the end
    # late: its time has passed on arrival -> dropped, nothing replayed
    assert not traj.insert(Waypoint(0.9, np.array([5.0, 5, 5])), now_s=1.0, current=here)
    # a newer plan from t=1.5 on replaces the queued one, blended in from where the old one is
    traj.prune(1.2)
    assert traj.insert(Waypoint(1.5, np.array([0.0, 0, 0])), now_s=1.2, current=here)
    assert traj.end_s == 1.5
    np.testing.assert_allclose(traj.sample(1.2).pos_m, [1.0, 0.2, 0])
    np.testing.assert_allclose(traj.sample(1.7).pos_m, [0.0, 0, 0])
    assert 0.0 < traj.sample(1.45).pos_m[0] < 1.0  # on the way from one plan to the other
    # cubic goes through the waypoints
    cubic = Trajectory("cubic")
    for t, x in [(1.0, 0.0), (2.0, 1.0), (3.0, 4.0), (4.0, 9.0)]:
        cubic.insert(Waypoint(t, np.array([x, 0, 0])), 0.0, None)
    np.testing.assert_allclose(cubic.sample(3.0).pos_m, [4.0, 0, 0])
    assert 1.0 < cubic.sample(2.5).pos_m[0] < 4.0


def test_waypoint_records_refuse_nan_and_bad_rotations_and_slerp_halves_the_angle() -> None:
    good, problem = unpack_waypoint(pack_waypoint(1.0, np.array([0.1, 0.2, 0.3]), 0.5))
    assert problem == "" and good is not None and good.gripper == 0.5 and good.quat is None
    assert unpack_waypoint(pack_waypoint(1.0, np.array([np.nan, 0, 0])))[1] == "not finite"
    bad_quat = pack_waypoint(1.0, np.zeros(3), quat=np.array([1.0, 1.0, 0, 0]))
    assert unpack_waypoint(bad_quat)[1] == "not a unit quaternion"
    q0 = np.array([1.0, 0, 0, 0])
    q1 = np.array([np.cos(np.pi / 4), 0, 0, np.sin(np.pi / 4)])  # 90 deg about z
    half = slerp(q0, q1, 0.5)
    np.testing.assert_allclose(half, [np.cos(np.pi / 8), 0, 0, np.sin(np.pi / 8)], atol=1e-12)


def test_twin_holds_on_its_own_after_the_command_timeout() -> None:
    twin = TwinArm("PickPlace", realtime=False, command_timeout_s=0.04)
    start = twin.read_state().ee_pos_m
    twin.command_ee(start + np.array([0.1, 0.0, 0.0]), -1.0)
    twin.advance(0.02)
    assert twin.command_timeouts == 0
    twin.advance(0.04)  # no command for > 0.04 s of sim time: the twin holds where it is
    assert twin.command_timeouts == 1
    held = twin.read_state().ee_pos_m
    twin.advance(0.5)
    assert np.linalg.norm(twin.read_state().ee_pos_m - held) < 0.01
    assert twin.read_state().ee_pos_m[0] < start[0] + 0.09  # it never reached the old target
    twin.close()


# -- real control processes ---------------------------------------------------------------------


@pytest.fixture
def control():
    factory, config = twin_control("PickPlace", RATE_HZ)
    process = ControlProcess(factory, config)
    process.reset_twin(100_000)
    yield process
    process.close()


def stream(
    control: ControlProcess, offset_m: np.ndarray, duration_s: float, stop_after_s: float = 1e9
) -> np.ndarray:
    """Schedule a straight move by `offset_m` over `duration_s`, refreshed every 40 ms like a
    policy loop (which stops after `stop_after_s`); the planned end point."""
    start = control.read_state().ee_pos_m
    t0 = time.monotonic()
    end = start + offset_m
    while (now := time.monotonic()) < t0 + min(duration_s, stop_after_s):
        times = now + 0.05 * np.arange(1, 6)
        fraction = np.clip((times - t0) / duration_s, 0, 1)[:, None]
        control.schedule(times, start + fraction * offset_m, -np.ones(5))
        time.sleep(0.04)
    return end


def rows_and_events(control: ControlProcess) -> tuple[np.ndarray, list[dict]]:
    time.sleep(0.05)
    return control.drain_telemetry(), control.drain_events()


def test_control_process_tracks_the_plan_at_its_rate_within_the_limits(control) -> None:
    control.drain_telemetry()
    end = stream(control, np.array([0.06, 0.0, 0.0]), 1.0)
    time.sleep(0.3)
    rows, events = rows_and_events(control)
    assert len(rows) > 0.5 * RATE_HZ * 1.3  # ticks at the servo rate, generously
    sent = rows[(rows[:, 10].astype(int) & SENT) > 0]
    assert len(sent) > 0.5 * RATE_HZ
    np.testing.assert_allclose(control.read_state().ee_pos_m, end, atol=0.01)
    received = received_from_telemetry(rows)
    assert limit_violations(received, control.config.limits, 1 / RATE_HZ) == []
    assert "control:resume" in {e["event"] for e in events}


def test_no_fresh_waypoint_brakes_then_holds_within_the_watchdog(control) -> None:
    control.drain_telemetry()
    stream(control, np.array([0.2, 0.0, 0.0]), 1.0, stop_after_s=0.4)  # stops mid-move
    last_fresh = time.monotonic()
    time.sleep(0.8)
    rows, events = rows_and_events(control)
    names = [e["event"] for e in events]
    assert "control:watchdog_hold" in names and "control:held" in names
    flags = rows[:, 10].astype(int)
    braking = rows[(flags & BRAKING) > 0, 1]
    assert len(braking) > 0, "the arm was moving: it brakes before it holds"
    watchdog_s = control.config.watchdog_s
    assert braking.min() - last_fresh < watchdog_s + 25 / RATE_HZ  # within 25 ticks of it
    held = rows[rows[:, 1] > braking.max()]
    assert len(held) > 10 and np.all(held[:, 10].astype(int) & HOLDING)
    assert not np.any(held[:, 10].astype(int) & SENT)  # holding: nothing streamed
    received = received_from_telemetry(rows)
    assert limit_violations(received, control.config.limits, 1 / RATE_HZ) == []


def test_estop_flag_stops_the_arm_at_the_next_tick_and_rearm_resumes(control) -> None:
    control.drain_telemetry()
    stream(control, np.array([0.03, 0.0, 0.0]), 0.3)
    flagged = time.monotonic()
    control.estop()
    stream(control, np.array([0.03, 0.0, 0.0]), 0.2)  # refused while e-stopped
    rows, events = rows_and_events(control)
    estop = [e for e in events if e["event"] == "control:estop"]
    assert len(estop) == 1 and estop[0]["latency_ms"] >= 0
    sent_after = rows[(rows[:, 1] > flagged) & ((rows[:, 10].astype(int) & SENT) > 0)]
    assert len(sent_after) <= 2  # at most the tick already running, then nothing
    assert (rows[-1, 10].astype(int) & ESTOPPED) > 0
    control.request("rearm")
    stream(control, np.array([0.02, 0.0, 0.0]), 0.3)
    rows, _ = rows_and_events(control)
    assert ((rows[:, 10].astype(int) & SENT) > 0).any()


def test_nan_late_out_of_range_waypoints_and_overruns_are_refused_dropped_or_clamped(
    control,
) -> None:
    control.drain_telemetry()
    here = control.read_state().ee_pos_m
    now = time.monotonic()
    control.write_record(pack_waypoint(now + 0.1, np.array([np.nan, 0.0, 0.0]), -1.0))
    control.schedule(np.array([now - 0.1]), here[None] + [0.2, 0.0, 0.0])  # 100 ms late
    time.sleep(0.1)
    far = here + np.array([5.0, -5.0, 5.0])  # far outside the box
    for _ in range(20):  # fed fresh for 1 s: the arm heads there until the box clips it
        control.schedule(time.monotonic() + np.array([0.05, 0.1]), np.stack([far, far]), [3, 3])
        time.sleep(0.05)
    burst = time.monotonic() + 0.3 + np.arange(control.config.capacity + 50) * 1e-4
    os.kill(control.pid, signal.SIGSTOP)  # the reader stalls while more than the ring holds
    control.schedule(burst, np.repeat(here[None], len(burst), 0))  # is written
    os.kill(control.pid, signal.SIGCONT)
    time.sleep(0.3)
    rows, events = rows_and_events(control)
    by_kind: dict[str, list[dict]] = {}
    for event in events:
        by_kind.setdefault(event["event"], []).append(event)
    assert by_kind["control:invalid_waypoint"][0]["reason"] == "not finite"
    assert by_kind["control:late_waypoint"][0]["late_ms"] >= 100
    assert {e["kind"] for e in by_kind["control:safety"]} >= {"workspace"}
    assert by_kind["control:overrun"][0]["lost"] >= 50
    received = received_from_telemetry(rows)
    assert received and limit_violations(received, control.config.limits, 1 / RATE_HZ) == []
    sent = np.array([e[2] for e in received if e[0] == "ee"])
    assert np.all(np.isfinite(sent))


def test_control_process_killed_is_seen_and_refused_by_name() -> None:
    factory, config = twin_control("PickPlace", RATE_HZ)
    process = ControlProcess(factory, config)
    process.process.kill()
    process.process.join(5)
    assert not process.alive
    with pytest.raises(ConnectionError, match="control process is gone"):
        process.request("hold")
    process.close()


def test_a_control_process_that_cannot_build_its_arm_says_why() -> None:
    config = ControlConfig(rate_hz=RATE_HZ, limits=limits_for("ur5e"))
    factory = functools.partial(TwinArm, "NoSuchTask")
    with pytest.raises(RuntimeError, match="could not start the arm.*NoSuchTask"):
        ControlProcess(factory, config)


# -- the UR driver in a control process, against the fake RTDE controller ------------------------


@pytest.fixture
def fake_ur(tmp_path, monkeypatch):
    pytest.importorskip("rtde_control", reason="ur-rtde (extra `arms`) not installed")
    from tests.real_robot.fake_rtde import CALL_LOG_ENV, FakeRTDEController

    controller = FakeRTDEController()
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv(CALL_LOG_ENV, str(calls))  # the spawned child inherits it
    yield controller, calls
    controller.close()


def test_ur_in_a_control_process_streams_servo_l_at_the_tick_and_kicks_its_watchdog(
    fake_ur,
) -> None:
    from tests.real_robot.fake_rtde import read_call_log, ur_on_fake_controller

    controller, calls = fake_ur
    rate = 500.0
    config = ControlConfig(rate_hz=rate, limits=limits_for("ur5e"))
    process = ControlProcess(
        functools.partial(ur_on_fake_controller, controller.host, rate, {}), config
    )
    try:
        stream(process, np.array([0.02, 0.0, 0.0]), 0.3)
        time.sleep(0.5)  # the watchdog brakes and holds (servoStop), then kicks while holding
        _, events = rows_and_events(process)
    finally:
        process.close()
    log = read_call_log(str(calls))
    names = [c[1] for c in log]
    assert log[0][1:] == ["setWatchdog", 10.0]
    servo = [c for c in log if c[1] == "servoL"]
    assert len(servo) > 50 and all(c[3] == pytest.approx(1 / rate) for c in servo)
    low, high = np.array(config.limits.workspace_low_m), np.array(config.limits.workspace_high_m)
    poses = np.array([c[2][:3] for c in servo])
    assert np.all(poses >= low) and np.all(poses <= high)
    assert "servoStop" in names and "kickWatchdog" in names[names.index("servoStop") :]
    assert "control:held" in {e["event"] for e in events}


def test_deploy_with_control_process_runs_episodes_on_the_twin_and_logs_its_events(
    tmp_path,
) -> None:
    from robocompose.real_robot.deploy import DeployConfig, DeployPolicyConfig, deploy
    from robocompose.real_robot.executor import ExecutorConfig
    from robocompose.shipped import shipped_path

    config = DeployConfig(
        robot="twin",
        task="PickPlace",
        policy=DeployPolicyConfig(checkpoint=str(shipped_path("PickPlace", "flow_mlp"))),
        executor=ExecutorConfig(mode="async", rate_hz=10),
        control="process",
        control_rate_hz=RATE_HZ,
        time_scale=2.0,
        episode_s=3.0,
        out=str(tmp_path),
    )
    summary = deploy(config)
    assert summary["episodes"] == 1
    lines = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    start = next(line for line in lines if line["kind"] == "episode_start")
    assert start["control"] == "process" and start["control_rate_hz"] == RATE_HZ
    steps = [line for line in lines if line["kind"] == "step"]
    assert any(step["sent"] for step in steps)  # targets the control process sent
    assert any(e["event"] == "control:resume" for step in steps for e in step["events"])
    with pytest.raises(ValueError, match="`control` must be 'loop' or 'process'"):
        DeployConfig(policy=config.policy, control="thread")


def test_timing_check_reports_the_period_error_and_what_the_process_was_granted() -> None:
    from robocompose.real_robot.timing_check import check_timing

    result = check_timing(125.0, 1.0, fifo=False)
    assert result["ticks"] > 60 and result["rate_hz"] == 125.0
    assert set(result["period_error_ms"]) == {"p50", "p99", "max"}
    assert result["granted"]["fifo"] is False and isinstance(result["meets_goal"], bool)


def test_xarm_in_a_control_process_streams_servo_cartesian_inside_the_box() -> None:
    pytest.importorskip("xarm.wrapper", reason="xarm-python-sdk (extra `arms`) not installed")
    from robocompose.real_robot.process_loop import build_driver
    from tests.real_robot.test_drivers import FakeXArmController

    try:
        controller = FakeXArmController()  # threads of this process answer the child over TCP
    except PermissionError:
        pytest.skip("binding port 502 needs root; the fake xArm controller cannot listen")
    rate = 250.0
    config = ControlConfig(rate_hz=rate, limits=limits_for("xarm6"), publish_every=25)
    process = ControlProcess(
        functools.partial(build_driver, "xarm6", controller.host, {}, rate), config
    )
    try:
        stream(process, np.array([0.03, 0.0, 0.0]), 0.4)
        rows, _ = rows_and_events(process)
    finally:
        process.close()
        controller.close()
    poses = np.array(
        [struct.unpack("<9f", p[:36])[:3] for p in controller.calls("MOVE_SERVO_CART")]
    )
    assert len(poses) > 0.3 * rate * 0.4  # streamed at the servo rate, generously
    low = 1000 * np.array(config.limits.workspace_low_m)
    high = 1000 * np.array(config.limits.workspace_high_m)
    assert np.all(poses >= low - 1e-3) and np.all(poses <= high + 1e-3)
    assert poses[:, 0].max() > 300.0 + 10.0  # it moved toward the plan (mm)
    assert limit_violations(received_from_telemetry(rows), config.limits, 1 / rate) == []


def test_franka_in_a_control_process_feeds_franky_motions_at_its_rate(tmp_path, monkeypatch):
    pytest.importorskip("franky", reason="franky-control (extra `arms`) not installed")
    from tests.real_robot.fake_franky import franka_on_fake_robot
    from tests.real_robot.fake_rtde import CALL_LOG_ENV, read_call_log

    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv(CALL_LOG_ENV, str(calls))
    rate = 100.0
    config = ControlConfig(rate_hz=rate, limits=limits_for("franka"))
    process = ControlProcess(functools.partial(franka_on_fake_robot, rate, {}), config)
    try:
        stream(process, np.array([0.03, 0.0, 0.0]), 0.5)
        time.sleep(0.5)  # watchdog: brake, then a stop motion
    finally:
        process.close()
    log = read_call_log(str(calls))
    moves = [c for c in log if c[2] == "CartesianMotion"]
    assert len(moves) > 0.3 * rate * 0.5 and all(c[4] for c in moves)  # asynchronous takeovers
    poses = np.array([c[3] for c in moves])
    low, high = np.array(config.limits.workspace_low_m), np.array(config.limits.workspace_high_m)
    assert np.all(poses >= low - 1e-9) and np.all(poses <= high + 1e-9)
    assert poses[:, 0].max() > 0.41  # moved toward the plan
    assert any(c[2] == "CartesianStopMotion" for c in log)  # the hold

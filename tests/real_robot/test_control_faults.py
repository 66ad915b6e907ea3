"""Faults on the control-process path, with real processes: the policy process killed (its
control process brakes, holds and exits on its own), the control process killed mid-episode
(the episode is aborted, the run resumes on a new one), the server stalled 2 s (the control
process holds within the watchdog and resumes). Nothing outside the limits reaches the arm."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import numpy as np
import pytest

from robocompose.real_robot.control import ControlProcess
from robocompose.real_robot.control_config import BRAKING, event_line
from robocompose.real_robot.faults.control import process_alive
from robocompose.real_robot.faults.report import limit_violations, received_from_telemetry
from robocompose.real_robot.process_loop import twin_control
from robocompose.real_robot.ring import RingBuffer

# against the wall clock: `make test` runs these on their own, after the parallel pass
pytestmark = pytest.mark.realtime

RATE_HZ = 250.0


def streaming_policy(names) -> None:
    """A policy process in miniature: its own control process on the twin, fed a moving plan
    every 40 ms until it is killed."""
    factory, config = twin_control("PickPlace", RATE_HZ)
    control = ControlProcess(factory, config)
    control.reset_twin(100_000)
    names.put((control.pid, control.telemetry.name, control.events_ring.name))
    start = control.read_state().ee_pos_m
    t0 = time.monotonic()
    while True:
        now = time.monotonic()
        times = now + 0.05 * np.arange(1, 6)
        x = 0.1 * np.clip((times - t0) / 2.0, 0, 1)[:, None] * np.array([1.0, 0.0, 0.0])
        control.schedule(times, start + x, -np.ones(5))
        time.sleep(0.04)


def test_policy_process_killed_the_control_process_brakes_holds_and_exits() -> None:
    context = multiprocessing.get_context("spawn")
    names = context.Queue()
    policy = context.Process(target=streaming_policy, args=(names,))
    policy.start()
    try:
        control_pid, telemetry_name, events_name = names.get(timeout=60)
        telemetry, events = RingBuffer.attach(telemetry_name), RingBuffer.attach(events_name)
        time.sleep(0.6)  # moving
        os.kill(policy.pid, signal.SIGKILL)
        policy.join(5)
        deadline = time.monotonic() + 10
        while process_alive(control_pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not process_alive(control_pid), "the control process outlived its policy process"
        rows = telemetry.read_new().records
        lines = [event_line(row) for row in events.read_new().records]
    finally:
        if policy.is_alive():
            policy.kill()
    for ring in (telemetry, events):  # orphaned by the killed process: unlink them here
        ring.owner = True
        ring.close()
    names = [line["event"] for line in lines]
    assert names.index("control:policy_process_gone") < names.index("control:held")
    assert (rows[:, 10].astype(int) & BRAKING).any()
    _, config = twin_control("PickPlace", RATE_HZ)
    assert limit_violations(received_from_telemetry(rows), config.limits, 1 / RATE_HZ) == []


@pytest.fixture(scope="module")
def served():
    pytest.importorskip("websockets", reason="the hardware bridge extra `robot` is not installed")
    from robocompose.real_robot.policy_adapter import load_served_policy
    from robocompose.shipped import shipped_path

    return load_served_policy(shipped_path("PickPlace", "flow_mlp"))


def test_control_process_killed_aborts_the_episode_and_the_run_resumes(served, tmp_path) -> None:
    from robocompose.real_robot.faults.control import run_control_fault

    report = run_control_fault("control_killed", served, tmp_path, inject_at_s=1.5, episode_s=3.0)
    assert report.details["episodes"] == [True, False]  # aborted, then a full one
    assert report.events["control_died"] == 1
    assert report.outside_limits == [] and report.commands_after_fault > 0
    with open(report.log) as f:
        assert '"kind": "control_died"' in f.read()


def test_server_stalled_the_control_process_holds_within_the_watchdog_and_resumes(
    served, tmp_path
) -> None:
    from robocompose.real_robot.faults.control import run_control_fault

    report = run_control_fault("server_stalled", served, tmp_path, inject_at_s=1.5, episode_s=4.5)
    assert report.outside_limits == [] and report.commands_after_fault > 0
    assert report.events["control:watchdog_hold"] >= 1 and report.events["control:held"] >= 1
    watchdog_ms = 250.0
    assert all(ms < watchdog_ms + 100 for ms in report.details["watchdog_silent_ms"])

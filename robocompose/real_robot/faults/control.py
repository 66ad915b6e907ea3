"""Fault injection for the control-process path on loopback: policy server, client, the policy
loop scheduling waypoints, and the twin inside its control process at the servo rate.

- policy_killed: the policy process (the control process's parent) is killed with SIGKILL;
- control_killed: the control process is killed with SIGKILL (the policy loop restarts it);
- server_stalled: every inference is held for 2 s;
- late_waypoints: every schedule reaches the ring buffer 100 ms after it was meant to;
- nan_waypoints / out_of_range_waypoints: the scheduled positions are NaN, or far outside the
  workspace with the gripper beyond its range;
- ring_overrun: each policy tick writes more than the ring holds.

What reached the arm is read from the control process's telemetry (every target it sent after
the safety layer, and when it held; `report.received_from_telemetry`), so a report checks the
stream at the servo rate.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from robocompose.real_robot.base import ServedPolicy
from robocompose.real_robot.control import ControlProcess
from robocompose.real_robot.control_config import event_line
from robocompose.real_robot.executor import ChunkExecutor, ExecutorConfig
from robocompose.real_robot.faults.injectors import STALL_S, FaultyControl, FaultyServer
from robocompose.real_robot.faults.report import (
    FaultReport,
    hold_latencies_ms,
    limit_violations,
    received_from_telemetry,
    watchdog_details,
)
from robocompose.real_robot.process_loop import ProcessDeployLoop, twin_control
from robocompose.real_robot.ring import RingBuffer
from robocompose.real_robot.safety_limits import twin_limits
from robocompose.real_robot.steplog import JsonlWriter

CONTROL_FAULTS = (
    "policy_killed",
    "control_killed",
    "server_stalled",
    "late_waypoints",
    "nan_waypoints",
    "out_of_range_waypoints",
    "ring_overrun",
)


def run_control_fault(
    fault: str | None,
    served: ServedPolicy,
    out_dir: str | Path,
    *,
    seed: int = 100_000,
    rate_hz: float = 10.0,
    control_hz: float = 250.0,
    inject_at_s: float = 2.0,
    outage_s: float = 1.0,
    episode_s: float = 5.0,
) -> FaultReport:
    """One twin episode of `served` through a loopback server and a control process with `fault`
    injected at `inject_at_s` for `outage_s` (None: nothing injected); for the kills, the run
    then resumes with a fresh process."""
    if fault is not None and fault not in CONTROL_FAULTS:
        raise ValueError(f"`fault` must be one of {CONTROL_FAULTS}. Got {fault!r}.")
    if fault == "policy_killed":
        return _policy_killed(served, out_dir, seed, rate_hz, control_hz, inject_at_s, episode_s)
    from robocompose.real_robot.client import PolicyClient

    task = str(served.spec.extra.get("task", "PickPlace"))
    factory, config = twin_control(task, control_hz)
    log_path = Path(out_dir) / f"control_{fault}_{seed}_steps.jsonl"
    log_path.unlink(missing_ok=True)
    server = FaultyServer(served).start()
    client = PolicyClient(f"127.0.0.1:{server.port}", timeout_s=5.0, connect_timeout_s=1.0)
    executor = ChunkExecutor(
        lambda obs: client.infer(obs)["actions"], client.spec, ExecutorConfig(rate_hz=rate_hz)
    )
    log = JsonlWriter(log_path)
    telemetry: list[np.ndarray] = []
    faulty: list[FaultyControl] = []

    def start() -> ControlProcess:
        control = ControlProcess(factory, config)
        if fault not in (None, "server_stalled", "control_killed"):
            faulty.append(FaultyControl(control, fault))
        return control

    loop = ProcessDeployLoop(
        start, executor, log, on_twin=True, client=client, stop_on_success=False
    )
    loop.telemetry_sink = telemetry
    injected: list[float] = []

    def inject() -> None:
        time.sleep(inject_at_s)
        injected.append(time.monotonic())
        if fault == "server_stalled":
            server.stall(STALL_S)
            time.sleep(STALL_S)
        elif fault == "control_killed":
            pid = loop.control.pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
        else:
            faulty[-1].active.set()
            time.sleep(outage_s)
            faulty[-1].active.clear()
        injected.append(time.monotonic())

    episodes = []
    try:
        injector = threading.Thread(target=inject, name=f"inject-{fault}", daemon=True)
        if fault is not None:
            injector.start()
        episodes.append(loop.run_episode(seed, episode_s))
        if fault is not None:
            injector.join(timeout=10)
        if fault == "control_killed":  # the run resumes on a restarted control process
            episodes.append(loop.run_episode(seed + 1, 1.5))
        time.sleep(0.3)  # the hold after the episode, into the telemetry
        telemetry.append(loop.control.drain_telemetry())
    finally:
        executor.close()
        loop.close()
        client.close()
        server.stop()
        log.close()
    start_s, end_s = injected if len(injected) == 2 else ([*injected, 0.0][0], float("inf"))
    rows = np.concatenate([t for t in telemetry if len(t)]) if telemetry else np.empty((0, 14))
    received = received_from_telemetry(rows)
    holds = hold_latencies_ms(received, after_s=start_s)
    if fault == "control_killed":  # its twin died with it; the next holds are a new process's
        holds = []
    commands = [e for e in received if e[0] == "ee"]
    details: dict[str, Any] = {"episodes": [e.get("aborted", False) for e in episodes]}
    if faulty:
        details["corrupted_schedules"] = sum(f.corrupted for f in faulty)
    details.update(watchdog_details(log_path))
    return FaultReport(
        fault=fault,
        injected=1,
        commands=len(commands),
        outside_limits=limit_violations(received, config.limits, 1.0 / control_hz),
        hold_latency_ms=holds,
        commands_after_fault=sum(e[1] > end_s for e in commands),
        reconnects=client.reconnects,
        events={k: v for e in episodes for k, v in e["events"].items()},
        episode=episodes[0],
        log=str(log_path),
        details=details,
    )


# ---- the policy process killed -------------------------------------------------------------


def _policy_process(
    served_args: tuple,
    port: int,
    rate_hz: float,
    control_hz: float,
    seed: int,
    episode_s: float,
    names: Any,
) -> None:
    """A policy process (spawned): client, executor, control process; tells the test its rings."""
    from robocompose.real_robot.client import PolicyClient

    client = PolicyClient(f"127.0.0.1:{port}", timeout_s=5.0, connect_timeout_s=5.0)
    factory, config = twin_control(served_args[0], control_hz)
    executor = ChunkExecutor(
        lambda obs: client.infer(obs)["actions"], client.spec, ExecutorConfig(rate_hz=rate_hz)
    )
    log = JsonlWriter(Path(served_args[1]))
    loop = ProcessDeployLoop(
        lambda: ControlProcess(factory, config),
        executor,
        log,
        on_twin=True,
        client=client,
        stop_on_success=False,
    )
    control = loop.control
    names.put(
        (
            control.pid,
            control.telemetry.name,
            control.events_ring.name,
            control.waypoints.name,
            control.state_ring.name,
        )
    )
    loop.run_episode(seed, episode_s)


def _policy_killed(
    served: ServedPolicy,
    out_dir: str | Path,
    seed: int,
    rate_hz: float,
    control_hz: float,
    inject_at_s: float,
    episode_s: float,
) -> FaultReport:
    task = str(served.spec.extra.get("task", "PickPlace"))
    log_path = Path(out_dir) / f"control_policy_killed_{seed}_steps.jsonl"
    log_path.unlink(missing_ok=True)
    server = FaultyServer(served).start()
    context = multiprocessing.get_context("spawn")
    names = context.Queue()
    try:
        policy = context.Process(
            target=_policy_process,
            args=((task, str(log_path)), server.port, rate_hz, control_hz, seed, episode_s, names),
            daemon=False,  # it starts a control process of its own
        )
        policy.start()
        control_pid, *ring_names = names.get(timeout=60)
        rings = [RingBuffer.attach(name) for name in ring_names]
        telemetry, events = rings[0], rings[1]
        telemetry.skip_to_end()
        events.skip_to_end()
        time.sleep(inject_at_s)
        killed_at = time.monotonic()
        os.kill(policy.pid, signal.SIGKILL)  # type: ignore[arg-type]
        policy.join(5)
        deadline = time.monotonic() + 10.0
        while process_alive(control_pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        control_exited = not process_alive(control_pid)
        rows = telemetry.read_new().records
        lines = [event_line(row) for row in events.read_new().records]
        for ring in rings:  # orphaned by the killed process: unlink them here
            ring.owner = True
            ring.close()
        resumed = run_control_fault(  # a new policy process starts afresh
            None,
            served,
            out_dir,
            seed=seed + 1,
            rate_hz=rate_hz,
            control_hz=control_hz,
            episode_s=1.5,
        )
    finally:
        if policy.is_alive():
            policy.kill()
            policy.join(5)
        server.stop()
    received = received_from_telemetry(rows)
    log = JsonlWriter(log_path)
    for line in lines:
        log.write({"kind": "control_event", **line})
    log.close()
    commands = [e for e in received if e[0] == "ee"]
    limits = twin_limits(task)
    return FaultReport(
        fault="policy_killed",
        injected=1,
        commands=len(commands),
        outside_limits=limit_violations(received, limits, 1.0 / control_hz),
        hold_latency_ms=hold_latencies_ms(received, after_s=killed_at),
        commands_after_fault=resumed.commands,
        reconnects=0,
        events=dict(Counter(line["event"] for line in lines)),
        episode={},
        log=str(log_path),
        details={"control_exited": control_exited, **watchdog_details(log_path)},
    )


def process_alive(pid: int) -> bool:
    """Whether `pid` runs (a process that is not our child: no waitpid; a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False

"""Can this computer hold an arm's servo rate? Run it on the robot computer before the first motion
(`robocompose.verbs.timing_check`):

    robocompose timing-check --rate 500 --seconds 10
    robocompose timing-check --checkpoint PickPlace_flow_mlp

A control process drives the MuJoCo twin (no arm moves) at `--rate` while a policy thread
streams waypoints at 10 Hz, as `deploy control=process` does; with `--checkpoint` a policy
process runs that checkpoint's inference in a loop on another core meanwhile. It prints the
period error (|tick-to-tick time - period|) p50 / p99 / max, the ticks skipped, whether the
process got its core and SCHED_FIFO, and whether p99 meets the goal (0.5 ms idle, 1 ms with
inference at 500 Hz; a quarter of the period at other rates). What the twin and the UR fake
reached on the reference machine is `control_process_timing` in
benchmarks/results/real_robot.json.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from typing import Any

import numpy as np

from robocompose.real_robot.control import ControlProcess


def stream_circle(control: ControlProcess, stop: threading.Event, radius_m: float = 0.02) -> None:
    """The policy side: a slow circle scheduled 10 times a second, 1 s ahead."""
    center = control.read_state().ee_pos_m.copy()
    while not stop.is_set():
        times = time.monotonic() + 0.1 * np.arange(1, 11)
        angle = 2 * np.pi * 0.2 * times
        offsets = radius_m * np.stack([np.cos(angle) - 1, np.sin(angle), 0 * angle], 1)
        control.schedule(times, center + offsets, -np.ones(len(times)))
        time.sleep(0.1)


def percentiles(values: Any) -> dict[str, float | None]:
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        return {"p50": None, "p99": None, "max": None}
    return {
        "p50": round(float(np.percentile(array, 50)), 4),
        "p99": round(float(np.percentile(array, 99)), 4),
        "max": round(float(array.max()), 4),
    }


def measure(control: ControlProcess, seconds: float, twin: bool) -> dict[str, Any]:
    """Stream for `seconds` and return the control process's timing from its telemetry."""
    stop = threading.Event()
    if twin:
        control.reset_twin(100_000)
    feeder = threading.Thread(target=stream_circle, args=(control, stop), daemon=True)
    feeder.start()
    time.sleep(0.5)  # settle
    control.drain_telemetry()
    control.drain_events()
    batches, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.5)
        batches.append(control.drain_telemetry())
    stop.set()
    feeder.join(2)
    events = control.drain_events()
    rows = np.concatenate(batches)
    starts, rate_hz = rows[:, 1], control.config.rate_hz
    missed = sum(e.get("ticks", 0) for e in events if e["event"] == "control:ticks_missed")
    return {
        "rate_hz": rate_hz,
        "ticks": len(rows),
        "achieved_hz": round(float((len(starts) - 1) / (starts[-1] - starts[0])), 2),
        "period_error_ms": percentiles(1000 * np.abs(np.diff(starts) - 1.0 / rate_hz)),
        "start_late_ms": percentiles(1000 * (rows[:, 1] - rows[:, 0])),
        "ticks_missed": int(missed),
        "granted": control.granted,
        "loadavg_1_5_15": [round(v, 2) for v in os.getloadavg()],
    }


def inference_loop(checkpoint: str, cpu: int | None, stop: Any, ready: Any) -> None:
    """A policy process: `checkpoint`'s inference in a loop (on core `cpu`) until `stop`."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    from robocompose.real_robot.policy_adapter import load_served_policy

    served = load_served_policy(checkpoint)
    obs: dict[str, Any] = {
        k: np.zeros((served.spec.n_obs_steps, *s.shape), dtype=s.dtype)
        for k, s in served.spec.obs.items()
    }
    ready.set()
    i = 0
    while not stop.is_set():
        served.infer(obs | {"seed": 0, "chunk_index": i})
        i += 1


def goal_ms(rate_hz: float, inference: bool) -> float:
    if rate_hz == 500.0:
        return 1.0 if inference else 0.5
    return 250.0 / rate_hz


def check_timing(
    rate_hz: float, seconds: float, checkpoint: str | None = None, fifo: bool = True
) -> dict[str, Any]:
    """Drive the twin at `rate_hz` for `seconds` (with `checkpoint`'s inference looping on
    another core meanwhile); the period error, what the process was granted, and whether p99
    meets the goal."""
    from robocompose.real_robot.process_loop import twin_control

    factory, config = twin_control("PickPlace", rate_hz)
    config.fifo_priority = 50 if fifo else None
    context = multiprocessing.get_context("spawn")
    stop, ready = context.Event(), context.Event()
    loader = None
    if checkpoint:
        cpus = sorted(os.sched_getaffinity(0))
        loader = context.Process(
            target=inference_loop,
            args=(checkpoint, cpus[0] if len(cpus) > 1 else None, stop, ready),
        )
        loader.start()
        ready.wait(300)
    control = ControlProcess(factory, config)
    try:
        result = measure(control, seconds, twin=True)
    finally:
        control.close()
        stop.set()
        if loader is not None:
            loader.join(10)
    goal = goal_ms(rate_hz, bool(checkpoint))
    result["goal_p99_ms"] = goal
    result["meets_goal"] = bool(result["period_error_ms"]["p99"] <= goal)
    return result

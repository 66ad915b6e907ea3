"""The control process's parts of `benchmarks/real_robot.py` (sections `control_process_*`).

- timing: the control process's period error at 125 and 500 Hz, on the twin and on the UR driver
  against the fake RTDE controller of the tests, idle and while a policy process runs inference
  on the other core; a policy thread streams waypoints at 10 Hz all along;
- transport: loopback overhead (round trip minus the server's inference) seen by the real
  openpi-client in a separate process, for a zero-cost policy and the PickPlace flow MLP;
- tracking: executed (measured) against planned (the interpolated plan) on the twin through the
  deploy loop, linear and cubic interpolation;
- success: a composed policy through server + client + control process in the three chunk
  modes, next to direct evaluation on the same seeds;
- faults: each control-path fault twice.
"""

from __future__ import annotations

import functools
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import ROOT

from robocompose.evaluation import evaluate
from robocompose.real_robot.control import ControlProcess
from robocompose.real_robot.control_config import BRAKING, SENT, ControlConfig
from robocompose.real_robot.executor import ChunkExecutor, ExecutorConfig
from robocompose.real_robot.faults.control import CONTROL_FAULTS, run_control_fault
from robocompose.real_robot.policy_adapter import load_served_policy
from robocompose.real_robot.process_loop import ProcessDeployLoop, twin_control
from robocompose.real_robot.safety_limits import limits_for
from robocompose.real_robot.steplog import JsonlWriter, done_seeds
from robocompose.real_robot.timing_check import inference_loop, measure, percentiles
from robocompose.real_robot.websocket_server import PolicyServer
from robocompose.shipped import shipped_path
from robocompose.stats import success_rate

sys.path.insert(0, str(ROOT))  # the fake RTDE controller lives with the tests
SEED_START = 100_000


def rate_row(successes: int, episodes: int) -> dict[str, Any]:
    """A success count as the JSON records it, with its Wilson 95% interval."""
    rate = success_rate(successes, episodes)
    return {
        "successes": successes,
        "episodes": episodes,
        "rate": rate.rate,
        "ci_low": round(rate.ci_low, 4),
        "ci_high": round(rate.ci_high, 4),
        "text": str(rate),
    }


def success_head(
    runs: Path, episodes: int, time_scale: float, **fields: Any
) -> tuple[Any, list[int], dict[str, Any]]:
    """What both success sections serve (PickPlaceTwoCubes' flow MLP pair, convex 0.5/0.5), its
    seeds, and the section's head: the setting, `fields`, and `direct`, the policy evaluated
    directly on the same seeds (what the served runs are read against)."""
    parents = [shipped_path("PickPlaceTwoCubes", k) for k in ("flow_mlp", "flow_mlp_b")]
    composed = load_served_policy(parents=parents, operator="convex", weights=(0.5, 0.5))
    seeds = list(range(SEED_START, SEED_START + episodes))
    section: dict[str, Any] = {
        "policy": composed.spec.extra["policy"],
        "task": composed.spec.extra["task"],
        "episodes": episodes,
        "seed_start": SEED_START,
        "time_scale": time_scale,
        "rate_hz": 10.0,
        **fields,
    }
    direct = evaluate(
        composed.policy,
        seeds,
        out=runs / "success_direct.jsonl",
        label="convex_0.5_0.5",
        progress=False,
    )
    section["direct"] = rate_row(direct.success.successes, episodes)
    return composed, seeds, section


def machine_load() -> dict[str, Any]:
    one, five, fifteen = os.getloadavg()
    return {"loadavg_1_5_15": [round(one, 2), round(five, 2), round(fifteen, 2)]}


# ---- (a) period error -------------------------------------------------------------------------


def _timing_run(
    arm: str, rate_hz: float, seconds: float, fake_host: str | None, fifo: bool
) -> dict:
    cpus = sorted(os.sched_getaffinity(0))
    if arm == "twin":
        factory, config = twin_control("PickPlace", rate_hz)
    else:
        from tests.real_robot.fake_rtde import ur_on_fake_controller

        factory = functools.partial(ur_on_fake_controller, fake_host, rate_hz, {})
        config = ControlConfig(
            rate_hz=rate_hz, limits=limits_for("ur5e"), cpu=cpus[-1] if len(cpus) > 1 else None
        )
    config.fifo_priority = 50 if fifo else None
    control = ControlProcess(factory, config)
    try:
        return {"arm": arm, **measure(control, seconds, twin=arm == "twin")}
    finally:
        control.close()


def timing(seconds: float = 10.0) -> dict[str, Any]:
    from tests.real_robot.fake_rtde import FakeRTDEController

    section: dict[str, Any] = {"seconds_per_row": seconds, "rows": [], **machine_load()}
    fake = FakeRTDEController()
    context = multiprocessing.get_context("spawn")
    try:
        for load in ("idle", "inference"):
            stop, ready = context.Event(), context.Event()
            loader = None
            if load == "inference":
                flow = str(shipped_path("PickPlace", "flow_mlp"))
                loader = context.Process(target=inference_loop, args=(flow, 0, stop, ready))
                loader.start()
                ready.wait(120)
            try:
                for arm in ("twin", "ur5e_fake_rtde"):
                    # SCHED_FIFO where permitted; at 500 Hz also without it (no privileges)
                    for rate_hz, fifo in ((125.0, True), (500.0, True), (500.0, False)):
                        row = _timing_run(arm, rate_hz, seconds, fake.host, fifo)
                        row |= {"load": load, "fifo_asked": fifo, **machine_load()}
                        section["rows"].append(row)
                        print("control timing", row, flush=True)
            finally:
                stop.set()
                if loader is not None:
                    loader.join(10)
    finally:
        fake.close()
    return section


# ---- (b) transport through openpi-client in another process ------------------------------------


class ZeroCostPolicy:
    """Serves the flow MLP's spec with a fixed chunk: the transport alone."""

    def __init__(self, spec: Any) -> None:
        self.spec = spec
        self.actions = np.zeros((spec.chunk_length, spec.action_dim), dtype=np.float32)

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        return {"actions": self.actions}

    def reset(self) -> None:
        pass


def _openpi_client(port: int, calls: int, n_obs: int, queue: Any) -> None:
    import warnings

    from openpi_client.websocket_client_policy import WebsocketClientPolicy

    warnings.simplefilter("ignore")
    client = WebsocketClientPolicy("127.0.0.1", port)
    obs = {"state": np.full((n_obs, 11), 0.1, dtype=np.float64)}
    for i in range(20):  # warm-up
        client.infer(obs | {"seed": 0, "chunk_index": i})
    out = []
    for i in range(calls):
        start = time.perf_counter()
        reply = client.infer(obs | {"seed": 1, "chunk_index": i})
        round_trip = 1000 * (time.perf_counter() - start)
        out.append((round_trip, reply["server_timing"]["infer_ms"]))
    queue.put(out)


def transport(calls: int = 300) -> dict[str, Any]:
    """The server's inference on one torch thread: with two, torch's worker threads keep
    spinning after each call and starve the server's event loop of the core it needs to send
    the reply (milliseconds: real_robot.json, `control_process_transport`)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    flow = load_served_policy(shipped_path("PickPlace", "flow_mlp"))
    context = multiprocessing.get_context("spawn")
    section: dict[str, Any] = {
        "calls": calls,
        "client": "openpi-client, separate process",
        "server_torch_threads": 1,
    }
    for label, policy in (("zero_cost", ZeroCostPolicy(flow.spec)), ("flow_mlp", flow)):
        queue = context.Queue()
        with PolicyServer(policy) as server:
            client = context.Process(
                target=_openpi_client, args=(server.port, calls, flow.spec.n_obs_steps, queue)
            )
            client.start()
            timings = queue.get(timeout=600)
            client.join(10)
        round_trip = [t[0] for t in timings]
        overhead = [t[0] - t[1] for t in timings]
        section[label] = {
            "round_trip_ms": percentiles(round_trip),
            "infer_ms": percentiles([t[1] for t in timings]),
            "overhead_ms": percentiles(overhead),
            **machine_load(),
        }
        print("control transport", label, section[label], flush=True)
    torch.set_num_threads(threads)
    return section


# ---- (c) tracking, (d) success: the deploy loop with a control process ------------------------


def _episodes(
    served: Any,
    seeds: list[int],
    mode: str,
    rate_hz: float,
    interpolation: str,
    time_scale: float,
    log_path: Path,
    episode_s: float | None = None,
    telemetry: list | None = None,
    on_record: Any = None,
) -> list[dict[str, Any]]:
    """Episodes through a loopback server, client and a twin control process; `on_record` is
    called with each episode's record as it ends."""
    from robocompose.real_robot.client import PolicyClient

    task = str(served.spec.extra.get("task", "PickPlace"))
    factory, config = twin_control(task, rate_hz, time_scale)
    config.interpolation = interpolation
    server = PolicyServer(served).start()
    client = PolicyClient(f"127.0.0.1:{server.port}", timeout_s=10.0)
    fields = {"sync": {}, "ensemble": {}, "async": {"rtc": True}}[mode]
    executor = ChunkExecutor(
        lambda obs: client.infer(obs)["actions"],
        client.spec,
        ExecutorConfig(mode=mode, rate_hz=10.0, **fields),
    )
    log = JsonlWriter(log_path)
    loop = ProcessDeployLoop(
        lambda: ControlProcess(factory, config),
        executor,
        log,
        on_twin=True,
        time_scale=time_scale,
        client=client,
        stop_on_success=telemetry is None,
    )
    loop.telemetry_sink = telemetry
    records = []
    try:
        from robocompose.real_robot.process_loop import twin_facts

        _, twin_episode_s = twin_facts(task)
        for seed in seeds:
            records.append(loop.run_episode(seed, episode_s or twin_episode_s))
            if on_record is not None:
                on_record(records[-1])
    finally:
        executor.close()
        loop.close()
        client.close()
        server.stop()
        log.close()
    return records


def tracking(runs: Path, seconds: float = 6.0) -> list[dict[str, Any]]:
    """|measured - planned| and |sent - planned| per tick on the twin, in real time."""
    flow = load_served_policy(shipped_path("PickPlace", "flow_mlp"))
    rows = []
    for rate_hz in (125.0, 500.0):
        for interpolation in ("linear", "cubic"):
            telemetry: list[np.ndarray] = []
            log = runs / f"control_tracking_{rate_hz:g}_{interpolation}.jsonl"
            log.unlink(missing_ok=True)
            _episodes(
                flow,
                [SEED_START, SEED_START + 1],
                "async",
                rate_hz,
                interpolation,
                1.0,
                log,
                episode_s=seconds,
                telemetry=telemetry,
            )
            t = np.concatenate([x for x in telemetry if len(x)])
            flags = t[:, 10].astype(int)
            moving = (flags & SENT > 0) & (flags & BRAKING == 0) & np.all(np.isfinite(t[:, 2:5]), 1)
            measured = np.all(np.isfinite(t[:, 11:14]), 1) & moving
            rows.append(
                {
                    "rate_hz": rate_hz,
                    "interpolation": interpolation,
                    "ticks": int(moving.sum()),
                    "executed_vs_planned_mm": percentiles(
                        1000 * np.linalg.norm(t[measured, 11:14] - t[measured, 2:5], axis=1)
                    ),
                    "sent_vs_planned_mm": percentiles(
                        1000 * np.linalg.norm(t[moving, 5:8] - t[moving, 2:5], axis=1)
                    ),
                    "clamped_tick_fraction": round(float(np.mean(flags[moving] & 16 > 0)), 4),
                }
            )
            print("control tracking", rows[-1], flush=True)
    return rows


def success(
    runs: Path, episodes: int, time_scale: float, rate_hz: float, write: Any
) -> dict[str, Any]:
    """The composed PickPlaceTwoCubes policy through server + client + control process."""
    composed, seeds, section = success_head(
        runs, episodes, time_scale, control_rate_hz=rate_hz, modes={}, **machine_load()
    )
    for mode in ("sync", "ensemble", "async"):
        results = runs / f"control_success_{mode}_episodes.jsonl"
        done = done_seeds(results)
        todo = [s for s in seeds if s not in done]

        def keep(record: dict[str, Any], results: Path = results, done: dict = done) -> None:
            if record["aborted"]:
                return
            with results.open("a") as f:  # written as it goes: a rerun resumes
                f.write(json.dumps(record) + "\n")
            done[record["seed"]] = record

        if todo:
            steps = runs / f"control_success_{mode}_steps.jsonl"
            _episodes(composed, todo, mode, rate_hz, "linear", time_scale, steps, on_record=keep)
        records = [done[s] for s in seeds if s in done]
        section["modes"][mode] = rate_row(sum(r["success"] for r in records), len(records)) | {
            "waited_s_per_episode": round(float(np.mean([r["waited_s"] for r in records])), 3),
        }
        print("control success", mode, section["modes"][mode], flush=True)
        write(section, "control_process_success")
    return section


def faults(runs: Path, repeats: int) -> list[dict[str, Any]]:
    flow = load_served_policy(shipped_path("PickPlace", "flow_mlp"))
    rows = []
    for fault in CONTROL_FAULTS:
        reports = [
            run_control_fault(fault, flow, runs, seed=SEED_START + i) for i in range(repeats)
        ]
        silent = [ms for r in reports for ms in r.details.get("watchdog_silent_ms", [])]
        braking = [n for r in reports for n in r.details.get("braking_ticks", [])]
        row = {
            "fault": fault,
            "injected": sum(r.injected for r in reports),
            "commands": sum(r.commands for r in reports),
            "commands_outside_limits": sum(len(r.outside_limits) for r in reports),
            "hold_after_last_fresh_waypoint_ms": percentiles(silent),
            "hold_after_last_command_ms": percentiles(
                [ms for r in reports for ms in r.hold_latency_ms]
            ),
            "braking_ticks": percentiles(braking),
            "resumed": all(r.commands_after_fault > 0 for r in reports),
            "events": _summed([r.events for r in reports]),
        }
        if fault == "policy_killed":
            row["control_process_exited"] = all(r.details["control_exited"] for r in reports)
        rows.append(row)
        print("control fault", row, flush=True)
    return rows


def _summed(counts: list[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for c in counts:
        for k, v in c.items():
            if k.startswith(("control", "safety:")) or k in ("wait", "request_failed"):
                total[k] = total.get(k, 0) + v
    return total

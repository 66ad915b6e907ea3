"""The hardware bridge on loopback: control-loop timing, transport overhead, smoothness of the
chunk-execution modes under injected latency, task success through server + client + twin next to
direct evaluation, and the fault table.

Everything runs on loopback with the MuJoCo twin (a real PolicyServer, PolicyClient, SafetyLayer
and the deploy loop). Each section lands in benchmarks/results/real_robot.json as soon as it is
done, step logs and episodes in runs/benchmarks/real_robot/; a rerun skips finished sections and
finished episodes.

    nohup python benchmarks/real_robot.py > runs/benchmarks/real_robot.log 2>&1 &
    python benchmarks/real_robot.py --parts smoothness --redo     # one section again

The `control_process_*` sections (`real_robot_control.py`) time and test the control process:
its period error at the servo rate, transport through the openpi-client in another process,
tracking, success and faults through it. Run them on an otherwise idle machine. The `fleet`
section (`real_robot_fleet.py`) serves N clients at 10 Hz from one server, batched and serial,
for the flow MLP and a UNet (`--fleet-clients 1,4,16,64 --fleet-seconds 20`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
import real_robot_control as rrc
import real_robot_fleet
from common import RUNS_DIR, ResultsFile, add_parts

from robocompose.real_robot.client import PolicyClient
from robocompose.real_robot.drivers.twin import TwinArm
from robocompose.real_robot.executor import ExecutorConfig
from robocompose.real_robot.faults.loop import FAULTS, open_rig, run_fault
from robocompose.real_robot.policy_adapter import load_served_policy
from robocompose.real_robot.replay import read_log
from robocompose.real_robot.steplog import done_seeds
from robocompose.real_robot.websocket_server import PolicyServer
from robocompose.shipped import shipped_path

RESULTS = ResultsFile("real_robot.json", writer="real_robot.py", indent=1)
RUNS = RUNS_DIR / "real_robot"
SECTIONS = (
    "control_loop",
    "transport",
    "smoothness",
    "success",
    "faults",
    "control_process_timing",
    "control_process_transport",
    "control_process_tracking",
    "control_process_success",
    "control_process_faults",
    "fleet",
)
RESUMABLE = ("success", "control_process_success")
SEED_START = 100_000
# mode label -> executor fields
MODES = {
    "sync": {"mode": "sync"},
    "ensemble": {"mode": "ensemble"},
    "async": {"mode": "async", "rtc": True},
    "async_no_rtc": {"mode": "async", "rtc": False},
}


def _pcts(values: list[float] | np.ndarray) -> dict[str, float | None]:
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        return {"p50": None, "p99": None, "max": None}
    return {
        "p50": round(float(np.percentile(array, 50)), 4),
        "p99": round(float(np.percentile(array, 99)), 4),
        "max": round(float(array.max()), 4),
    }


def _steps(log: Path, seed: int) -> list[dict[str, Any]]:
    """The step lines of the last run of `seed` in a step log."""
    lines = read_log(log)
    starts = [
        i
        for i, line in enumerate(lines)
        if line.get("kind") == "episode_start" and line["seed"] == seed
    ]
    return [
        line for line in lines[starts[-1] :] if line.get("kind") == "step" and line["seed"] == seed
    ]


def control_loop(flow: Any) -> list[dict[str, Any]]:
    """The deploy loop at 10 and 50 Hz on the twin in real time for 15 s each (async mode)."""
    rows = []
    for rate_hz in (10.0, 50.0):
        log = RUNS / f"control_loop_{rate_hz:g}hz.jsonl"
        log.unlink(missing_ok=True)
        rig = open_rig(
            flow, log, executor=ExecutorConfig(mode="async", rate_hz=rate_hz), stop_on_success=False
        )
        try:
            rig.loop.run_episode(SEED_START, 15.0)
        finally:
            rig.close()
        steps = _steps(log, SEED_START)
        periods = np.array([s["period_s"] for s in steps if s["period_s"] is not None])
        errors_ms = 1000 * np.abs(periods - 1 / rate_hz)
        rows.append(
            {
                "rate_hz": rate_hz,
                "ticks": len(steps),
                "achieved_hz": round(float(1 / periods.mean()), 3),
                "period_error_ms": _pcts(errors_ms),
                "ticks_late_over_half_period": int(np.sum(errors_ms > 500 / rate_hz)),
            }
        )
        print("control loop", rows[-1], flush=True)
    return rows


def transport(flow: Any, calls: int = 300) -> dict[str, Any]:
    """Loopback round trip minus the policy's own inference time, over `calls` requests."""
    twin = TwinArm("PickPlace", realtime=False)
    frame = twin.reset(seed=SEED_START).obs
    twin.close()
    obs = {
        k: np.stack([v] * flow.spec.n_obs_steps).astype(flow.spec.obs[k].dtype)
        for k, v in frame.items()
        if k in flow.spec.obs
    }
    with PolicyServer(flow) as server:
        client = PolicyClient(server.address)
        for i in range(10):  # warm-up
            client.infer(obs | {"seed": 0, "chunk_index": i})
        round_trip, infer, overhead = [], [], []
        for i in range(calls):
            reply = client.infer(obs | {"seed": 1, "chunk_index": i})
            rt, inf = reply["client_timing"]["round_trip_ms"], reply["server_timing"]["infer_ms"]
            round_trip.append(rt)
            infer.append(inf)
            overhead.append(rt - inf)
        client.close()
    row = {
        "calls": calls,
        "round_trip_ms": _pcts(round_trip),
        "infer_ms": _pcts(infer),
        "overhead_ms": _pcts(overhead),
    }
    print("transport", row, flush=True)
    return row


def _smoothness(steps: list[dict[str, Any]], rate_hz: float) -> dict[str, Any]:
    """From one episode's step lines: the jumps between consecutive executed actions (the jump
    after a wait included) and their change (second difference, the kink where chunks join),
    at chunk boundaries (a chunk adopted, or actions resumed after a wait) and overall; the jerk
    of the commanded positions; the waits after the first action."""
    executed = [s for s in steps if s["proposed"] is not None]
    first = steps.index(executed[0])
    pos = np.array([s["proposed"][:3] for s in executed])
    jumps = np.linalg.norm(np.diff(pos, axis=0), axis=1)
    kinks = np.linalg.norm(np.diff(pos, n=2, axis=0), axis=1)
    at_boundary = [
        i
        for i, s in enumerate(executed)
        if i > 1 and any(e["event"] in ("chunk", "resume") for e in s["events"])
    ]
    pauses, run = [], 0
    for s in steps[first:]:
        run = run + 1 if s["waiting"] else 0
        pauses.append(run)
    return {
        "jumps_m": jumps.tolist(),
        "boundary_jumps_m": [float(jumps[i - 1]) for i in at_boundary],
        "kinks_m": kinks.tolist(),
        "boundary_kinks_m": [float(kinks[i - 2]) for i in at_boundary],
        "jerk_m_s3": (np.linalg.norm(np.diff(pos, n=3, axis=0), axis=1) * rate_hz**3).tolist(),
        "waiting_ticks": sum(bool(s["waiting"]) for s in steps[first:]),
        "longest_pause_ticks": max(pauses, default=0),
        "ticks": len(steps) - first,
    }


def smoothness(flow: Any, seeds: int, from_logs: bool) -> list[dict[str, Any]]:
    """Each mode at 0, 50 and 150 ms injected inference latency, 10 Hz, real time, through the
    loopback server; `from_logs`: recompute the table from the step logs of an earlier run."""
    rows = []
    for latency_ms in (0, 50, 150):
        for label, fields in MODES.items():
            log = RUNS / f"smoothness_{label}_{latency_ms}ms.jsonl"
            if not from_logs:
                log.unlink(missing_ok=True)
                rig = open_rig(
                    flow,
                    log,
                    executor=ExecutorConfig(rate_hz=10.0, **fields),
                    delay_s=latency_ms / 1000,
                )
                try:
                    for seed in range(SEED_START, SEED_START + seeds):
                        rig.loop.run_episode(seed, 15.0)
                finally:
                    rig.close()
            ends = [line for line in read_log(log) if line.get("kind") == "episode_end"]
            parts = [_smoothness(_steps(log, end["seed"]), 10.0) for end in ends]

            def pooled(key: str, parts: list = parts) -> list[float]:
                return [v for p in parts for v in p[key]]

            ticks = sum(p["ticks"] for p in parts)
            waiting = sum(p["waiting_ticks"] for p in parts)
            rows.append(
                {
                    "mode": label,
                    "latency_ms": latency_ms,
                    "episodes": len(ends),
                    "successes": sum(bool(e["success"]) for e in ends),
                    "jump_m": _pcts(pooled("jumps_m")),
                    "boundary_jump_m": _pcts(pooled("boundary_jumps_m")),
                    "kink_m": _pcts(pooled("kinks_m")),
                    "boundary_kink_m": _pcts(pooled("boundary_kinks_m")),
                    "jerk_m_s3": _pcts(pooled("jerk_m_s3")),
                    "idle_fraction": round(waiting / ticks, 4),
                    "idle_s_per_episode": round(waiting * 0.1 / len(ends), 3),
                    "longest_pause_s": round(max(p["longest_pause_ticks"] for p in parts) * 0.1, 2),
                }
            )
            print("smoothness", rows[-1], flush=True)
    return rows


def success(episodes: int, time_scale: float, write: Any) -> dict[str, Any]:
    """A composed policy through server + client + twin in each mode, and directly through the
    harness, on the same seeds."""
    composed, seeds, section = rrc.success_head(RUNS, episodes, time_scale, modes={})
    print("direct", section["direct"], flush=True)
    for label in ("sync", "ensemble", "async"):
        results = RUNS / f"success_{label}_episodes.jsonl"
        done = done_seeds(results)
        todo = [s for s in seeds if s not in done]
        if todo:
            rig = open_rig(
                composed,
                RUNS / f"success_{label}_steps.jsonl",
                executor=ExecutorConfig(rate_hz=10.0, **MODES[label]),
                time_scale=time_scale,
            )
            try:
                with results.open("a") as f:
                    for seed in todo:
                        record = rig.loop.run_episode(seed, rig.twin.episode_s)
                        f.write(json.dumps(record) + "\n")
                        f.flush()
                        done[seed] = record
            finally:
                rig.close()
        records = [done[s] for s in seeds]
        section["modes"][label] = rrc.rate_row(sum(r["success"] for r in records), episodes) | {
            "waited_s_per_episode": round(float(np.mean([r["waited_s"] for r in records])), 3),
            "requests_failed": sum(r["events"].get("request_failed", 0) for r in records),
        }
        print(label, section["modes"][label], flush=True)
        write(section)
    return section


def faults(flow: Any, repeats: int) -> list[dict[str, Any]]:
    """Each fault injected `repeats` times (one episode per injection, other seeds)."""
    rows = []
    for fault in FAULTS:
        reports = [run_fault(fault, flow, RUNS, seed=SEED_START + i) for i in range(repeats)]
        latencies = [h for r in reports for h in r.hold_latency_ms]
        rows.append(
            {
                "fault": fault,
                "injected": sum(r.injected for r in reports),
                "commands": sum(r.commands for r in reports),
                "commands_outside_limits": sum(len(r.outside_limits) for r in reports),
                "hold_latency_ms": _pcts(latencies),
                "resumed": all(r.commands_after_fault > 0 for r in reports),
                "reconnects": sum(r.reconnects for r in reports),
            }
        )
        print("fault", rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    add_parts(parser, SECTIONS)
    parser.add_argument("--redo", action="store_true", help="rerun sections already in the JSON")
    parser.add_argument("--episodes", type=int, default=50, help="success: seeds per mode")
    parser.add_argument("--time-scale", type=float, default=2.0, help="success: twin speed-up")
    parser.add_argument("--smoothness-seeds", type=int, default=3)
    parser.add_argument("--fault-repeats", type=int, default=2)
    parser.add_argument("--control-episodes", type=int, default=50, help="control_process_success")
    parser.add_argument("--control-rate", type=float, default=500.0, help="control_process_success")
    parser.add_argument("--timing-seconds", type=float, default=10.0, help="per timing row")
    parser.add_argument(
        "--from-logs", action="store_true", help="smoothness: recompute from the last run's logs"
    )
    parser.add_argument("--fleet-clients", default="1,4,16,64", help="fleet: client counts")
    parser.add_argument("--fleet-seconds", type=float, default=20.0, help="fleet: per run")
    args = parser.parse_args()
    RUNS.mkdir(parents=True, exist_ok=True)
    document = RESULTS.set(
        ["machine"],
        {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "note": "2 cores shared with other jobs; no GPU",
        },
    )

    def write(part: dict[str, Any], key: str = "success") -> None:
        RESULTS.set([key], part)

    flow = load_served_policy(shipped_path("PickPlace", "flow_mlp"))
    jobs = {
        "control_loop": lambda: control_loop(flow),
        "transport": lambda: transport(flow),
        "smoothness": lambda: smoothness(flow, args.smoothness_seeds, args.from_logs),
        "success": lambda: success(args.episodes, args.time_scale, write),
        "faults": lambda: faults(flow, args.fault_repeats),
        "control_process_timing": lambda: rrc.timing(args.timing_seconds),
        "control_process_transport": lambda: rrc.transport(),
        "control_process_tracking": lambda: rrc.tracking(RUNS),
        "control_process_success": lambda: rrc.success(
            RUNS, args.control_episodes, args.time_scale, args.control_rate, write
        ),
        "control_process_faults": lambda: rrc.faults(RUNS, args.fault_repeats),
        "fleet": lambda: real_robot_fleet.fleet(
            [flow, load_served_policy(shipped_path("PickPlace", "diffusion_unet"))],
            tuple(int(n) for n in args.fleet_clients.split(",")),
            seconds=args.fleet_seconds,
        ),
    }
    for name in args.parts:
        if name in document and not args.redo and name not in RESUMABLE:
            print(f"{name}: already in {RESULTS.path} (--redo to rerun)", flush=True)
            continue
        start = time.perf_counter()
        value = jobs[name]()
        took = round(time.perf_counter() - start, 1)

        def store(
            document: dict[str, Any], name: str = name, value: Any = value, took: float = took
        ) -> None:
            document[name] = value
            seconds = document.setdefault("seconds", {})
            if name == "smoothness" and args.from_logs:
                seconds.pop(name, None)  # recomputed, not run: the run's time is not known here
            else:
                seconds[name] = took

        RESULTS.update(store)


if __name__ == "__main__":
    main()

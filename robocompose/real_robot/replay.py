"""A deploy step log turned into plots and a summary (`robocompose replay LOG`:
`robocompose.verbs.replay`).

Plots (PNG, next to the log unless told otherwise): commanded vs executed end effector per axis
with clamp events marked, clamp and refusal events over time by kind, and the histogram of the
loop period's error. The summary counts episodes (success with its Wilson interval), ticks, the
achieved rate and period error percentiles, inference latency, waits and safety events.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from robocompose.stats import success_rate

AXES = ("x", "y", "z", "gripper")
# executor and link events worth a row in the events plot (chunks and requests are routine)
NOTABLE_EVENTS = ("request_failed", "reconnect", "observation_refused", "chunk_stale", "discard")


def read_log(path: str | Path) -> list[dict[str, Any]]:
    """Every line of a step log; a line that is not JSON is named."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no step log {path} (deploy writes <out>/steps.jsonl).")
    texts, lines = path.read_text().splitlines(), []
    for n, text in enumerate(texts, 1):
        if not text.strip():
            continue
        try:
            lines.append(json.loads(text))
        except json.JSONDecodeError as e:
            if n == len(texts):
                break  # a run cut off mid-line leaves a partial last line
            raise ValueError(f"{path}, line {n}: not JSON ({e.msg}).") from None
    if not any(line.get("kind") == "step" for line in lines):
        raise ValueError(f"{path} holds no step lines: is it a deploy steps.jsonl?")
    return lines


def _percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p99": None, "max": None}
    array = np.asarray(values)
    return {
        "p50": float(np.percentile(array, 50)),
        "p99": float(np.percentile(array, 99)),
        "max": float(array.max()),
    }


def summarize(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The run in numbers (periods and latencies in ms of wall time)."""
    steps = [line for line in lines if line.get("kind") == "step"]
    starts = [line for line in lines if line.get("kind") == "episode_start"]
    ends = [line for line in lines if line.get("kind") == "episode_end"]
    nominal = {s["seed"]: s["period_s"] for s in starts}
    errors_ms = [
        1000 * (s["period_s"] - nominal[s["seed"]])
        for s in steps
        if s["period_s"] is not None and s["seed"] in nominal
    ]
    periods = [s["period_s"] for s in steps if s["period_s"] is not None]
    latencies = [1000 * s["latency_s"] for s in steps if s.get("latency_s") is not None]
    safety = Counter(e["kind"] for s in steps for e in s["safety"])
    events = Counter(e["event"] for s in steps for e in s["events"])
    rate = success_rate(sum(bool(e["success"]) for e in ends), len(ends))
    return {
        "episodes": len(ends),
        "success": asdict(rate),
        "success_text": str(rate),
        "ticks": len(steps),
        "ticks_sent": sum(s["sent"] is not None for s in steps),
        "ticks_waiting": sum(bool(s["waiting"]) for s in steps),
        "achieved_hz": 1 / float(np.mean(periods)) if periods else None,
        "period_error_ms": _percentiles([abs(e) for e in errors_ms]),
        "latency_ms": _percentiles(latencies),
        "safety_events": dict(safety),
        "mode_events": dict(events),
    }


def format_summary(summary: dict[str, Any]) -> str:
    def ms(p: dict[str, float | None]) -> str:
        return "n/a" if p["p50"] is None else f"p50 {p['p50']:.2f}, p99 {p['p99']:.2f}"

    hz = summary["achieved_hz"]
    rows = [
        f"episodes: {summary['episodes']}, success {summary['success_text']}",
        f"ticks: {summary['ticks']} ({summary['ticks_sent']} sent, "
        f"{summary['ticks_waiting']} waiting for a chunk)",
        f"achieved rate: {'n/a' if hz is None else f'{hz:.2f} Hz'} (wall clock); "
        f"|period error| ms: {ms(summary['period_error_ms'])}",
        f"inference latency ms: {ms(summary['latency_ms'])}",
        f"safety events: {summary['safety_events'] or 'none'}",
        f"mode events: {summary['mode_events'] or 'none'}",
    ]
    return "\n".join(rows)


def plot(lines: list[dict[str, Any]], out_dir: str | Path, seed: int | None = None) -> list[Path]:
    """Three PNGs for one episode (`seed`; default the first in the log) in `out_dir`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [line for line in lines if line.get("kind") == "step"]
    seeds = list(dict.fromkeys(s["seed"] for s in steps))
    seed = seeds[0] if seed is None else seed
    if seed not in seeds:
        raise ValueError(f"seed {seed} is not in the log; it has {seeds}.")
    episode = [s for s in steps if s["seed"] == seed]
    t0 = episode[0]["t_s"]
    t = np.array([s["t_s"] - t0 for s in episode])
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []

    fig, axes = plt.subplots(len(AXES), 1, figsize=(9, 8), sharex=True)
    executed = np.array([[*s["ee_m"], s["gripper"]] for s in episode])
    for i, (ax, name) in enumerate(zip(axes, AXES, strict=True)):
        sent = np.array([np.nan if s["sent"] is None else s["sent"][i] for s in episode])
        proposed = np.array(
            [np.nan if s["proposed"] is None else s["proposed"][i] for s in episode]
        )
        ax.plot(t, proposed, ":", color="tab:gray", label="proposed (policy)")
        ax.step(t, sent, where="post", color="tab:blue", label="commanded (after safety)")
        ax.plot(t, executed[:, i], color="tab:orange", label="executed (measured)")
        clamped = [k for k, s in enumerate(episode) if s["safety"]]
        ax.plot(t[clamped], sent[clamped], "x", color="tab:red", label="clamp / refusal")
        ax.set_ylabel(f"{name} (m)" if name != "gripper" else "gripper")
    axes[0].legend(loc="upper right", fontsize=7)
    axes[-1].set_xlabel("time since episode start (s, wall clock)")
    fig.suptitle(f"seed {seed}: commanded vs executed")
    paths.append(_save(fig, out_dir / f"commanded_vs_executed_seed{seed}.png"))

    fig, ax = plt.subplots(figsize=(9, 3.5))
    rows: dict[str, list[float]] = {}
    for s in episode:
        for e in s["safety"]:
            rows.setdefault(f"safety: {e['kind']}", []).append(s["t_s"] - t0)
        for e in s["events"]:
            if e["event"] in NOTABLE_EVENTS:
                rows.setdefault(e["event"], []).append(s["t_s"] - t0)
        if s["waiting"]:
            rows.setdefault("waiting for a chunk", []).append(s["t_s"] - t0)
    for row, times in enumerate(rows.values()):
        ax.plot(times, [row] * len(times), "|", markersize=12)
    ax.set_yticks(range(len(rows)), list(rows))
    ax.set_xlabel("time since episode start (s, wall clock)")
    ax.set_title(f"seed {seed}: safety events, link events and waits")
    paths.append(_save(fig, out_dir / f"events_seed{seed}.png"))

    fig, ax = plt.subplots(figsize=(6, 3.5))
    start = next(
        line for line in lines if line.get("kind") == "episode_start" and line["seed"] == seed
    )
    errors = [1000 * (s["period_s"] - start["period_s"]) for s in episode if s["period_s"]]
    ax.hist(errors, bins=40)
    ax.set_xlabel(f"period - nominal {1000 * start['period_s']:.1f} ms (ms)")
    ax.set_ylabel("ticks")
    ax.set_title(f"seed {seed}: loop period jitter")
    paths.append(_save(fig, out_dir / f"period_jitter_seed{seed}.png"))
    return paths


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path

"""The deploy step log: one JSON line per control tick, and one at each episode's start and end.

    {"kind": "episode_start", "seed", "time", "rate_hz", "time_scale", "period_s", "mode"}
    {"kind": "step", "seed", "tick", "t_s", "period_s", "obs", "ee_m", "gripper", "proposed",
     "sent", "waiting", "latency_s", "safety": [SafetyEvent dicts], "events": [executor events]}
    {"kind": "episode_end", "seed", "success", "score", "ticks", "duration_s", "waited_s", ...}

Times are time.monotonic() seconds and wall-clock periods; "proposed" is the executor's action,
"sent" what the safety layer let through (None: nothing reached the arm this tick), "ee_m" and
"gripper" what the arm measured. `robocompose replay` reads it.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np

from robocompose.real_robot.base import ArmState
from robocompose.real_robot.executor import Decision

SUMMARY_VALUES = 16  # observation keys with more values are logged as shape, mean, min, max


def step_line(
    seed: int,
    tick: int,
    started_s: float,
    period_s: float | None,
    obs: dict[str, np.ndarray],
    state: ArmState,
    decision: Decision,
    sent: list[float] | None,
    safety: list[dict[str, Any]],
    events: list[dict[str, Any]],
) -> dict[str, Any]:
    """One tick's line."""
    return {
        "kind": "step",
        "seed": seed,
        "tick": tick,
        "t_s": started_s,
        "period_s": period_s,
        "obs": summarize_obs(obs),
        "ee_m": _rounded(state.ee_pos_m),
        "gripper": round(float(state.gripper), 5),
        "proposed": None if decision.action is None else _rounded(decision.action),
        "sent": None if sent is None else _rounded(sent),
        "waiting": decision.waiting,
        "latency_s": decision.latency_s,
        "safety": safety,
        "events": events,
    }


def _rounded(values: Any) -> list:
    return np.round(np.asarray(values, dtype=np.float64), 5).tolist()


def summarize_obs(obs: dict[str, np.ndarray]) -> dict[str, Any]:
    """Small keys in full, large ones (images) as shape and statistics."""
    out: dict[str, Any] = {}
    for key, value in obs.items():
        value = np.asarray(value)
        if value.size <= SUMMARY_VALUES:
            out[key] = _rounded(value.ravel())
        else:
            stats = [value.mean(), value.min(), value.max()]
            out[key] = {"shape": list(value.shape), "mean_min_max": _rounded(stats)}
    return out


class JsonlWriter:
    """Appends one JSON object per line, flushed at once (a crash keeps what was written)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        with self._lock:
            self._file.write(json.dumps(record, default=_jsonable) + "\n")
            self._file.flush()

    def close(self) -> None:
        self._file.close()


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    return repr(value)


def done_seeds(path: Path) -> dict[int, dict[str, Any]]:
    """The episodes already in an `episodes.jsonl` (a rerun skips them)."""
    if not path.is_file():
        return {}
    records = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}, line {n}: not JSON ({e.msg}).") from None
        records[int(record["seed"])] = record
    return records

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
import time
from collections import Counter
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


class StepRecorder:
    """One episode's ticks into the step log, with the event counts its record ends with.

    Both deploy loops (in process and control process) keep their books through it, so a
    reconnect, a safety event and a waiting tick count the same way in either."""

    def __init__(self, log: JsonlWriter, client: Any, seed: int) -> None:
        self.log, self.client, self.seed = log, client, seed
        self.counts: Counter[str] = Counter()
        self._reconnects = getattr(client, "reconnects", 0)
        self._last_start: float | None = None

    def start(
        self, rate_hz: float, time_scale: float, period_s: float, mode: str, **control: Any
    ) -> None:
        """The episode's first line: seed, wall time and the loop's settings (`control`: those of
        a control process)."""
        self.log.write(
            {
                "kind": "episode_start",
                "seed": self.seed,
                "time": time.time(),
                "rate_hz": rate_hz,
                **control,
                "time_scale": time_scale,
                "period_s": period_s,
                "mode": mode,
            }
        )

    def record(
        self,
        tick: int,
        started_s: float,
        obs: dict[str, np.ndarray],
        state: ArmState,
        decision: Decision,
        sent: list[float] | None,
        safety: list[dict[str, Any]],
        events: list[dict[str, Any]],
    ) -> None:
        """Write the tick's line; `events` gains a "reconnect" when the client reconnected."""
        reconnects = getattr(self.client, "reconnects", 0)
        if reconnects != self._reconnects:
            events.append({"event": "reconnect", "count": reconnects - self._reconnects})
            self._reconnects = reconnects
        self.counts.update(e["event"] for e in events)
        self.counts.update(f"safety:{s['kind']}" for s in safety)
        self.counts["waiting_ticks"] += decision.waiting
        period = None if self._last_start is None else started_s - self._last_start
        self.log.write(
            step_line(
                self.seed, tick, started_s, period, obs, state, decision, sent, safety, events
            )
        )
        self._last_start = started_s


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

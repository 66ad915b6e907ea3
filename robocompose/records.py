"""Episode records: one JSON line per finished episode, read back to resume, pooled into rates.

A record:

    {"env_id", "seed", "success", "score", "return", "length", "error", "elapsed_s"}

plus "policy_id" (the policy's fingerprint) and "batch" (how its inference was batched:
"per-episode" or "batched-<num_envs>") when the caller names them, and "video" (the file
actually written) for a filmed episode. Each record is fsynced as its episode ends, so a killed
run loses at most the line being written; reading drops that torn line and the run redoes it.
A file never mixes envs, policies or inference layouts: a resume that would is refused.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from robocompose.stats import SuccessRate, success_rate

__all__ = [
    "PER_EPISODE",
    "EpisodeLog",
    "EvalResult",
    "Group",
    "batch_layout",
    "group",
    "pool",
    "rate_of",
    "stamped",
]

PER_EPISODE = "per-episode"


def batch_layout(batch_invariant: bool, num_envs: int) -> str:
    """The record's "batch" value: per-episode inference, or one batch over `num_envs` envs."""
    return PER_EPISODE if batch_invariant else f"batched-{num_envs}"


def stamped(record: dict[str, Any], policy_id: str | None, batch: str | None) -> dict[str, Any]:
    """`record` naming its policy and inference layout (those given), as a resume checks them."""
    stamps = {"policy_id": policy_id, "batch": batch}
    return record | {k: v for k, v in stamps.items() if v is not None}


def is_success(value: Any) -> bool:
    """A record's success, from JSON (a bool) or a CSV cell ("True"/"False")."""
    return value == "True" if isinstance(value, str) else bool(value)


def rate_of(row: Mapping[str, Any]) -> SuccessRate:
    """The rate of a saved row ({"success": rate, "episodes": n}, as `EvalResult.row()` and the
    benchmarks' JSON hold it), to print it the one way."""
    episodes = int(row["episodes"])
    return success_rate(round(float(row["success"]) * episodes), episodes)


def pool(records: Sequence[Mapping[str, Any]]) -> tuple[SuccessRate, float]:
    """Success rate (Wilson 95% CI) and mean score of some episodes (NaN score for none)."""
    successes = sum(is_success(r["success"]) for r in records)
    scores = [float(r["score"]) for r in records]
    mean_score = math.fsum(scores) / len(scores) if scores else math.nan
    return success_rate(successes, len(records)), mean_score


@dataclass(frozen=True)
class EvalResult:
    """Per-seed records (in the order of the requested seeds) and their aggregate."""

    env_id: str
    records: list[dict[str, Any]]
    success: SuccessRate
    mean_score: float

    @classmethod
    def from_records(cls, env_id: str, records: list[dict[str, Any]]) -> EvalResult:
        rate, mean_score = pool(records)
        return cls(env_id, records, rate, mean_score)

    @property
    def episodes(self) -> int:
        return len(self.records)

    @property
    def errors(self) -> int:
        return sum(r["error"] is not None for r in self.records)

    @property
    def videos(self) -> list[Path]:
        """The video files of the filmed episodes, as written (`seed_N-2.mp4` if `seed_N.mp4`
        was taken)."""
        return [Path(r["video"]) for r in self.records if r.get("video")]

    def summary(self) -> str:
        """One line, e.g. "PushT: 87.0% [81.6, 91.0] (n=200), mean score 0.93"."""
        line = f"{self.env_id}: {self.success}, mean score {self.mean_score:.2f}"
        return line + (f", {self.errors} errors" if self.errors else "")

    def row(self) -> dict[str, Any]:
        """The figures a table or a JSON record needs."""
        return {
            "success": self.success.rate,
            "ci_low": self.success.ci_low,
            "ci_high": self.success.ci_high,
            "episodes": self.episodes,
            "mean_score": self.mean_score,
        }


@dataclass(frozen=True)
class Group:
    """Episodes pooled by their values of some keys: their success rate and mean score."""

    key: tuple[str, ...]
    rate: SuccessRate
    mean_score: float

    def cell(self) -> str:
        """The rate for a table that gives the episodes a column of their own."""
        return self.rate.format(episodes=False)


def group(records: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> list[Group]:
    """Records pooled by their values of `keys`, in order of first appearance."""
    pooled: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for record in records:
        pooled.setdefault(tuple(str(record[k]) for k in keys), []).append(record)
    return [Group(key, *pool(members)) for key, members in pooled.items()]


class EpisodeLog:
    """A JSONL file of the episodes of one env, policy and inference layout.

    `read()` returns what a previous run finished (and repairs a tail torn by a kill); `append`
    writes one record and fsyncs it. Use as a context manager around the appends."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        env_id: str,
        policy_id: str | None = None,
        batch: str | None = None,
    ) -> None:
        self.path = Path(path)
        self.env_id, self.policy_id, self.batch = env_id, policy_id, batch
        self._sink: Any = None

    def read(self) -> dict[int, dict[str, Any]]:
        """Records already in the file by seed; drops a last line cut short by a kill."""
        if not self.path.exists():
            return {}
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        records: dict[int, dict[str, Any]] = {}
        good_end = pos = 0
        for number, line in enumerate(lines, start=1):
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    if any(rest.strip() for rest in lines[number:]):
                        raise ValueError(
                            f"{self.path}:{number} is not valid JSON: {line[:80]!r}"
                        ) from None
                    break  # the line being written when the run was killed: run that seed again
                if not isinstance(record, dict) or "seed" not in record:
                    raise ValueError(
                        f"{self.path}:{number} must be a record with a 'seed'. Got {line!r}."
                    )
                self._check(record)
                records.setdefault(int(record["seed"]), record)
            pos += len(line) + 1
            good_end = min(pos, len(data))
        if good_end < len(data):
            with self.path.open("r+b") as f:
                f.truncate(good_end)
        elif data and not data.endswith(b"\n"):
            with self.path.open("ab") as f:
                f.write(b"\n")
        return records

    def _check(self, record: dict[str, Any]) -> None:
        """Refuse to resume from episodes another env, policy or batching produced."""
        if record.get("env_id") != self.env_id:
            raise ValueError(
                f"{self.path} holds records of env {record.get('env_id')!r}, not "
                f"{self.env_id!r}; use another `out` file rather than mixing envs."
            )
        if record.get("policy_id") != self.policy_id:
            raise ValueError(
                f"{self.path} holds episodes of policy {record.get('policy_id')!r}, not of this "
                f"one ({self.policy_id!r}): the policy changed since they ran. Delete the file "
                "or use another `out` to evaluate it afresh. (Composed policies' logs written "
                "before their fingerprint covered the resolved sigma grid do not resume either.)"
            )
        if record.get("batch") != self.batch:
            held = record.get("batch") or "unrecorded (written before records named it)"
            raise ValueError(
                f"{self.path} holds episodes run with {held} inference, this run uses "
                f"{self.batch}: an episode's actions differ between the two, so they do not mix. "
                "Rerun with the file's setting (batch_invariant), or use another `out`."
            )

    def append(self, record: dict[str, Any]) -> None:
        """Write one (stamped) record and fsync it."""
        if self._sink is None:
            raise RuntimeError("EpisodeLog.append needs `with log:` around it.")
        self._sink.write(json.dumps(record) + "\n")
        self._sink.flush()
        os.fsync(self._sink.fileno())

    def __enter__(self) -> EpisodeLog:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._sink = self.path.open("a", encoding="utf-8")
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._sink.close()
        self._sink = None

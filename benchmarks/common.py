"""Paths and timing the benchmarks share."""

from __future__ import annotations

import fcntl
import json
import statistics
import time
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any

from robocompose.shipped import CHECKPOINTS, shipped_checkpoints

ROOT = CHECKPOINTS.parent
RESULTS = Path(__file__).resolve().parent / "results"

__all__ = [
    "CHECKPOINTS",
    "RESULTS",
    "ROOT",
    "median_ms",
    "resume_records",
    "shipped_checkpoints",
    "task_preset",
    "update_results",
]


def median_ms(fn: Callable[[], Any], repeats: int, warmup: int = 0) -> float:
    """Median wall milliseconds of `fn()` over `repeats` calls, after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times)


def resume_records(
    path: Path, keys: Sequence[Hashable], run: Callable[[Any], dict], key_field: str = "key"
) -> list[dict]:
    """The JSONL records of `path` for `keys`, in order (each record names its key in
    `key_field`); missing keys are run and appended one by one, so an interrupted run resumes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    done = {}
    if path.exists():
        for line in path.read_text().splitlines():
            record = json.loads(line)
            done[record[key_field]] = record
    with path.open("a") as f:
        for key in keys:
            if key not in done:
                done[key] = {key_field: key, **run(key)}
                f.write(json.dumps(done[key]) + "\n")
                f.flush()
    return [done[k] for k in keys]


def update_results(path: Path, keys: Sequence[str], value: Any) -> None:
    """Re-read the JSON file `path` and set only `value` at the nested `keys`, under a lock
    beside it: several scripts (and parts run concurrently) write one results file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        results = json.loads(path.read_text()) if path.exists() else {}
        node = results
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
        path.write_text(json.dumps(results, indent=2) + "\n")


def task_preset(name: str) -> Any:
    """The task as the CLI's `task=<name>` loads it (a `TaskConfig`): a preset's external env
    is registered on the way, so `make_env(name)` and the checkpoints of it resolve."""
    from robocompose.cli import load_verb_config

    return load_verb_config("collect", [f"task={name}"]).task

"""The harness every benchmark script shares: its `--parts` flag, its results file, its resume.

    parser = argparse.ArgumentParser(description=__doc__)
    add_parts(parser, PARTS)                      # --parts a,b  (all: every part)
    args = parser.parse_args()                    # args.parts: a tuple of known part names
    RESULTS = ResultsFile("sim.json", writer="sim.py")
    RESULTS.set(["tasks", task], row)             # re-read, set one key, write, under a lock
    rows = resume_records(RUNS_DIR / "sim" / "speed.jsonl", keys, run)   # runs only missing keys

`RESULTS_DIR` is the folder of the JSON files (benchmarks/results/), `RESULTS` in a script is
that script's `ResultsFile`, `RUNS_DIR` (runs/benchmarks/) holds episodes and the JSONL records
a rerun resumes from. Files several scripts write list each top-level key's owner in
`KEY_OWNERS`; an update touching another script's key is refused.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import statistics
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robocompose.shipped import CHECKPOINTS, shipped_checkpoints

ROOT = CHECKPOINTS.parents[1]  # the repository (the checkpoints live in the package)
RESULTS_DIR = Path(__file__).resolve().parent / "results"
RUNS_DIR = ROOT / "runs" / "benchmarks"

# results files that several scripts write: top-level key -> the script owning it ("*": the rest)
KEY_OWNERS: dict[str, dict[str, str]] = {
    "skills.json": {
        "language_to_rewards": "language_to_rewards.py",
        "corrections_finetune": "corrections_finetune.py",
        "*": "skills.py",
    },
    "external.json": {
        "GymPushT": "external_pusht.py",
        "jax_torch": "jax_policy.py",
        "*": "external.py",
    },
}

__all__ = [
    "CHECKPOINTS",
    "KEY_OWNERS",
    "RESULTS_DIR",
    "ROOT",
    "RUNS_DIR",
    "ResultsFile",
    "add_parts",
    "cpu_model",
    "median_ms",
    "read_jsonl",
    "resume_records",
    "shipped_checkpoints",
    "task_preset",
]

_ABSENT = object()


@dataclass(frozen=True)
class ResultsFile:
    """One JSON file of `folder`, written by the script `writer` (its file name, e.g. "sim.py";
    none: read only). Every write re-reads the file under a lock beside it and changes only what
    the caller changes: several scripts, and parts of one run at the same time, write one file."""

    name: str
    writer: str = ""
    indent: int = 2
    folder: Path = RESULTS_DIR

    def __post_init__(self) -> None:
        owners = KEY_OWNERS.get(self.name)
        if owners is not None and self.writer and self.writer not in owners.values():
            raise ValueError(
                f"{self.name} is shared: writer must be one of {sorted(set(owners.values()))}, "
                f"not {self.writer!r}"
            )

    @property
    def path(self) -> Path:
        return self.folder / self.name

    def read(self) -> dict[str, Any]:
        """The file's document ({} before its first write)."""
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def owner(self, key: str) -> str:
        """The script that owns top-level `key` (this file's writer when nobody shares it)."""
        owners = KEY_OWNERS.get(self.name)
        if owners is None:
            return self.writer
        return owners.get(key, owners["*"])

    def update(self, change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
        """Apply `change(document)` to the file as it is now and write it back; refuses (and
        writes nothing) when `change` touches a top-level key another script owns."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            before = self.read()
            document = self.read()
            change(document)
            for key in before.keys() | document.keys():
                changed = before.get(key, _ABSENT) != document.get(key, _ABSENT)
                if changed and (not self.writer or self.owner(key) != self.writer):
                    raise ValueError(
                        f"{self.name}: key {key!r} belongs to {self.owner(key)}, "
                        f"not {self.writer or 'a reader (no writer given)'}"
                    )
            self.path.write_text(json.dumps(document, indent=self.indent) + "\n")
        return document

    def set(self, keys: Sequence[str], value: Any) -> dict[str, Any]:
        """Set only `value` at the nested `keys` (made on the way) and write the file."""

        def change(document: dict[str, Any]) -> None:
            node = document
            for key in keys[:-1]:
                node = node.setdefault(key, {})
            node[keys[-1]] = value

        return self.update(change)

    def write(self, document: dict[str, Any]) -> None:
        """Replace the whole document (a script that owns every key it holds)."""

        def change(current: dict[str, Any]) -> None:
            current.clear()
            current.update(document)

        self.update(change)


def add_parts(
    parser: argparse.ArgumentParser,
    parts: Sequence[str],
    default: Sequence[str] | None = None,
) -> None:
    """Give `parser` `--parts a,b`: a comma list of `parts` run in one call, parsed into the
    tuple `args.parts`; `all` (and no flag) means `default`, every part unless given."""
    chosen_by_default = tuple(parts if default is None else default)

    def parse(text: str) -> tuple[str, ...]:
        chosen = chosen_by_default if text == "all" else tuple(p for p in text.split(",") if p)
        unknown = [p for p in chosen if p not in parts]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown part {unknown[0]!r}; choose from {', '.join(parts)} or all"
            )
        return chosen

    parser.add_argument(
        "--parts",
        type=parse,
        default=chosen_by_default,
        help=f"comma list of {', '.join(parts)}, or all (default: {','.join(chosen_by_default)})",
    )


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


def cpu_model() -> str:
    """The CPU's model name: a figure from one machine is not a figure from another."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else "unknown"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of the JSONL file `path`, one a line ([] before it exists)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def resume_records(
    path: Path, keys: Sequence[Hashable], run: Callable[[Any], dict], key_field: str = "key"
) -> list[dict]:
    """The JSONL records of `path` for `keys`, in order (each record names its key in
    `key_field`); missing keys are run and appended one by one, so an interrupted run resumes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    done = {record[key_field]: record for record in read_jsonl(path)}
    with path.open("a") as f:
        for key in keys:
            if key not in done:
                done[key] = {key_field: key, **run(key)}
                f.write(json.dumps(done[key]) + "\n")
                f.flush()
    return [done[k] for k in keys]


def task_preset(name: str) -> Any:
    """The task as the CLI's `task=<name>` loads it (a `TaskConfig`): a preset's external env
    is registered on the way, so `make_env(name)` and the checkpoints of it resolve."""
    from robocompose.cli import load_verb_config

    return load_verb_config("collect", [f"task={name}"]).task

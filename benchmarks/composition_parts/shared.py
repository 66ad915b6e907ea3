"""What every part of benchmarks/composition.py shares: the results file, the episode folder,
the seed ranges, a task's parents, and how a paired comparison and a task's row are stored."""

from __future__ import annotations

from pathlib import Path

from common import RUNS_DIR, ResultsFile

from robocompose.composition.api import search
from robocompose.composition.weight_search import SearchResult
from robocompose.policies.checkpoint import load_policy
from robocompose.shipped import parent_pair

OUT = RUNS_DIR / "composition"
SEED_START = 100_000
HELDOUT_SEED_START = 300_000  # fresh seeds: the searched weights were picked on SEED_START's
RESULTS = ResultsFile("composition.json", writer="composition.py")


def record_task(part: str, task: str, value: dict, headline: str, summarise) -> None:
    """Store one task's `value` under `part` and recompute the headline over every task."""

    def change(results: dict) -> None:
        per_task = results.setdefault(part, {})
        per_task[task] = value
        results[headline] = summarise(per_task.values())

    RESULTS.update(change)


def search_folder(task: str) -> Path:
    """The task's search over every operator (episodes, chunk logs, search.json): P1 measures
    its choice, the verifier learns from its chunks."""
    return OUT / task / "search"


def task_search(task: str, parents: list, episodes: int, first_slice: int) -> SearchResult:
    """`search` as a user runs it on the task's search seeds, chunks logged, in
    `search_folder(task)`: the one search P1 and the verifier part share (a rerun reads it back)."""
    seeds = list(range(SEED_START, SEED_START + episodes))
    return search(
        parents,
        seeds,
        out_dir=search_folder(task),
        first_slice=first_slice,
        chunk_log=True,
        progress=False,
    )


def parents_of(task: str) -> tuple[list, list[str]]:
    paths = parent_pair(task)
    return [load_policy(p) for p in paths], [p.name for p in paths]


def pick_best(rows: dict[str, dict]) -> str:
    """The key of the best row: success first, mean score to break ties."""
    return max(rows, key=lambda k: (rows[k]["success"], rows[k]["mean_score"]))


def paired_entry(comparison) -> dict:
    """A paired comparison as stored: the two rows, the discordant counts, the difference with
    its 95% interval, and whether that interval holds 0."""
    row = comparison.to_dict()
    return row | {
        "formatted": comparison.paired.format(),
        "contains_zero": row["ci_low"] <= 0 <= row["ci_high"],
    }

"""Search methods replayed from a full grid's episodes.

Every candidate of the grid ran every seed, so any method's run on any order of those seeds is a
lookup: replays over many random seed orders cost no episode. A replay lands when the candidate
it chooses is within `TOLERANCE_PTS` of the grid optimum, both judged by their success on every
seed (the grid's own figures). `convex_search` is the search every composition benchmark runs.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

from robocompose.composition.api import compose, search
from robocompose.composition.weight_search import (
    Composed,
    Evaluator,
    Key,
    SearchResult,
    grid_search,
)
from robocompose.evaluation import evaluate

TOLERANCE_PTS = 2.0
CONVEX = ("convex",)
# (evaluator, candidates, seed order) -> the search's result
Method = Callable[[Evaluator, list[Key], list[int]], SearchResult]


def convex_search(
    parents: Sequence, seeds: Sequence[int], out_dir: Path, **settings
) -> SearchResult:
    """`search` over the convex weights and each parent alone (`settings`: its other keywords):
    the search the stored results measured, before every searchable method raced in one pool."""
    return search(parents, seeds, out_dir=out_dir, operators=CONVEX, **settings)


def best_convex(found: SearchResult) -> tuple[float, ...]:
    """The convex weights a search over any pool ranked best (what a search of the convex
    weights alone returned)."""
    return found.best_composed_where(lambda key: key.operator == "convex").weights


def best_of_both(found: SearchResult) -> Composed:
    """The composition weighing every parent (no weight 0) that a search ranked best: what
    composing the parents bought, apart from sharpening one of them."""
    return found.best_composed_where(lambda key: all(w > 0 for w in key.weights))


def episode_cache(
    parents: Sequence, keys: Sequence[Composed], seeds: Sequence[int], folder: Path
) -> dict[Key, dict[int, dict]]:
    """candidate -> seed -> record, read back from a search's episode files (nothing runs: the
    harness resumes, so every episode already logged is returned as it was)."""
    cache: dict[Key, dict[int, dict]] = {}
    for key in keys:
        result = composed_episodes(parents, key, seeds, folder / "episodes")
        cache[key] = {r["seed"]: r for r in result.records}
    return cache


def composed_episodes(parents: Sequence, key: Composed, seeds: Sequence[int], out_dir: Path):
    """The composition `key` on `seeds`, logged (and resumed) in out_dir/<its label>.jsonl,
    the file a search writes for that candidate."""
    policy = compose(parents, key.operator, key.weights)
    out = out_dir / f"{key.label}.jsonl"
    return evaluate(policy, seeds, out=out, label=key.label, progress=False)


def seed_orders(seeds: Sequence[int], count: int, seed: int = 0) -> list[list[int]]:
    rng, orders = random.Random(seed), []
    for _ in range(count):
        order = list(seeds)
        rng.shuffle(order)
        orders.append(order)
    return orders


def grid_on_first(n: int) -> Method:
    """The grid on only the first `n` seeds of the order: the cheap grid a method must beat."""

    def run(evaluator: Evaluator, candidates: list[Key], order: list[int]) -> SearchResult:
        return grid_search(evaluator, candidates, order[:n], progress=False)

    return run


def replay(method: Method, cache: dict[Key, dict[int, dict]], orders: list[list[int]]) -> dict:
    """`method` once per seed order: episodes it spends and how far its choice falls short of
    the grid optimum, in points of success on every seed."""
    rate = {
        key: statistics.mean(bool(r["success"]) for r in by_seed.values())
        for key, by_seed in cache.items()
    }
    optimum = max(rate.values())

    def lookup(key: Key, subset: Sequence[int]) -> list[dict]:
        return [cache[key][s] for s in subset]

    spent, gaps = [], []
    for order in orders:
        found = method(lookup, list(cache), order)
        spent.append(found.episodes_spent)
        gaps.append(100 * (optimum - rate[found.choice]))
    return {
        "mean_episodes": statistics.mean(spent),
        "within_2pts_fraction": sum(g <= TOLERANCE_PTS + 1e-9 for g in gaps) / len(gaps),
        "mean_gap_pts": statistics.mean(gaps),
        "worst_gap_pts": max(gaps),
    }


def cheapest_reliable(settings: dict[str, dict], fraction: float = 0.9) -> dict | None:
    """The setting that spends the fewest episodes among those landing within the tolerance in
    at least `fraction` of the replays; None when none does."""
    reliable = {k: v for k, v in settings.items() if v["within_2pts_fraction"] >= fraction}
    if not reliable:
        return None
    key = min(reliable, key=lambda k: reliable[k]["mean_episodes"])
    return {"setting": key, **reliable[key]}

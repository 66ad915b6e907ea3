"""Search methods replayed from a full grid's episodes.

Every candidate of the grid ran every seed, so any method's run on any order of those seeds is a
lookup: replays over many random seed orders cost no episode. A replay lands when the weights it
chooses are within `TOLERANCE_PTS` of the grid optimum, both judged by their success on every
seed (the grid's own figures).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

from robocompose.composition.api import candidate_label, compose
from robocompose.composition.weight_search import Evaluator, SearchResult, Weights, grid_search
from robocompose.evaluation import evaluate

TOLERANCE_PTS = 2.0
# (evaluator, candidates, seed order) -> the search's result
Method = Callable[[Evaluator, list[Weights], list[int]], SearchResult]


def episode_cache(
    parents: Sequence, weights: Sequence[Weights], seeds: Sequence[int], folder: Path
) -> dict[Weights, dict[int, dict]]:
    """weights -> seed -> record, read back from a search's episode files (nothing runs: the
    harness resumes, so every episode already logged is returned as it was)."""
    cache = {}
    for w in weights:
        result = convex_episodes(parents, w, seeds, folder / "episodes")
        cache[tuple(w)] = {r["seed"]: r for r in result.records}
    return cache


def convex_episodes(parents: Sequence, weights: Weights, seeds: Sequence[int], out_dir: Path):
    """The convex composition at `weights` on `seeds`, logged (and resumed) in
    out_dir/<candidate label>.jsonl, the file a search writes for that candidate."""
    label = candidate_label("convex", weights)
    policy = compose(parents, "convex", weights)
    return evaluate(policy, seeds, out=out_dir / f"{label}.jsonl", label=label, progress=False)


def seed_orders(seeds: Sequence[int], count: int, seed: int = 0) -> list[list[int]]:
    rng, orders = random.Random(seed), []
    for _ in range(count):
        order = list(seeds)
        rng.shuffle(order)
        orders.append(order)
    return orders


def grid_on_first(n: int) -> Method:
    """The grid on only the first `n` seeds of the order: the cheap grid a method must beat."""

    def run(evaluator: Evaluator, candidates: list[Weights], order: list[int]) -> SearchResult:
        return grid_search(evaluator, candidates, order[:n], progress=False)

    return run


def replay(method: Method, cache: dict[Weights, dict[int, dict]], orders: list[list[int]]) -> dict:
    """`method` once per seed order: episodes it spends and how far its choice falls short of
    the grid optimum, in points of success on every seed."""
    rate = {
        w: statistics.mean(bool(r["success"]) for r in by_seed.values())
        for w, by_seed in cache.items()
    }
    optimum = max(rate.values())

    def lookup(weights: Weights, subset: Sequence[int]) -> list[dict]:
        return [cache[weights][s] for s in subset]

    spent, gaps = [], []
    for order in orders:
        found = method(lookup, list(cache), order)
        spent.append(found.episodes_spent)
        gaps.append(100 * (optimum - rate[found.chosen]))
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

"""P3 search cost (`--parts search`) and P4 search on the 2-simplex (`--parts k3`): a full grid's
episodes, and search methods replayed over random orders of its seeds."""

from __future__ import annotations

import json
import random
import statistics

import torch
from common import CHECKPOINTS, cpu_model
from search_replay import (
    cheapest_reliable,
    composed_episodes,
    convex_search,
    episode_cache,
    grid_on_first,
    replay,
    seed_orders,
)

from robocompose.composition.weight_search import (
    Composed,
    NativeParent,
    racing,
    successive_halving,
)
from robocompose.evaluation import evaluate
from robocompose.policies.checkpoint import load_policy
from robocompose.stats import paired_outcomes

from .shared import HELDOUT_SEED_START, OUT, SEED_START, parents_of, search_folder


def search_cost(task: str, episodes: int, first_slice: int, replays: int) -> dict:
    parents, _ = parents_of(task)
    seeds = list(range(SEED_START, SEED_START + episodes))
    folder = search_folder(task)  # P1's search: its episodes are the grid's too
    # chunk logs as P1 keeps them, so P1's search can read back any episode the grid adds
    grid = convex_search(parents, seeds, folder, method="grid", chunk_log=True, progress=False)
    rate = {c.key: c.rate for c in grid.candidates}
    target = rate[grid.choice]  # what the full grid returns, by the same never-worse rule
    keys = [c.key for c in grid.candidates]  # each parent alone first, then the weights
    cache = episode_cache(parents, [k for k in keys if isinstance(k, Composed)], seeds, folder)
    for key in keys:
        if isinstance(key, NativeParent):  # read back from the search's own file
            out = folder / "episodes" / f"{key.label}.jsonl"
            result = evaluate(parents[key.index], seeds, out=out, label=key.label, progress=False)
            cache[key] = {r["seed"]: r for r in result.records}

    def replay(key, subset):
        return [cache[key][s] for s in subset]

    ratios, hits, rng = [], 0, random.Random(0)
    for _ in range(replays):
        order = seeds[:]
        rng.shuffle(order)
        found = successive_halving(replay, keys, order, first_slice=first_slice, progress=False)
        ratios.append(found.episodes_spent / grid.episodes_spent)
        hits += 100 * (target - rate[found.choice]) <= 2.0
    return {
        "task": task,
        "grid_seeds": episodes,
        "grid_episodes": grid.episodes_spent,
        "grid_optimum": max(rate.values()),
        "grid_chosen": list(grid.chosen),
        "grid_chosen_kind": grid.chosen_kind,
        "grid_chosen_success": target,
        "candidates": "each parent alone (native sampler) and the 11 convex weights",
        "grid_table": grid.table(),
        "halving_first_slice": first_slice,
        "replays": replays,
        "search_cost_ratio": statistics.mean(ratios),
        "within_2pts_of_grid_choice": hits / replays,
        "cpu": cpu_model(),
    }


K3_PARENTS = ("Stack_diffusion_mlp", "Stack_flow_mlp", "Stack_flow_mlp_b")


def _k3_methods(episodes: int) -> dict[str, dict]:
    """Each method at several budgets: fewer grid seeds, a larger first slice, a smaller z;
    racing also with the target's tolerance (drop what cannot beat the leader by 2 points)."""

    def halving(first_slice):
        return lambda ev, cands, order: successive_halving(
            ev, cands, order, first_slice=first_slice, progress=False
        )

    def race(first_slice, z, tolerance):
        return lambda ev, cands, order: racing(
            ev, cands, order, first_slice, z, tolerance, progress=False
        )

    grid_seeds = sorted({n for n in (8, 16, 24, 32, 48, episodes) if n <= episodes})
    return {
        "grid": {f"seeds={n}": grid_on_first(n) for n in grid_seeds},
        "halving": {f"first_slice={f}": halving(f) for f in (2, 4, 8, 16, 32) if f < episodes},
        **{
            method: {
                f"first_slice={f},z={z}": race(f, z, tolerance)
                for f in (2, 4, 8)
                for z in (1.96, 1.64, 1.28, 0.84)
            }
            for method, tolerance in (("racing", 0.0), ("racing_tolerance_2pts", 0.02))
        },
    }


def _regions(candidates: list) -> dict[str, tuple]:
    """The best weights using one parent, at most two, and all three (ties: mean score)."""
    best = {}
    for key, allowed in (("best_vertex", {1}), ("best_edge", {1, 2}), ("best_interior", {3})):
        inside = [c for c in candidates if sum(x > 0 for x in c.weights) in allowed]
        best[key] = max(inside, key=lambda c: (c.rate, c.mean_score)).weights
    return best


def _paired_row(a: list[bool], b: list[bool]) -> dict:
    paired = paired_outcomes(a, b)
    return {"difference_pts": 100 * paired.difference, "text": paired.format()}


def search_k3(episodes: int, replays: int, fresh_episodes: int) -> dict:
    torch.set_num_threads(1)
    parents = [load_policy(CHECKPOINTS / name) for name in K3_PARENTS]
    seeds = list(range(SEED_START, SEED_START + episodes))
    folder = OUT / "Stack_k3"
    grid = convex_search(parents, seeds, folder, method="grid", step=0.1)
    print(f"K=3 grid:\n{grid.table()}", flush=True)
    convex = [c.key for c in grid.candidates if isinstance(c.key, Composed)]
    cache = episode_cache(parents, convex, seeds, folder)
    orders = seed_orders(seeds, replays)
    methods = {}
    for method, settings in _k3_methods(episodes).items():
        methods[method] = {key: replay(run, cache, orders) for key, run in settings.items()}
        methods[method + "_cheapest_90pct"] = cheapest_reliable(methods[method])
        print(f"K=3 {method}: {json.dumps(methods[method])}", flush=True)

    regions = _regions(grid.candidates)
    outcome = {
        w: [bool(cache[Composed("convex", w)][s]["success"]) for s in seeds]
        for w in regions.values()
    }
    fresh_seeds = list(range(HELDOUT_SEED_START, HELDOUT_SEED_START + fresh_episodes))
    fresh = {}
    for w in set(regions.values()):
        key = Composed("convex", w)
        fresh[w] = composed_episodes(parents, key, fresh_seeds, folder / "fresh")
        print(f"K=3 fresh {key.label}: {fresh[w].summary()}", flush=True)
    fresh_outcome = {}  # in the order of fresh_seeds, so they pair seed by seed
    for w, result in fresh.items():
        by_seed = {r["seed"]: bool(r["success"]) for r in result.records}
        fresh_outcome[w] = [by_seed[s] for s in fresh_seeds]
    row = {c.weights: c.row() for c in grid.candidates}
    interior, edge, vertex = (regions[k] for k in ("best_interior", "best_edge", "best_vertex"))
    return {
        "task": "Stack",
        "parents": list(K3_PARENTS),
        "seeds": episodes,
        "grid_episodes": grid.episodes_spent,
        "grid_optimum": {"weights": list(grid.chosen), **row[grid.chosen]},
        **{k: {"weights": list(w), **row[w]} for k, w in regions.items()},
        "fresh_seeds": fresh_episodes,
        "fresh": {k: {"weights": list(w), **fresh[w].row()} for k, w in regions.items()},
        "interior_minus_edge": {
            "search_seeds": _paired_row(outcome[interior], outcome[edge]),
            "fresh_seeds": _paired_row(fresh_outcome[interior], fresh_outcome[edge]),
        },
        "edge_minus_vertex": {
            "search_seeds": _paired_row(outcome[edge], outcome[vertex]),
            "fresh_seeds": _paired_row(fresh_outcome[edge], fresh_outcome[vertex]),
        },
        "replays": replays,
        "tolerance_pts": 2.0,
        "methods": methods,
        "grid_table": grid.table(),
    }

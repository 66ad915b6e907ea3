"""Composition figures, each measured in one run of this script.

P1 quality, per task: the task's shipped parent pair (robocompose.shipped) and the convex (GPC)
    composition found by successive halving, all on the same >= 200 seeds with Wilson CIs; plus
    other operators at their natural weights (product of experts w = (1, 1), SuperDiff AND and
    OR, mixture at the chosen weights) and parameter merge where the parents share an
    architecture; and, as the control for the product, the better parent alone with its score
    doubled (w = (2, 0): p^2, as sharp as the product).
    delta_pts = best composed - best parent, in points. With --heldout-episodes, the parents, the
    chosen convex weights and the product again on fresh seeds (the search chose on the P1 seeds).
P2 latency, per task pair: composed (K=2) chunk latency / the slower parent's, batch 1 and 16, 10
    steps, each at its best torch thread count (1 or 2), median of many calls. The headline
    `latency_ratio` is the worst pair at batch 1. A diffusion parent's native sampler is diffusers'
    DDIMScheduler, whose Python per step costs as much as an MLP forward, so each parent is also
    timed alone through the composed sampler's own path (its Denoiser, Euler on its grid):
    `ratio_vs_slower_parent_same_sampler` is the composition's cost on equal footing.
P3 search cost, per task: the full grid (11 weights x N seeds) against successive halving
    replayed over random orders of the same seed list (every episode is cached, so the replays
    are free): mean episodes halving spends / grid episodes, and how often it lands within 2
    points of the grid optimum. The headline `search_cost_ratio` is the mean over tasks.

Episodes are written under runs/benchmarks/composition/ as they finish; a rerun resumes.

    python benchmarks/composition.py --part all [--tasks PushT,...] [--episodes 200]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import random
import statistics

import torch
from common import RESULTS, ROOT, median_ms
from policy_latency import random_obs

from robocompose.composition.api import candidate_label, compose, search
from robocompose.composition.policy import ComposedPolicy
from robocompose.composition.samplers import sample_euler
from robocompose.composition.search import (
    plot_search,
    simplex_grid,
    successive_halving,
)
from robocompose.evaluation import evaluate
from robocompose.policies.checkpoint import load_policy
from robocompose.shipped import PARENT_PAIRS, parent_pair

OUT = ROOT / "runs" / "benchmarks" / "composition"
SEED_START = 100_000
HELDOUT_SEED_START = 300_000  # fresh seeds: the searched weights were picked on SEED_START's
PATH = RESULTS / "composition.json"


def _update(change) -> dict:
    """Read the results file, apply `change(results)`, write it back, all under a file lock:
    several runs of this script (say, one task each) may finish parts at the same time."""
    RESULTS.mkdir(exist_ok=True)
    with open(PATH.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        results = json.loads(PATH.read_text()) if PATH.exists() else {}
        change(results)
        PATH.write_text(json.dumps(results, indent=2) + "\n")
    return results


def _record(part: str, task: str, value: dict, headline: str, summarise) -> None:
    """Store one task's `value` under `part` and recompute the headline over every task."""

    def change(results: dict) -> None:
        per_task = results.setdefault(part, {})
        per_task[task] = value
        results[headline] = summarise(per_task.values())

    _update(change)


def parents_of(task: str) -> tuple[list, list[str]]:
    paths = parent_pair(task)
    return [load_policy(p) for p in paths], [p.name for p in paths]


def quality(
    task: str, episodes: int, first_slice: int, operator_episodes: int, heldout_episodes: int
) -> dict:
    parents, names = parents_of(task)
    seeds = list(range(SEED_START, SEED_START + episodes))
    folder = OUT / task
    rows = []
    for name, parent in zip(names, parents, strict=True):  # the same file policies.py writes
        log = ROOT / "runs" / "benchmarks" / "policies" / f"{name}.jsonl"
        result = evaluate(parent, seeds, out=log, label=name)
        rows.append({"checkpoint": name, **result.row()})
        print(f"{task} parent {name}: {result.summary()}", flush=True)
    found = search(parents, seeds, out_dir=folder, method="halving", first_slice=first_slice)
    chosen = next(c for c in found.candidates if c.weights == found.chosen)
    best = {"operator": "convex", "weights": list(found.chosen), **chosen.row()}
    print(f"{task} convex search:\n{found.table()}", flush=True)
    plot_search(found, folder / "search.png", [dict(r, label=r["checkpoint"]) for r in rows], task)

    operators = {"convex": best}
    better = max(range(2), key=lambda i: rows[i]["success"])
    trials = {
        "product_of_experts": ("weighted_sum", (1.0, 1.0)),
        # the control for the product: the better parent alone, sharpened the same way (p^2)
        "sharpened_best_parent": ("weighted_sum", tuple(2.0 * (i == better) for i in range(2))),
        "superdiff_and": ("superdiff_and", (0.5, 0.5)),
        "superdiff_or": ("superdiff_or", (0.5, 0.5)),
        "mixture": ("mixture", tuple(found.chosen)),
        "merge": ("merge", tuple(found.chosen)),
    }
    for key, (operator, weights) in trials.items():
        try:
            policy = compose(parents, operator, weights)
        except ValueError as e:  # e.g. merge of different architectures
            operators[key] = {"operator": operator, "skipped": str(e)}
            continue
        label = candidate_label(operator, weights)
        result = evaluate(
            policy,
            seeds[:operator_episodes],
            out=folder / "episodes" / f"{label}.jsonl",
            label=label,
        )
        operators[key] = {"operator": operator, "weights": list(weights), **result.row()}
        print(f"{task} {key}: {result.summary()}", flush=True)

    ranked = [v for v in operators.values() if "success" in v]
    top = max(ranked, key=lambda r: (r["success"], r["mean_score"]))
    best_parent = max(r["success"] for r in rows)
    record = {
        "parents": rows,
        "best": best,
        "best_any_operator": top,
        "operators": operators,
        "search": found.to_dict(),
        "delta_pts": 100 * (best["success"] - best_parent),
        "delta_pts_any_operator": 100 * (top["success"] - best_parent),
    }
    if heldout_episodes:
        record["heldout"] = heldout(task, parents, names, found.chosen, heldout_episodes)
    return record


def heldout(task: str, parents: list, names: list[str], chosen, episodes: int) -> dict:
    """The parents, the searched convex weights and the product of experts again, on fresh
    seeds: the search picked its weights on the P1 seeds, so their P1 figure is biased up."""
    seeds = list(range(HELDOUT_SEED_START, HELDOUT_SEED_START + episodes))
    runs = {name: parent for name, parent in zip(names, parents, strict=True)}
    runs[candidate_label("convex", chosen)] = compose(parents, "convex", chosen)
    runs[candidate_label("weighted_sum", (1.0, 1.0))] = compose(parents, "weighted_sum", (1, 1))
    rows = {}
    for label, policy in runs.items():
        log = OUT / task / "heldout" / f"{label}.jsonl"
        result = evaluate(policy, seeds, out=log, label=label)
        rows[label] = result.row()
        print(f"{task} held out {label}: {result.summary()}", flush=True)
    best_parent = max(rows[name]["success"] for name in names)
    convex = rows[candidate_label("convex", chosen)]["success"]
    product = rows[candidate_label("weighted_sum", (1.0, 1.0))]["success"]
    return {
        "seed_start": HELDOUT_SEED_START,
        "rows": rows,
        "convex_delta_pts": 100 * (convex - best_parent),
        "product_delta_pts": 100 * (product - best_parent),
    }


@torch.no_grad()
def _euler(parent, obs, noise) -> torch.Tensor:
    """One parent alone, sampled the way a composition samples (Denoiser + Euler, own grid)."""
    denoiser = parent.denoiser(obs)
    return sample_euler(denoiser, noise, denoiser.sigmas(10))


def latency(task: str, repeats: int) -> dict:
    parents, names = parents_of(task)
    out = {}
    for batch in (1, 16):
        obs = random_obs(parents[0], batch)
        noise = torch.randn(batch, *parents[0].chunk_shape(1)[1:])
        single, single_euler, composed = {}, {}, {}
        for threads in (1, 2):
            torch.set_num_threads(threads)
            for name, parent in zip(names, parents, strict=True):
                ms = median_ms(
                    lambda p=parent, o=obs, n=noise: p.sample(o, 10, n), repeats, warmup=3
                )
                single[name] = min(single.get(name, float("inf")), ms)
                ms = median_ms(lambda p=parent, o=obs, n=noise: _euler(p, o, n), repeats, warmup=3)
                single_euler[name] = min(single_euler.get(name, float("inf")), ms)
            for parallel in (False, True):
                policy = compose(parents, "convex", (0.5, 0.5), parallel=parallel)
                assert isinstance(policy, ComposedPolicy)
                ms = median_ms(
                    lambda p=policy, o=obs, n=noise: p.predict_actions(o, n), repeats, warmup=3
                )
                key = f"threads{threads}_{'parallel' if parallel else 'serial'}"
                composed[key] = ms
        best_key = min(composed, key=composed.get)
        slower = max(single.values())
        out[f"batch{batch}"] = {
            "single_ms": single,
            "single_same_sampler_ms": single_euler,
            "composed_ms": composed,
            "best_composed": best_key,
            "ratio_vs_slower_parent": composed[best_key] / slower,
            "ratio_vs_slower_parent_same_sampler": composed[best_key] / max(single_euler.values()),
            "ratio_vs_sum_of_parents": composed[best_key] / sum(single.values()),
        }
        print(f"latency batch {batch}: {json.dumps(out[f'batch{batch}'])}", flush=True)
    torch.set_num_threads(2)
    return out


def search_cost(task: str, episodes: int, first_slice: int, replays: int) -> dict:
    parents, _ = parents_of(task)
    seeds = list(range(SEED_START, SEED_START + episodes))
    folder = OUT / task
    grid = search(parents, seeds, out_dir=folder, method="grid")
    rate = {c.weights: c.rate for c in grid.candidates}
    optimum = max(rate.values())
    cache = {  # weights -> seed -> record, from the grid's own files
        c.weights: {
            r["seed"]: r
            for r in evaluate(
                compose(parents, "convex", c.weights),
                seeds,
                out=folder / "episodes" / f"{candidate_label('convex', c.weights)}.jsonl",
                label=candidate_label("convex", c.weights),
                progress=False,
            ).records
        }
        for c in grid.candidates
    }

    def replay(weights, subset):
        return [cache[weights][s] for s in subset]

    ratios, hits, rng = [], 0, random.Random(0)
    for _ in range(replays):
        order = seeds[:]
        rng.shuffle(order)
        found = successive_halving(
            replay, simplex_grid(2, 0.1), order, first_slice=first_slice, progress=False
        )
        ratios.append(found.episodes_spent / grid.episodes_spent)
        hits += 100 * (optimum - rate[found.chosen]) <= 2.0
    return {
        "task": task,
        "grid_episodes": grid.episodes_spent,
        "grid_optimum": optimum,
        "grid_chosen": list(grid.chosen),
        "grid_table": grid.table(),
        "halving_first_slice": first_slice,
        "replays": replays,
        "search_cost_ratio": statistics.mean(ratios),
        "within_2pts_fraction": hits / replays,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--part", default="all", choices=["all", "quality", "latency", "search"])
    parser.add_argument("--tasks", default=",".join(PARENT_PAIRS))
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--first-slice", type=int, default=25)
    parser.add_argument("--operator-episodes", type=int, default=200)
    parser.add_argument(
        "--heldout-episodes", type=int, default=200, help="P1 again on fresh seeds (0: skip)"
    )
    parser.add_argument("--search-episodes", type=int, default=200, help="P3 grid seeds")
    parser.add_argument("--replays", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    tasks = args.tasks.split(",")
    for task in tasks if args.part in ("all", "latency") else ():
        _record(
            "latency",
            task,
            latency(task, args.repeats),
            "latency_ratio",
            lambda rows: max(r["batch1"]["ratio_vs_slower_parent"] for r in rows),
        )
    for task in tasks if args.part in ("all", "search") else ():
        _record(
            "search_cost",
            task,
            search_cost(task, args.search_episodes, args.first_slice, args.replays),
            "search_cost_ratio",
            lambda rows: statistics.mean(r["search_cost_ratio"] for r in rows),
        )
    for task in tasks if args.part in ("all", "quality") else ():
        found = quality(
            task,
            args.episodes,
            args.first_slice,
            args.operator_episodes,
            args.heldout_episodes,
        )
        _record(
            "quality",
            task,
            found,
            "mean_delta_pts",
            lambda rows: statistics.mean(r["delta_pts"] for r in rows),
        )


if __name__ == "__main__":
    main()

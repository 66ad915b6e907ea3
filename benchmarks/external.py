"""Composition on the external tasks (third-party envs from configs/task/ presets): one key of
external.json per task.

Per task, on the same fresh seeds (200 by default): the preset's scripted expert, both shipped
parents, the search's choice (`search` on separate search seeds: every searchable operator, so
convex weights on a 0.25 grid, the product of experts and each parent sharpened, and each parent
alone, in one successive-halving pool), the best convex weights of that search and the product of
experts (weighted sum w = (1, 1)). Each is paired seed by seed against the better parent on the
fresh seeds (chosen there, which favours the parent): the difference with Newcombe's 95% interval,
and the parents' complementarity (only A, only B, both, neither).

| task | parents (shipped <task>_<kind>) |
|---|---|
| FetchReach | a torch diffusion UNet and a JAX flow MLP (the cross-framework pair) |
| Lift, PickPlaceCan | a v-prediction diffusion MLP and a flow MLP (robosuite) |

Episodes go to runs/benchmarks/external/<task>/ as they end; a rerun resumes. Only this script's
keys of external.json are rewritten, under a lock (benchmarks/external_pusht.py and
jax_policy.py write theirs).

Parts (`--parts`, default main): main (the above, key <task>), grid_cost (parent A alone against
A through the composed sampler, on `--grid-cost-episodes` fresh seeds; key <task>_grid_cost),
grid_choice (each composition on each parent's grid, after the main run; key <task>_grid_choice),
vertex (each parent's vertex against the parent natively, on `--vertex-episodes` fresh seeds; key
<task>.vertex_gap), selector (the selector composition by `--selector-score` on
`--selector-episodes` fresh seeds against the better parent and the per-seed oracle; key
<task>.selector, another score's under <task>.selector_by_score), verifier (the selector by a chunk
verifier learned from the search's own chunk logs and `--verifier-rounds` rounds of its own
episodes, on the fresh seeds against the better parent, its composed candidate and the per-seed
oracle: benchmarks/composition_parts/verifier.py's pipeline; key <task>.selector, the agreement
run it replaces moved to <task>.selector_by_score.agreement; a search with too few failed
episodes to learn from records why under <task>.verifier_not_run), headlines (no episodes: only
the headlines over every pair, which every run recomputes at its end).

    python benchmarks/external.py [--tasks FetchReach,Lift,PickPlaceCan] [--fresh 200]
    python benchmarks/external.py --tasks PickPlaceCan --parts grid_cost    # 40 episodes
    python benchmarks/external.py --tasks PickPlaceCan --parts grid_choice
    python benchmarks/external.py --tasks PickPlaceCan --parts vertex       # 100 episodes
    python benchmarks/external.py --tasks PickPlaceCan --parts selector     # 100 episodes
    python benchmarks/external.py --tasks Lift --parts verifier
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import (
    CHECKPOINTS,
    RUNS_DIR,
    ResultsFile,
    add_parts,
    resume_records,
    task_preset,
)
from composition_parts.selector import add_selector_args, selector_versus
from composition_parts.verifier import (
    SelectorPair,
    add_verifier_args,
    learned_selector,
    place_learned_selector,
)
from composition_parts.vertex import vertex_gap
from search_replay import best_convex

from robocompose.chunk_log import episode_files, read_episode
from robocompose.compare import compare
from robocompose.composition.api import candidate_label, compose, search
from robocompose.composition.weight_search import NativeParent, SearchResult
from robocompose.evaluation import evaluate
from robocompose.policies.checkpoint import load_policy
from robocompose.sim.collect import run_expert_episode
from robocompose.sim.tasks import make_env, make_expert
from robocompose.stats import paired_outcomes, success_rate

PARENTS = {
    "FetchReach": ("diffusion_unet", "flow_jax_mlp"),
    "Lift": ("diffusion_mlp", "flow_mlp"),
    "PickPlaceCan": ("diffusion_mlp", "flow_mlp"),
}
OUT = RUNS_DIR / "external"
RESULTS = ResultsFile("external.json", writer="external.py")
SEARCH_SEED_START = 100_000
FRESH_SEED_START = 300_000
PARTS = ("main", "grid_cost", "grid_choice", "vertex", "selector", "verifier", "headlines")
# a pair's keys the vertex, selector and verifier parts store apart; rerunning the pair's main
# part keeps them
APART = ("vertex_gap", "selector", "selector_by_score", "selector_by_margin", "verifier_not_run")
MIN_FAILED = 10  # failed search episodes the learned selector needs


def expert_rate(task: str, seeds: list[int], out: Path) -> dict[str, Any]:
    """The preset's expert (its own config) on `seeds`, one JSONL record per seed."""
    env = make_env(task)
    expert = make_expert(task)

    def run(seed: str) -> dict[str, Any]:
        episode = run_expert_episode(env, expert, int(seed))
        return {"success": episode.success, "steps": len(episode.actions)}

    records = resume_records(out / "expert.jsonl", [str(s) for s in seeds], run)
    env.close()
    rate = success_rate(sum(r["success"] for r in records), len(records))
    return {
        "success": rate.rate,
        "ci_low": rate.ci_low,
        "ci_high": rate.ci_high,
        "episodes": rate.episodes,
        "mean_steps": float(np.mean([r["steps"] for r in records])),
        "outcomes": [bool(r["success"]) for r in records],
    }


def paired_row(comparison: Any) -> dict[str, Any]:
    row = comparison.to_dict()
    return {k: row[k] for k in ("labels", "rows", "only_a", "only_b", "both", "neither")} | {
        "difference": row["difference"],
        "ci95": [row["ci_low"], row["ci_high"]],
        "formatted": comparison.paired.format(),
    }


def pair_of(task: str) -> tuple[list, list[str]]:
    """The task's shipped parents (<task>_<kind>) and their names."""
    names = [f"{task}_{kind}" for kind in PARENTS[task]]
    return [load_policy(CHECKPOINTS / name) for name in names], names


def pair_search(
    parents: list, seeds: list[int], out_dir: Path, first_slice: int, step: float
) -> SearchResult:
    """`search` as a user runs it, chunks logged: the one search a pair's main part measures
    and its learned selector trains on (a rerun reads it back)."""
    return search(
        parents,
        seeds,
        out_dir=out_dir,
        first_slice=first_slice,
        step=step,
        chunk_log=True,
        progress=False,
    )


def search_failures(chunks: Path) -> tuple[int, int]:
    """(episodes, failed episodes) among a search's chunk logs."""
    outcomes = [read_episode(path).success for path in episode_files([chunks])]
    return len(outcomes), outcomes.count(False)


def pair_verifier(
    parents: list,
    names: list[str],
    search_dir: Path,
    search_seeds: list[int],
    fresh: list[int],
    fresh_dir: Path,
    args: argparse.Namespace,
    tag: str = "",
) -> dict[str, Any]:
    """The learned selector of one pair (composition_parts/verifier.py's pipeline, its rounds
    in <search_dir>/../<tag>verifier_margin<m>), or why it was not run: a search with fewer than
    MIN_FAILED failed episodes cannot show a verifier what failure looks like."""
    found = pair_search(parents, search_seeds, search_dir, args.first_slice, args.step)
    print(found.table(), flush=True)
    episodes, failed = search_failures(search_dir / "chunks")
    if failed < MIN_FAILED:
        return {
            "not_run": f"the search's {episodes} episodes hold {failed} failed (fewer than "
            f"{MIN_FAILED}): nothing to learn failure from",
            "search_episodes": episodes,
            "failed": failed,
        }
    margin = args.selector_margin
    pair = SelectorPair(
        name=" ".join(names),
        parents=parents,
        names=names,
        found=found,
        search_chunks=search_dir / "chunks",
        search_seeds=search_seeds,
        folder=search_dir.parent / f"{tag}verifier_margin{margin:g}",
        fresh_seeds=fresh,
        fresh_dir=fresh_dir,
        tag=tag,
    )
    return learned_selector(
        pair, args.verifier_rounds, args.round_episodes, args.verifier_std_weight, margin
    )


def store_learned(row: dict[str, Any], entry: dict[str, Any]) -> None:
    """A pair's learned selector becomes its `selector` (the agreement run it replaces kept
    under `selector_by_score`); a pair it could not run on keeps why, in `verifier_not_run`."""
    if "not_run" in entry:
        row["verifier_not_run"] = entry
    else:
        row.pop("verifier_not_run", None)
        place_learned_selector(row, entry)


def task_result(
    task: str, fresh: list[int], search_seeds: list[int], first_slice: int, step: float
) -> dict:
    preset = task_preset(task)
    folder = OUT / task
    parents, names = pair_of(task)
    start = time.perf_counter()
    expert = expert_rate(task, fresh, folder)
    print(f"{task} expert: {success_rate(int(sum(expert['outcomes'])), len(fresh))}", flush=True)

    on_fresh = compare(*parents, fresh, out_dir=folder / "fresh", labels=tuple(names))
    print(f"{task} parents on fresh seeds:\n{on_fresh.table()}", flush=True)
    rows = {n: r.row() for n, r in zip(names, on_fresh.results, strict=True)}
    better = max(names, key=lambda n: (rows[n]["success"], rows[n]["mean_score"]))

    found = pair_search(parents, search_seeds, folder / "search", first_slice, step)
    print(f"{task} search over every operator:\n{found.table()}", flush=True)
    composed = {
        key: {"operator": operator, "weights": list(weights)}
        | against_better(
            task,
            compose(parents, operator, weights),
            candidate_label(operator, weights),
            parents[names.index(better)],
            better,
            fresh,
        )
        for key, (operator, weights) in trials(best_convex(found)).items()
    }
    best = max(composed, key=lambda k: composed[k]["success"])
    chosen = chosen_candidate(task, found, parents, names, better, on_fresh, fresh)
    return {
        "env_id": preset.external["env_id"],
        "dataset": preset.dataset,
        "fresh_seeds": {"start": fresh[0], "episodes": len(fresh)},
        "search_seeds": {"start": search_seeds[0], "episodes": len(search_seeds)},
        "expert": {k: v for k, v in expert.items() if k != "outcomes"},
        "parents": rows,
        "parents_paired": paired_row(on_fresh),
        "better_parent": better,
        "search": found.to_dict(),
        "composed": composed,
        "best_composition": best,
        "best_minus_better_parent": composed[best]["minus_better_parent"]["formatted"],
        "chosen_candidate": chosen,
        "never_worse": chosen["minus_better_parent"]["ci95"][1] >= 0,
        "seconds": time.perf_counter() - start,
    }


def chosen_candidate(
    task: str,
    found: Any,
    parents: list,
    names: list[str],
    better: str,
    on_fresh: Any,
    fresh,
    out_dir: Path | None = None,
    tag: str = "",
) -> dict[str, Any]:
    """What the search returns (a parent alone, or its composition) on the fresh seeds,
    paired against the better parent there: the same policy scores 0 on every seed.
    `out_dir`: where the composition's fresh episodes go (default the task's fresh/), its file
    named with the prefix `tag` (for a folder that several pairs share)."""
    row: dict[str, Any] = {"kind": found.chosen_kind, "weights": list(found.chosen)}
    if isinstance(found.choice, NativeParent):
        name = names[found.choice.index]
        by_name = dict(zip(names, on_fresh.results, strict=True))
        mine, theirs = ([bool(r["success"]) for r in by_name[n].records] for n in (name, better))
        paired = paired_outcomes(mine, theirs)
        return row | {
            "parent": name,
            **by_name[name].row(),
            "minus_better_parent": {
                "difference": paired.difference,
                "ci95": [paired.ci_low, paired.ci_high],
                "formatted": paired.format(),
            },
        }
    policy = compose(parents, found.choice.operator, found.choice.weights)
    label = tag + found.choice.label
    better_policy = parents[names.index(better)]
    return row | against_better(task, policy, label, better_policy, better, fresh, out_dir)


def trials(convex_weights) -> dict[str, tuple[str, tuple[float, ...]]]:
    """The compositions measured against the better parent: the searched convex weights and
    the product of experts."""
    return {
        "convex": ("convex", tuple(convex_weights)),
        "product_of_experts": ("weighted_sum", (1.0, 1.0)),
    }


def against_better(
    task: str,
    policy: Any,
    label: str,
    better: Any,
    better_name: str,
    fresh: list[int],
    out_dir: Path | None = None,
) -> dict[str, Any]:
    """`policy` on the fresh seeds, paired seed by seed against the better parent."""
    folder = out_dir or OUT / task / "fresh"
    pair = compare(policy, better, fresh, out_dir=folder, labels=(label, better_name))
    print(f"{task} fresh {label} - {better_name}: {pair.paired.format()}", flush=True)
    return {**pair.results[0].row(), "minus_better_parent": paired_row(pair)}


def composed_grid_cost(task: str, seeds: list[int]) -> dict[str, Any]:
    """Parent A alone (its own sampler and grid) against the composition at weights (1, 0),
    which runs A alone through the composed sampler on the grid the pair composes on (a flow
    parent's, when one is sound at sigma = inf): what that grid costs A, paired per seed."""
    task_preset(task)
    (a, b), names = pair_of(task)
    vertex = compose([a, b], "convex", (1.0, 0.0))
    label = f"{names[0]}_on_composed_grid"
    pair = compare(vertex, a, seeds, out_dir=OUT / task / "grid", labels=(label, names[0]))
    print(f"{task} {label} - {names[0]}: {pair.paired.format()}", flush=True)
    return {
        "parent": names[0],
        "grid_of": names[1],
        "seeds": {"start": seeds[0], "episodes": len(seeds)},
        **paired_row(pair),
    }


def grid_choice(task: str, fresh: list[int], search_seeds: list[int]) -> dict[str, Any]:
    """The task's searched convex weights and the product of experts, each on every parent's
    own grid (`grid=parent<i>`) where it can start: the grid chosen on the search seeds, then
    paired against the better parent on the fresh seeds (both from the task's main run)."""
    task_preset(task)
    stored = RESULTS.read()[task]
    parents, names = pair_of(task)
    better = stored["better_parent"]
    folder = OUT / task / "grid_choice"
    out: dict[str, Any] = {"better_parent": better}
    for key, (operator, weights) in trials(stored["search"]["chosen"]).items():
        on_search = {}
        for i in range(len(parents)):
            grid = f"parent{i}"
            try:
                policy = compose(parents, operator, weights, grid=grid)
                policy.resolved_sigmas()
            except ValueError as refused:
                on_search[grid] = {"refused": str(refused)}
                continue
            label = f"{candidate_label(operator, weights)}_{grid}"
            result = evaluate(policy, search_seeds, out=folder / f"{label}.jsonl", label=label)
            on_search[grid] = result.row()
            print(f"{task} {label} on search seeds: {result.row()['success']:.3f}", flush=True)
        usable = [g for g in on_search if "refused" not in on_search[g]]
        chosen = max(usable, key=lambda g: on_search[g]["success"])
        out[key] = {
            "operator": operator,
            "weights": list(weights),
            "grids_of": names,
            "on_search_seeds": on_search,
            "chosen_grid": chosen,
            **against_better(
                task,
                compose(parents, operator, weights, grid=chosen),
                f"{candidate_label(operator, weights)}_{chosen}",
                parents[names.index(better)],
                better,
                fresh,
            ),
        }
    return out


def store_task(doc: dict[str, Any], task: str, result: dict[str, Any]) -> None:
    """The task's row, keeping what the vertex and selector parts stored apart."""
    kept = {k: doc[task][k] for k in APART if k in doc.get(task, {})}
    doc[task] = result | kept


def headlines(doc: dict[str, Any]) -> None:
    """Over every pair measured (these tasks and GymPushT's two pairs): `never_worse`, no
    pair's chosen candidate significantly below its better parent on the fresh seeds, and
    `vertex_gaps_contain_zero`, every vertex gap's interval holding 0; each with its pairs.
    `significant_gain_pairs`: the pairs whose chosen candidate's interval against the better
    parent lies above 0. `selector_gain_pairs`: the pairs whose selector beats the better
    parent (point estimate),
    `selector_significant_gain_pairs` those whose interval lies above 0, of `selector_pairs`;
    `selector_verifier_pairs` those whose selector is the learned one."""
    pairs = {t: doc[t] for t in PARENTS if t in doc}
    gym = doc.get("GymPushT", {})
    for part in ("policies", "policies_unet"):
        if part in gym:
            pairs[f"GymPushT.{part}"] = gym[part]
    chosen = {name: row["never_worse"] for name, row in pairs.items() if "never_worse" in row}
    gaps = {name: row["vertex_gap"] for name, row in pairs.items() if "vertex_gap" in row}
    doc["never_worse"] = all(chosen.values()) if chosen else None
    doc["never_worse_pairs"] = sorted(chosen)
    doc["significant_gain_pairs"] = sorted(
        name
        for name, row in pairs.items()
        if "chosen_candidate" in row
        and row["chosen_candidate"]["minus_better_parent"]["ci95"][0] > 0
    )
    doc["vertex_gaps_contain_zero"] = (
        all(g["all_contain_zero"] for g in gaps.values()) if gaps else None
    )
    doc["vertex_gap_pairs"] = sorted(gaps)
    runs = {name: row["selector"] for name, row in pairs.items() if "selector" in row}
    versus = {name: run["minus_better_parent"] for name, run in runs.items()}
    doc["selector_pairs"] = sorted(runs)
    doc["selector_gain_pairs"] = sorted(n for n, v in versus.items() if v["difference"] > 0)
    doc["selector_significant_gain_pairs"] = sorted(n for n, v in versus.items() if v["ci_low"] > 0)
    doc["selector_verifier_pairs"] = sorted(n for n, run in runs.items() if "verifier" in run)


def selector_key(row: str | tuple[str, ...], score: str) -> tuple[str, ...]:
    """Where a selector run goes in a pair's row: the shipped score's under `selector`."""
    row = (row,) if isinstance(row, str) else row
    return (*row, "selector") if score == "agreement" else (*row, "selector_by_score", score)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", default=",".join(PARENTS), help=f"comma list of {list(PARENTS)}")
    add_parts(parser, PARTS, default=("main",))
    parser.add_argument("--fresh", type=int, default=200, help="fresh seeds per policy")
    parser.add_argument("--search", type=int, default=100, help="search seeds")
    parser.add_argument("--first-slice", type=int, default=10, help="halving's first round")
    parser.add_argument("--step", type=float, default=0.25, help="convex weight grid step")
    parser.add_argument(
        "--grid-cost-episodes",
        type=int,
        default=40,
        help="grid_cost: parent A alone vs A through the composed sampler, on this many fresh "
        "seeds",
    )
    parser.add_argument(
        "--vertex-episodes",
        type=int,
        default=100,
        help="vertex: each parent's vertex of the composition against the parent natively, "
        "paired on this many fresh seeds",
    )
    add_selector_args(parser)
    add_verifier_args(parser)
    args = parser.parse_args(argv)
    unknown = [t for t in args.tasks.split(",") if t not in PARENTS]
    if unknown:
        parser.error(f"unknown task {unknown[0]!r}; choose from {list(PARENTS)}")
    return args


def main() -> None:
    args = parse_args()
    tasks = args.tasks.split(",")
    fresh = list(range(FRESH_SEED_START, FRESH_SEED_START + args.fresh))
    search_seeds = list(range(SEARCH_SEED_START, SEARCH_SEED_START + args.search))
    for task in tasks:
        if "main" in args.parts:
            result = task_result(task, fresh, search_seeds, args.first_slice, args.step)
            RESULTS.update(lambda doc, task=task, result=result: store_task(doc, task, result))
        if "grid_cost" in args.parts:
            cost = composed_grid_cost(task, fresh[: args.grid_cost_episodes])
            RESULTS.set([f"{task}_grid_cost"], cost)
        if "grid_choice" in args.parts:
            choice = grid_choice(task, fresh, search_seeds)
            RESULTS.set([f"{task}_grid_choice"], choice)
        if "vertex" in args.parts:
            task_preset(task)
            parents, names = pair_of(task)
            gap = vertex_gap(parents, names, fresh[: args.vertex_episodes], OUT / task / "fresh")
            RESULTS.set([task, "vertex_gap"], gap)
        if "selector" in args.parts:
            parents, names = pair_of(task)
            seeds = fresh[: args.selector_episodes]
            run = selector_versus(parents, names, seeds, OUT / task / "fresh", args.selector_score)
            RESULTS.set(selector_key(task, args.selector_score), run)
        if "verifier" in args.parts:
            task_preset(task)
            parents, names = pair_of(task)
            entry = pair_verifier(
                parents,
                names,
                OUT / task / "search",
                search_seeds,
                fresh,
                OUT / task / "fresh",
                args,
            )
            RESULTS.update(lambda doc, task=task, entry=entry: store_learned(doc[task], entry))
    RESULTS.update(headlines)


if __name__ == "__main__":
    main()

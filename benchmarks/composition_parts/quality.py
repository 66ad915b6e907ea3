"""P1 quality (`--parts quality`): the search over every operator and each parent alone chooses
on the search seeds, and its choice is paired on fresh seeds against the better parent; beside
it, each operator on the search seeds, the searched convex weights and the product on the fresh
ones, and the controls for the product."""

from __future__ import annotations

import statistics

from search_replay import best_convex, best_of_both

from robocompose.compare import Comparison, compare
from robocompose.composition.api import candidate_label, compose
from robocompose.composition.weight_search import (
    KIND_COMPOSITION,
    KIND_NATIVE,
    Composed,
    NativeParent,
    SearchResult,
)
from robocompose.evaluation import evaluate
from robocompose.stats import paired_outcomes

from .shared import (
    HELDOUT_SEED_START,
    OUT,
    SEED_START,
    parents_of,
    pick_best,
    search_folder,
    task_search,
)

# the operators P1 tries on the search seeds (SuperDiff's 40 stochastic steps cost 4x an episode)
P1_OPERATORS = ("convex", "product_of_experts", "superdiff_and", "superdiff_or", "mixture")
# a third release's key: the best of three compositions judged on the fresh seeds themselves
STALE_KEYS = ("best_composed_fresh",)
CONTROL_KEYS = (
    "product_vs_sharpened_control",
    "better_parent_karras_grid",
    "sharpened_vs_karras_grid",
)


def _native_on(parents: list, names: list[str], seeds: list[int], episodes) -> Comparison:
    """The parents alone on `seeds`, read back from the files the search's native candidates
    wrote (`parent<i>_native.jsonl`: its final check ran each parent on every search seed)."""
    results = []
    for i, parent in enumerate(parents):
        label = NativeParent(i, len(parents)).label
        results.append(evaluate(parent, seeds, out=episodes / f"{label}.jsonl", label=label))
    outcomes = [[bool(r["success"]) for r in result.records] for result in results]
    return Comparison(tuple(names), tuple(results), paired_outcomes(*outcomes))


def _candidate_of(found: SearchResult, names: list[str]) -> dict:
    """The search's choice as stored: a composition (method and weights) or a parent alone."""
    choice = found.choice
    if isinstance(choice, Composed):
        return _composition_entry(choice)
    return {"kind": KIND_NATIVE, "parent": names[choice.index]}


def _composition_entry(key: Composed) -> dict:
    return {"kind": KIND_COMPOSITION, "operator": key.operator, "weights": list(key.weights)}


def quality(
    task: str,
    search_episodes: int,
    fresh_episodes: int,
    first_slice: int,
    operators: tuple[str, ...] = P1_OPERATORS,
    controls: bool = True,
) -> dict:
    """P1 the honest way: `search` as a user runs it (every searchable operator and each
    parent alone in one successive-halving pool, chunk logs kept for the verifier) chooses on
    the search seeds; its choice is then measured on fresh seeds, paired seed by seed against
    the better parent (also chosen on the search seeds). Each operator of `operators` is run
    on every search seed beside it, for the table of what each would have done."""
    parents, names = parents_of(task)
    search_seeds = list(range(SEED_START, SEED_START + search_episodes))
    fresh_seeds = list(range(HELDOUT_SEED_START, HELDOUT_SEED_START + fresh_episodes))
    folder = search_folder(task)
    found = task_search(task, parents, search_episodes, first_slice)
    print(f"{task} search over every operator:\n{found.table()}", flush=True)
    print(f"{task} search won: {found.chosen_text(names)}", flush=True)
    on_search = _native_on(parents, names, search_seeds, folder / "episodes")
    parents_search = {n: r.row() for n, r in zip(names, on_search.results, strict=True)}
    better = pick_best(parents_search)
    print(f"{task} on the search seeds:\n{on_search.table()}", flush=True)
    weights = best_convex(found)
    trials = {
        "convex": ("convex", weights),
        "product_of_experts": ("weighted_sum", (1.0, 1.0)),
        "superdiff_and": ("superdiff_and", (0.5, 0.5)),
        "superdiff_or": ("superdiff_or", (0.5, 0.5)),
        "mixture": ("mixture", weights),
    }
    composed_search = {}
    for key, (operator, w) in trials.items():
        if key not in operators:
            continue
        label = candidate_label(operator, w)
        result = evaluate(
            compose(parents, operator, w),
            search_seeds,
            out=folder / "episodes" / f"{label}.jsonl",  # the search's own file and chunk log
            chunk_log=folder / "chunks" / label,
            label=label,
            progress=False,
        )
        composed_search[key] = {"operator": operator, "weights": list(w), **result.row()}
        print(f"{task} search seeds {key}: {result.summary()}", flush=True)
    chosen_key = pick_best(composed_search)
    candidate = _candidate_of(found, names)

    sharpened = tuple(2.0 * (n == better) for n in names)
    fresh_trials = {
        "convex": trials["convex"],
        "product_of_experts": trials["product_of_experts"],
        "chosen_operator": trials[chosen_key],
    }
    if controls:
        fresh_trials["sharpened_better_parent"] = ("weighted_sum", sharpened)
    better_policy = parents[names.index(better)]
    fresh_dir = OUT / task / "fresh"
    on_fresh = compare(*parents, fresh_seeds, out_dir=fresh_dir, labels=tuple(names))
    print(f"{task} on fresh seeds:\n{on_fresh.table()}", flush=True)
    composed_fresh, paired = {}, {}
    for key, (operator, w) in fresh_trials.items():
        label = candidate_label(operator, w)
        pair = compare(
            compose(parents, operator, w),
            better_policy,
            fresh_seeds,
            out_dir=fresh_dir,
            labels=(label, better),
        )
        composed_fresh[key] = {"operator": operator, "weights": list(w), **pair.results[0].row()}
        paired[key] = pair.to_dict() | {"formatted": pair.paired.format()}
        print(f"{task} fresh {key} - {better}: {pair.paired.format()}", flush=True)
    chosen_fresh = _candidate_fresh(candidate, parents, names, better, on_fresh, fresh_dir)
    print(f"{task} fresh search choice - {better}: {chosen_fresh['formatted']}", flush=True)
    both = best_of_both(found)
    both_candidate = _composition_entry(both)
    both_fresh = _candidate_fresh(both_candidate, parents, names, better, on_fresh, fresh_dir)
    print(f"{task} fresh both parents ({both}) - {better}: {both_fresh['formatted']}", flush=True)
    skipped = {"skipped": "not rerun with the fourth version's search (--p1-no-controls)"}
    extra: dict = dict.fromkeys(CONTROL_KEYS, skipped)
    if controls:
        extra = _controls(parents, names, better, better_policy, fresh_seeds, fresh_dir, task)
    best_parent_search = parents_search[better]["success"]
    return {
        # the first release's keys, from the search seeds
        "parents": [{"checkpoint": n, **r} for n, r in parents_search.items()],
        "best": composed_search["convex"],
        "operators": composed_search,
        "delta_pts": 100 * (composed_search["convex"]["success"] - best_parent_search),
        "search": found.to_dict(),
        "search_operators": found.provenance["search"]["operators"],
        # the second release's
        "pair": names,
        "modalities": {n: "+".join(p.config.obs_keys) for n, p in zip(names, parents, strict=True)},
        "families": {n: p.config.family for n, p in zip(names, parents, strict=True)},
        "better_parent": better,
        "better_parent_search_success": best_parent_search,
        "headroom": 0.40 <= best_parent_search <= 0.85,
        "search_seeds": {"start": SEED_START, "episodes": search_episodes},
        "fresh_seeds": {"start": HELDOUT_SEED_START, "episodes": fresh_episodes},
        "complementarity_search": on_search.to_dict(),
        "chosen_operator": chosen_key,
        "fresh": {
            "parents": {n: r.row() for n, r in zip(names, on_fresh.results, strict=True)},
            "complementarity": on_fresh.to_dict(),
            "composed": composed_fresh,
            "paired_vs_better_parent": paired,
        },
        **extra,
        # the fourth release's headline: the search's own choice (its whole pool), on fresh seeds
        "chosen_candidate": {"search": candidate, "fresh": chosen_fresh},
        "delta_pts_fresh": 100 * chosen_fresh["difference"],
        "ci_above_zero": chosen_fresh["ci_low"] > 0,
        "never_worse": chosen_fresh["ci_high"] >= 0,
        # the search's best composition that weighs both parents: the gain of composing itself
        "both_parents_candidate": {"search": both_candidate, "fresh": both_fresh},
        "delta_pts_fresh_both_parents": 100 * both_fresh["difference"],
    }


def _candidate_fresh(
    candidate: dict,
    parents: list,
    names: list[str],
    better: str,
    on_fresh: Comparison,
    fresh_dir,
    tag: str = "",
) -> dict:
    """The chosen candidate on the fresh seeds, paired against the better parent: 0 on every
    seed when it is the better parent itself. `tag` prefixes a composition's episode file."""
    if candidate["kind"] == "parent_native":
        results = dict(zip(names, on_fresh.results, strict=True))
        mine = [bool(r["success"]) for r in results[candidate["parent"]].records]
        theirs = [bool(r["success"]) for r in results[better].records]
        pairing = paired_outcomes(mine, theirs)
        return {
            "row": results[candidate["parent"]].row(),
            "difference": pairing.difference,
            "ci_low": pairing.ci_low,
            "ci_high": pairing.ci_high,
            "formatted": pairing.format(),
        }
    operator, w = candidate["operator"], tuple(candidate["weights"])
    label = tag + candidate_label(operator, w)
    pair = compare(
        compose(parents, operator, w),
        parents[names.index(better)],
        [r["seed"] for r in on_fresh.results[0].records],
        out_dir=fresh_dir,
        labels=(label, better),
    )
    row = pair.to_dict()
    return {
        "row": pair.results[0].row(),
        "difference": row["difference"],
        "ci_low": row["ci_low"],
        "ci_high": row["ci_high"],
        "formatted": pair.paired.format(),
    }


def _controls(parents, names, better, better_policy, fresh_seeds, fresh_dir, task) -> dict:
    """Is the product's gain the second parent's, or only the sharper sampling of p^2 (the
    better parent alone with its score doubled)? And is that control's gain the sharper
    target, or the Karras grid it samples on? The better parent alone on that grid says."""
    product = ("weighted_sum", (1.0, 1.0))
    control = ("weighted_sum", tuple(2.0 * (n == better) for n in names))
    versus_control = compare(
        compose(parents, *product),
        compose(parents, *control),
        fresh_seeds,
        out_dir=fresh_dir,
        labels=(candidate_label(*product), candidate_label(*control)),
    )
    print(f"{task} fresh product - control: {versus_control.paired.format()}", flush=True)
    onehot = tuple(float(n == better) for n in names)
    on_karras = compose(parents, "convex", onehot, grid="karras")
    karras_label = candidate_label("convex", onehot) + "_karras"
    grid_effect = compare(
        on_karras, better_policy, fresh_seeds, out_dir=fresh_dir, labels=(karras_label, better)
    )
    sharpening_effect = compare(
        compose(parents, *control),
        on_karras,
        fresh_seeds,
        out_dir=fresh_dir,
        labels=(candidate_label(*control), karras_label),
    )
    return {
        "product_vs_sharpened_control": versus_control.to_dict()
        | {"formatted": versus_control.paired.format()},
        "better_parent_karras_grid": grid_effect.to_dict()
        | {"formatted": grid_effect.paired.format()},
        "sharpened_vs_karras_grid": sharpening_effect.to_dict()
        | {"formatted": sharpening_effect.paired.format()},
    }


def store_quality(results: dict, task: str, found: dict) -> None:
    per_task = results.setdefault("quality", {})
    kept = {k: v for k, v in per_task.get(task, {}).items() if k not in STALE_KEYS}
    per_task[task] = kept | found  # keeps the parts stored apart (vertex_gap, selector)
    rows = list(per_task.values())
    results["mean_delta_pts"] = statistics.mean(r["delta_pts"] for r in rows)
    fresh = [r for r in rows if "delta_pts_fresh" in r]
    results["mean_delta_pts_fresh"] = statistics.mean(r["delta_pts_fresh"] for r in fresh)
    results["tasks_ci_above_zero"] = sorted(
        t for t, r in per_task.items() if r.get("ci_above_zero")
    )
    both = [r["delta_pts_fresh_both_parents"] for r in rows if "delta_pts_fresh_both_parents" in r]
    if both:
        results["mean_delta_pts_fresh_both_parents"] = statistics.mean(both)
    chosen = [r for r in rows if "never_worse" in r]
    if chosen:
        results["never_worse"] = all(r["never_worse"] for r in chosen)
        results["never_worse_tasks"] = sorted(t for t, r in per_task.items() if "never_worse" in r)

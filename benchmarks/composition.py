"""Composition figures, each measured in one run of this script.

P1 quality, per task: the task's shipped parent pair (robocompose.shipped: chosen with headroom,
    the better parent between 40% and 85%). Everything is chosen on the search seeds: `search`
    as a user runs it (every searchable operator's candidates, so the convex simplex grid, the
    product of experts and each parent sharpened, and each parent alone, in one successive-
    halving pool, its winner checked against both parents on every seed; chunk logs kept for
    the verifier) picks the candidate, and the better parent is picked there too. Beside it each
    operator runs on every search seed (the search's best convex weights, product of experts
    w = (1, 1), SuperDiff AND and OR, mixture at those weights). Then on fresh seeds (>= 200):
    the parents with their complementarity (only A succeeds, only B, both, neither), the
    search's choice, the searched convex, the product and the control for the product (the
    better parent alone with its score doubled, w = (2, 0): p^2, as sharp as the product; and
    the better parent alone on the control's Karras grid, which separates the control's two
    changes), each paired seed by seed against the better parent: the difference with
    Newcombe's paired 95% interval. Headlines: `mean_delta_pts_fresh` (the search's choice
    minus the better parent on fresh seeds, mean over tasks), `tasks_ci_above_zero`;
    `mean_delta_pts` is the convex gain on the search seeds (biased up: the weights were picked
    there).
P2 latency, per task pair: composed (K=2) chunk latency / the slower parent's, batch 1 and 16, 10
    steps, each at its best torch thread count (1 or 2, recorded), medians of calls timed in
    turn (parents and composition alternate, so contention hits all alike). The headline
    `latency_ratio` is the worst pair at batch 1. A diffusion parent's native sampler is diffusers'
    DDIMScheduler, whose Python per step costs as much as an MLP forward, so each parent is also
    timed alone through the composed sampler's own path (its Denoiser prepared for its grid,
    Euler on it; and its backbone in the stacked form a fused pair runs, whichever is faster):
    `ratio_vs_slower_parent_same_sampler` is the composition's cost on equal footing, and
    `latency_ratio_same_sampler` its worst task at batch 1 or 16. `per_parent` has each parent's
    ms per chunk (native and same-sampler, image parents included) and the setting of each.
    Against the floor (`ratio_to_floor`, headline `latency_ratio_to_floor`, the worst task at
    batch 1 or 16): the floor is what a composed chunk cannot do without in its execution mode
    (eager): the parents' observation encoders, their networks as the composition runs them
    (its stacked groups, conditioning for every step in one call) and an Euler update, timed in
    the same rounds as the composition; the load average is recorded with each batch.
P1 stores the search's choice as `chosen_candidate` (a tie goes to the parent), with its fresh
    pairing; `never_worse` (per task and headline): that interval's upper bound is >= 0.
Vertex gap (`--parts vertex`, per task `vertex_gap`): each parent's vertex of the convex
    composition against the parent on its own sampler, paired on fresh seeds, and the path a
    vertex ran on before (the pair's grid) where that grid is the other parent's.
Verifier (`--parts verifier`, per task `selector`, composition_parts/verifier.py): the selector
    by a chunk verifier trained on P1's search's rollouts (every searchable operator in its
    pool), refined by `--verifier-rounds` rounds of its own episodes on seeds of their own, then
    on the fresh seeds against the better parent, the oracle and the composition it draws
    from (the composed candidate runs unless the verifier rates another `--selector-margin`
    higher; a run at another margin moves to `selector_by_margin`); headlines
    `oracle_gap_half_tasks` and `selector_verifier_mean_delta_pts`.
Headlines (`--parts headlines`, and at the end of every run; no episode): each learned
    selector takes its verifier's AUC on the task's counterfactual labels
    (`selector.verifier_auc_counterfactual`, from counterfactual.json when that very verifier
    file scored them: benchmarks/counterfactual.py --verifier), and the verifier's headlines
    are recomputed.
Selector cost (`--parts selector_latency`, `selector_latency.<task>`): its ms per chunk over
    the floor's at batch 1 and 16, by `agreement` and by the task's verifier, with 1, 2, 4, 8
    native samples per parent.
Selector (`--parts selector`, per task `selector`, or `selector_by_score` once the verifier's
    selector is stored): how each of its scores ranks (the executed
    chunk's rank among the candidates, successful vs failed native episodes: AUC, 0.5 is
    chance), then the selector on fresh seeds against the better parent and the per-seed oracle
    (`oracle_gap_closed` = (selector - better) / (oracle - better); headline: mean over tasks).
P3 search cost, per task: the full grid (11 weights x N seeds) against successive halving
    replayed over random orders of the same seed list (every episode is cached, so the replays
    are free): mean episodes halving spends / grid episodes, and how often it lands within 2
    points of what the full grid returns (both by the never-worse rule, so a parent unless a
    composition beats it beyond chance). The headline `search_cost_ratio` is the mean over
    tasks.
P4 search on the 2-simplex (`search_k3`): Stack with three parents (K3_PARENTS, one action
    normaliser), the full grid at step 0.1 (66 weights x N seeds); then, replayed over random
    orders of those seeds from the cached episodes, the grid on fewer seeds, successive halving,
    racing (a candidate leaves once its paired interval against the leader lies below 0) and
    racing with the target's tolerance (below +2 points), each at several budgets: mean
    episodes, the fraction of replays landing within 2 points of the grid optimum, and the
    cheapest budget landing so in >= 90% of replays. Also the best vertex (one parent), the best
    point with at most two parents and the best interior point, again on fresh seeds: does the
    third parent add anything?

Episodes are written under runs/benchmarks/composition/ as they finish; a rerun resumes.

    python benchmarks/composition.py [--parts quality,latency] [--tasks PushT,...]
        [--fresh-episodes 200]

`--parts all` (the default) runs every part but `selector` and `verifier`, which run only when
named.
"""

from __future__ import annotations

import argparse
import statistics

from common import add_parts
from composition_parts.latency import latency, same_sampler_headline
from composition_parts.quality import P1_OPERATORS, quality, store_quality
from composition_parts.search import search_cost, search_k3
from composition_parts.selector import (
    add_selector_args,
    selector_run,
    selector_scores,
    store_selector,
)
from composition_parts.selector_latency import selector_latency
from composition_parts.shared import HELDOUT_SEED_START, OUT, RESULTS, parents_of, record_task
from composition_parts.verifier import (
    add_verifier_args,
    store_verifier_selector,
    verifier_headlines,
    verifier_selector,
)
from composition_parts.vertex import store_vertex_gap, vertex_gap

from robocompose.shipped import PARENT_PAIRS

PARTS = (
    "quality",
    "latency",
    "search",
    "k3",
    "vertex",
    "selector",
    "verifier",
    "selector_latency",
    "headlines",
)
ONLY_WHEN_NAMED = ("selector", "verifier")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    add_parts(parser, PARTS, default=[p for p in PARTS if p not in ONLY_WHEN_NAMED])
    add_selector_args(parser)
    parser.add_argument("--vertex-episodes", type=int, default=100, help="vertex gap seeds")
    parser.add_argument("--tasks", default=",".join(PARENT_PAIRS))
    parser.add_argument("--p1-search-episodes", type=int, default=100, help="P1 search seeds")
    parser.add_argument("--fresh-episodes", type=int, default=200, help="P1 fresh seeds")
    parser.add_argument("--p1-first-slice", type=int, default=12, help="P1 halving first slice")
    parser.add_argument(
        "--p1-operators", default=",".join(P1_OPERATORS), help="P1 operators (convex always)"
    )
    parser.add_argument(
        "--p1-no-controls",
        action="store_true",
        help="P1 without the sharpened-parent and Karras-grid controls",
    )
    parser.add_argument("--first-slice", type=int, default=25, help="P3 halving first slice")
    parser.add_argument("--search-episodes", type=int, default=200, help="P3 grid seeds")
    parser.add_argument("--replays", type=int, default=50)
    parser.add_argument("--k3-episodes", type=int, default=64, help="P4 grid seeds")
    parser.add_argument("--k3-fresh-episodes", type=int, default=100, help="P4 fresh seeds")
    parser.add_argument("--repeats", type=int, default=50)
    add_verifier_args(parser)
    args = parser.parse_args()
    tasks = args.tasks.split(",")
    for task in tasks if "latency" in args.parts else ():
        record_task(
            "latency",
            task,
            latency(task, args.repeats),
            "latency_ratio",
            lambda rows: max(r["batch1"]["ratio_vs_slower_parent"] for r in rows),
        )
        RESULTS.update(same_sampler_headline)
    for task in tasks if "vertex" in args.parts else ():
        parents, names = parents_of(task)
        seeds = list(range(HELDOUT_SEED_START, HELDOUT_SEED_START + args.vertex_episodes))
        gap = vertex_gap(parents, names, seeds, OUT / task / "fresh")
        RESULTS.update(lambda results, task=task, gap=gap: store_vertex_gap(results, task, gap))
    for task in tasks if "selector" in args.parts else ():
        scores = selector_scores(task, args.selector_episodes)
        run = selector_run(task, args.selector_episodes, args.selector_score)
        RESULTS.update(
            lambda results, task=task, run=run, scores=scores: store_selector(
                results, task, run | {"score_ranking": scores}, args.selector_score
            )
        )
    for task in tasks if "verifier" in args.parts else ():
        entry = verifier_selector(
            task,
            args.p1_search_episodes,
            args.verifier_rounds,
            args.round_episodes,
            args.fresh_episodes,
            args.p1_first_slice,
            args.verifier_std_weight,
            args.selector_margin,
        )
        RESULTS.update(
            lambda results, task=task, entry=entry: store_verifier_selector(results, task, entry)
        )
    for task in tasks if "selector_latency" in args.parts else ():
        found = selector_latency(task, args.repeats)
        RESULTS.update(
            lambda results, task=task, found=found: results.setdefault(
                "selector_latency", {}
            ).__setitem__(task, found)
        )
    for task in tasks if "search" in args.parts else ():
        record_task(
            "search_cost",
            task,
            search_cost(task, args.search_episodes, args.first_slice, args.replays),
            "search_cost_ratio",
            lambda rows: statistics.mean(r["search_cost_ratio"] for r in rows),
        )
    if "k3" in args.parts:
        found = search_k3(args.k3_episodes, args.replays, args.k3_fresh_episodes)
        RESULTS.update(lambda results: results.__setitem__("search_k3", found))
    for task in tasks if "quality" in args.parts else ():
        operators = ("convex", *args.p1_operators.split(","))
        found = quality(
            task,
            args.p1_search_episodes,
            args.fresh_episodes,
            args.p1_first_slice,
            operators,
            controls=not args.p1_no_controls,
        )
        RESULTS.update(lambda results, task=task, found=found: store_quality(results, task, found))
    RESULTS.update(verifier_headlines)  # every run: counterfactual.json may have changed since


if __name__ == "__main__":
    main()

"""Composition figures, each measured in one run of this script.

P1 quality, per task: the task's shipped parent pair (robocompose.shipped: chosen with headroom,
    the better parent between 40% and 85%). Everything is chosen on the search seeds: the better
    parent, the convex (GPC) weights by successive halving, and the operator (searched convex,
    product of experts w = (1, 1), SuperDiff AND and OR, mixture at the searched weights). Then
    on fresh seeds (>= 200): the parents with their complementarity (only A succeeds, only B,
    both, neither), and the searched convex, the product, the chosen operator and the control
    for the product (the better parent alone with its score doubled, w = (2, 0): p^2, as sharp
    as the product; and the better parent alone on the control's Karras grid, which separates
    the control's two changes), each paired seed by seed against the better parent: the
    difference with Newcombe's paired 95% interval. Headlines: `mean_delta_pts_fresh` (best
    composed minus better parent on fresh seeds, mean over tasks), `tasks_ci_above_zero`;
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
P1 also records the candidate the search's rule picks over every parent alone and every
    composition tried (`chosen_candidate`, a tie going to the parent), paired against the better
    parent on the fresh seeds; `never_worse` (per task and headline): its interval's upper bound
    is >= 0.
Vertex gap (`--parts vertex`, per task `vertex_gap`): each parent's vertex of the convex
    composition against the parent on its own sampler, paired on fresh seeds, and the path a
    vertex ran on before (the pair's grid) where that grid is the other parent's.
Selector (`--parts selector`, per task `selector`): how each of its scores ranks (the executed
    chunk's rank among the candidates, successful vs failed native episodes: AUC, 0.5 is
    chance), then the selector on fresh seeds against the better parent and the per-seed oracle
    (`oracle_gap_closed` = (selector - better) / (oracle - better); headline: mean over tasks).
P3 search cost, per task: the full grid (11 weights x N seeds) against successive halving
    replayed over random orders of the same seed list (every episode is cached, so the replays
    are free): mean episodes halving spends / grid episodes, and how often it lands within 2
    points of the grid optimum. The headline `search_cost_ratio` is the mean over tasks.
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

`--parts all` (the default) runs every part but `selector`, which runs only when named.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from collections.abc import Callable
from functools import partial

import torch
from common import ROOT, RUNS_DIR, ResultsFile, add_parts, resume_records
from policy_latency import random_obs
from search_replay import (
    cheapest_reliable,
    convex_episodes,
    episode_cache,
    grid_on_first,
    replay,
    seed_orders,
)

from robocompose.compare import Comparison, compare
from robocompose.composition.api import candidate_label, compose, search
from robocompose.composition.builtin_methods import SELECTOR_CANDIDATES, SelectorMethod
from robocompose.composition.composed_policy import ComposedPolicy
from robocompose.composition.fused import (
    StackedDenoiser,
    StackedNetwork,
    fusable,
    stack_networks,
)
from robocompose.composition.samplers import sample_euler
from robocompose.composition.search_plot import plot_search
from robocompose.composition.selector import SCORES, candidates
from robocompose.composition.weight_search import NativeParent, racing, successive_halving
from robocompose.evaluation import evaluate
from robocompose.policies.checkpoint import load_policy
from robocompose.shipped import PARENT_PAIRS, parent_pair
from robocompose.stats import paired_outcomes

OUT = RUNS_DIR / "composition"
SEED_START = 100_000
# the operators P1 tries on the search seeds (SuperDiff's 40 stochastic steps cost 4x an episode)
P1_OPERATORS = ("convex", "product_of_experts", "superdiff_and", "superdiff_or", "mixture")
HELDOUT_SEED_START = 300_000  # fresh seeds: the searched weights were picked on SEED_START's
RESULTS = ResultsFile("composition.json", writer="composition.py")
PARTS = ("quality", "latency", "search", "k3", "vertex", "selector")
CONTROL_KEYS = (
    "product_vs_sharpened_control",
    "better_parent_karras_grid",
    "sharpened_vs_karras_grid",
)


def _record(part: str, task: str, value: dict, headline: str, summarise) -> None:
    """Store one task's `value` under `part` and recompute the headline over every task."""

    def change(results: dict) -> None:
        per_task = results.setdefault(part, {})
        per_task[task] = value
        results[headline] = summarise(per_task.values())

    RESULTS.update(change)


def parents_of(task: str) -> tuple[list, list[str]]:
    paths = parent_pair(task)
    return [load_policy(p) for p in paths], [p.name for p in paths]


def _pick(rows: dict[str, dict]) -> str:
    """The key of the best row: success first, mean score to break ties."""
    return max(rows, key=lambda k: (rows[k]["success"], rows[k]["mean_score"]))


def _native_on(parents: list, names: list[str], seeds: list[int], episodes) -> Comparison:
    """The parents alone on `seeds`, logged in the files the search's native candidates use
    (`parent<i>_native.jsonl`), so the search reuses every one of these episodes."""
    results = []
    for i, parent in enumerate(parents):
        label = NativeParent(i, len(parents)).label
        results.append(evaluate(parent, seeds, out=episodes / f"{label}.jsonl", label=label))
    outcomes = [[bool(r["success"]) for r in result.records] for result in results]
    return Comparison(tuple(names), tuple(results), paired_outcomes(*outcomes))


def _chosen_candidate(
    names: list[str], parents_search: dict[str, dict], composed_search: dict[str, dict]
) -> tuple[str, dict]:
    """The candidate with the best success on the search seeds (mean score breaks ties), each
    parent alone listed first so that a tie goes to it: the search's rule, over the operators
    too."""
    rows = {
        f"native:{n}": {"kind": "parent_native", "parent": n, **parents_search[n]} for n in names
    }
    rows |= {k: {"kind": "composition", **r} for k, r in composed_search.items()}
    key = max(rows, key=lambda k: (rows[k]["success"], rows[k]["mean_score"]))
    return key, rows[key]


def quality(
    task: str,
    search_episodes: int,
    fresh_episodes: int,
    first_slice: int,
    operators: tuple[str, ...] = P1_OPERATORS,
    controls: bool = True,
) -> dict:
    """P1 the honest way: everything is chosen on the search seeds (the better parent, the
    convex weights, the operator, and the candidate: a parent alone or a composition), then
    measured on fresh seeds, each composition paired seed by seed against the better parent."""
    parents, names = parents_of(task)
    search_seeds = list(range(SEED_START, SEED_START + search_episodes))
    fresh_seeds = list(range(HELDOUT_SEED_START, HELDOUT_SEED_START + fresh_episodes))
    folder = OUT / task
    on_search = _native_on(parents, names, search_seeds, folder / "search" / "episodes")
    parents_search = {n: r.row() for n, r in zip(names, on_search.results, strict=True)}
    better = _pick(parents_search)
    print(f"{task} on the search seeds:\n{on_search.table()}", flush=True)

    found = search(parents, search_seeds, out_dir=folder / "search", first_slice=first_slice)
    print(f"{task} convex search:\n{found.table()}", flush=True)
    print(f"{task} search won: {found.chosen_text(names)}", flush=True)
    weights = tuple(found.best_composition)  # the convex trial: a composition, even where a
    # parent alone won (the chosen candidate below weighs the parents)
    rows_for_plot = [dict(r, label=n) for n, r in parents_search.items()]
    plot_search(found, folder / "search" / "search.png", rows_for_plot, task)
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
        out = folder / "search" / "episodes" / f"{label}.jsonl"  # the search's own file
        result = evaluate(compose(parents, operator, w), search_seeds, out=out, label=label)
        composed_search[key] = {"operator": operator, "weights": list(w), **result.row()}
        print(f"{task} search seeds {key}: {result.summary()}", flush=True)
    chosen_key = _pick(composed_search)
    candidate_key, candidate = _chosen_candidate(names, parents_search, composed_search)
    print(f"{task} chosen candidate on the search seeds: {candidate_key}", flush=True)

    sharpened = tuple(2.0 * (n == better) for n in names)
    fresh_trials = {
        "convex": trials["convex"],
        "product_of_experts": trials["product_of_experts"],
        "chosen_operator": trials[chosen_key],
    }
    if controls:
        fresh_trials["sharpened_better_parent"] = ("weighted_sum", sharpened)
    better_policy = parents[names.index(better)]
    fresh_dir = folder / "fresh"
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
    print(f"{task} fresh chosen candidate - {better}: {chosen_fresh['formatted']}", flush=True)
    skipped = {"skipped": "not rerun with the third version's candidates (--p1-no-controls)"}
    extra: dict = dict.fromkeys(CONTROL_KEYS, skipped)
    if controls:
        extra = _controls(parents, names, better, better_policy, fresh_seeds, fresh_dir, task)
    gains = {
        k: paired[k]["difference"] for k in ("convex", "product_of_experts", "chosen_operator")
    }
    best_key = max(gains, key=gains.get)
    best_parent_search = parents_search[better]["success"]
    return {
        # the first release's keys, from the search seeds
        "parents": [{"checkpoint": n, **r} for n, r in parents_search.items()],
        "best": composed_search["convex"],
        "operators": composed_search,
        "delta_pts": 100 * (composed_search["convex"]["success"] - best_parent_search),
        "search": found.to_dict(),
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
        "best_composed_fresh": best_key,
        **extra,
        "delta_pts_fresh": 100 * gains[best_key],
        "ci_above_zero": paired[best_key]["ci_low"] > 0,
        # the third release's: the candidate the search's rule picks, a parent alone included
        "chosen_candidate": {"key": candidate_key, "search": candidate, "fresh": chosen_fresh},
        "never_worse": chosen_fresh["ci_high"] >= 0,
    }


def _candidate_fresh(
    candidate: dict,
    parents: list,
    names: list[str],
    better: str,
    on_fresh: Comparison,
    fresh_dir,
) -> dict:
    """The chosen candidate on the fresh seeds, paired against the better parent: 0 on every
    seed when it is the better parent itself."""
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
    label = candidate_label(operator, w)
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


def paired_entry(comparison) -> dict:
    """A paired comparison as stored: the two rows, the discordant counts, the difference with
    its 95% interval, and whether that interval holds 0."""
    row = comparison.to_dict()
    return row | {
        "formatted": comparison.paired.format(),
        "contains_zero": row["ci_low"] <= 0 <= row["ci_high"],
    }


def vertex_gap(parents: list, names: list[str], seeds: list[int], out_dir, tag: str = "") -> dict:
    """Per parent: the composition at its vertex (weights one-hot, convex) against the parent
    on its own sampler, paired on `seeds`. A vertex now samples on that parent's own grid
    (`ComposedDenoiser.sigmas` weighs only the parents with a coefficient); `former_path` is
    how it ran before, on the grid the pair composes on inside the simplex, measured where
    that grid is another parent's. `tag` prefixes the compositions' episode files (for a
    folder that several pairs share)."""
    steps = compose(parents, "convex", (0.5, 0.5)).steps
    grids = [p.denoiser_for(None).sigmas(steps) for p in parents]
    inside = compose(parents, "convex", (0.5,) * len(parents)).resolved_sigmas()
    shared = grids.index(inside) if inside in grids else None
    out = {"seeds": {"start": seeds[0], "episodes": len(seeds)}, "pair_grid_of": None}
    if shared is not None:
        out["pair_grid_of"] = names[shared]
    for i, (name, parent) in enumerate(zip(names, parents, strict=True)):
        onehot = tuple(float(k == i) for k in range(len(parents)))
        vertex = compose(parents, "convex", onehot)
        label = tag + candidate_label("convex", onehot)
        pair = compare(vertex, parent, seeds, out_dir=out_dir, labels=(label, name))
        row = {"grid": "own" if vertex.resolved_sigmas() == grids[i] else "other"}
        row["composed_minus_native"] = paired_entry(pair)
        print(f"vertex {label} - {name}: {pair.paired.format()}", flush=True)
        if shared is not None and shared != i:
            former = compose(parents, "convex", onehot, grid=f"parent{shared}")
            former_label = f"{label}_grid_parent{shared}"
            before = compare(former, parent, seeds, out_dir=out_dir, labels=(former_label, name))
            row["former_path_minus_native"] = paired_entry(before)
            print(f"vertex {former_label} - {name}: {before.paired.format()}", flush=True)
        out[name] = row
    out["all_contain_zero"] = all(out[n]["composed_minus_native"]["contains_zero"] for n in names)
    return out


@torch.no_grad()
def _euler(parent, obs, noise, stacked: StackedNetwork | None = None) -> torch.Tensor:
    """One parent alone, sampled the way a composition samples: its Denoiser, prepared for
    its own grid, Euler on it; with `stacked`, its backbone in the stacked form a fused
    composition runs (K = 1), so the parent gets every speed-up the composition gets."""
    cond = parent.encode(obs)
    denoiser = parent.denoiser_for(cond)
    if stacked is not None:
        denoiser = StackedDenoiser(denoiser, stacked, cond)
    sigmas = denoiser.sigmas(10)
    denoiser.prepare(sigmas)
    return sample_euler(denoiser, noise, sigmas)


@torch.no_grad()
def floor_chunk(
    parents: list,
    views: list[dict],
    noise: torch.Tensor,
    stacks: list | None,
    steps: int = 10,
) -> list[torch.Tensor]:
    """The floor of a composed chunk in its execution mode (eager): the parents' networks as the
    composition runs them (`stacks`: its stacked groups, each group's conditioning for every
    step in one call; else each parent's own network) plus the sampler's update, nothing else
    (no adapter, operator, grid or scheduler). Each group integrates its chunk by Euler."""
    conds = [p.encode(v) for p, v in zip(parents, views, strict=True)]
    levels = torch.linspace(1.0, 0.0, steps + 1)
    groups = [group for group, _ in stacks] if stacks else [[i] for i in range(len(parents))]
    units = []
    for j, group in enumerate(groups):
        horizon = parents[group[0]].config.horizon
        x = noise[:, :horizon].expand(len(group), *noise[:, :horizon].shape).clone()
        if stacks:
            net = stacks[j][1]
            b = x.shape[1]
            table = (100.0 * levels[:-1]).to(x.dtype)[None, :].repeat_interleave(b, 1)
            cond = torch.stack([conds[i] for i in group])
            table = table.expand(len(group), -1)
            prepared = net.conditioning(table, cond.repeat(1, steps, 1))
            per_step = prepared.unflatten(1, (steps, b)).unbind(1)
            units.append((lambda x, k, n=net, c=per_step: n.forward_conditioned(x, c[k]), x))
        else:
            parent, cond = parents[group[0]], conds[group[0]]

            def own(x, k, p=parent, c=cond):
                t = torch.full((x.shape[1],), 100.0 * float(levels[k]), dtype=x.dtype)
                return p.net(x[0], t, c)[None]

            units.append((own, x))
    for k in range(steps):
        dt = float(levels[k + 1] - levels[k])
        for network, x in units:
            x.add_(network(x, k), alpha=dt)
    return [x for _, x in units]


def _interleaved_ms(
    calls: dict[str, Callable[[], object]], repeats: int, warmup: int = 3
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall ms and process CPU ms of each call in every round, the calls timed in turn within a
    round (the machine is shared: a burst of contention hits every call of that round, not one
    variant's whole series). CPU time leaves out the time other jobs held the core, so on
    one thread it is the steadier estimate; with several threads it sums them."""
    for call in calls.values():
        for _ in range(warmup):
            call()
    wall: dict[str, list[float]] = {key: [] for key in calls}
    cpu: dict[str, list[float]] = {key: [] for key in calls}
    for _ in range(repeats):
        for key, call in calls.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            call()
            cpu[key].append(1e3 * (time.process_time() - start_cpu))
            wall[key].append(1e3 * (time.perf_counter() - start))
    return wall, cpu


def _medians(rows: dict[str, list[float]]) -> dict[str, float]:
    return {key: statistics.median(ms) for key, ms in rows.items()}


def _paired_ratio(rows: dict[str, list[float]], composed: str, parents: list[str]) -> float:
    """Median over rounds of the composition's time over the slower parent's in that round:
    the two were timed seconds apart, under the same contention."""
    return statistics.median(
        c / max(ms) for c, *ms in zip(rows[composed], *(rows[p] for p in parents), strict=True)
    )


def _best(ms_by_setting: dict[str, float]) -> tuple[str, float]:
    key = min(ms_by_setting, key=ms_by_setting.get)
    return key, ms_by_setting[key]


@torch.no_grad()
def _stacked_network_ratio(parents: list, batch: int, repeats: int) -> float:
    """One-thread CPU time of the parents' stacked network over one parent's stack (K = 1),
    the network alone at one prepared step: the floor of a fused pair's ratio on one core."""
    nets = [p.net for p in parents]
    config = parents[0].config
    x = torch.randn(len(nets), batch, config.horizon, config.action_dim)
    t = torch.full((len(nets), batch), 50.0)
    conds = torch.randn(len(nets), batch, nets[0].global_cond_dim)
    calls = {}
    for key, k in (("all", len(nets)), ("one", 1)):
        stacked = stack_networks(nets[:k]).eval()
        conditioning = stacked.conditioning(t[:k], conds[:k])
        calls[key] = partial(stacked.forward_conditioned, x[:k], conditioning)
    cpu = _medians(_interleaved_ms(calls, repeats)[1])
    return cpu["all"] / cpu["one"]


def latency(task: str, repeats: int) -> dict:
    """Per batch size: each parent alone (native sampler; the composed sampler's path, on its
    own network and on the one-parent stacked one) and the composition (serial, parallel),
    all timed in one interleaved loop per torch thread count; each figure at its best thread
    count, which is recorded."""
    parents, names = parents_of(task)
    stacks = [stack_networks([p.net]).eval() if fusable([p]) else None for p in parents]
    composed = {"serial": compose(parents, "convex", (0.5, 0.5))}
    if composed["serial"].fused is None:  # a fused pair runs one network: nothing to thread
        composed["parallel"] = compose(parents, "convex", (0.5, 0.5), parallel=True)
    out = {}
    for batch in (1, 16):
        obs: dict[str, torch.Tensor] = {}
        for parent in parents:
            obs |= random_obs(parent, batch)
        noise = torch.randn(batch, *composed["serial"].noise_shape)
        calls: dict[str, Callable[[], object]] = {}
        for name, parent, stacked in zip(names, parents, stacks, strict=True):
            view = ComposedPolicy.parent_view(parent, obs)
            own = noise[:, : parent.config.horizon]
            calls[f"{name}|native"] = lambda p=parent, o=view, n=own: p.sample(o, 10, n)
            calls[f"{name}|same_sampler"] = lambda p=parent, o=view, n=own: _euler(p, o, n)
            if stacked is not None:
                calls[f"{name}|same_sampler_stacked"] = partial(_euler, parent, view, own, stacked)
        for mode, policy in composed.items():
            calls[f"composed|{mode}"] = lambda p=policy, o=obs, n=noise: p.predict_actions(o, n)
        views = [ComposedPolicy.parent_view(p, obs) for p in parents]
        groups = composed["serial"].stacks
        calls["floor|eager"] = partial(floor_chunk, parents, views, noise, groups)
        rounds = repeats if batch == 1 else max(3, repeats // 2)
        torch.set_num_threads(1)
        wall, cpu = _interleaved_ms(calls, rounds)
        floor = None
        if composed["serial"].fused is not None:
            floor = _stacked_network_ratio(parents, batch, 4 * rounds)
        by_threads = {1: _medians(wall)}
        torch.set_num_threads(2)
        probe_key = f"{names[0]}|same_sampler"
        probe = _interleaved_ms({probe_key: calls[probe_key]}, 1, warmup=1)[0][probe_key][0]
        if probe < 1.5 * by_threads[1][probe_key]:
            by_threads[2] = _medians(_interleaved_ms(calls, rounds)[0])
        else:  # other jobs hold the cores: every op's thread barrier waits on a descheduled one
            print(f"latency batch {batch}: 2 threads skipped ({probe:.0f} ms probe)", flush=True)
        settings = {  # call -> {"threads1": ms, "threads2": ms}
            key: {f"threads{t}": by_threads[t][key] for t in by_threads} for key in calls
        }
        per_parent = {}
        for name in names:
            native_at, native = _best(settings[f"{name}|native"])
            paths = {"own": settings[f"{name}|same_sampler"]}
            if f"{name}|same_sampler_stacked" in settings:
                paths["stacked"] = settings[f"{name}|same_sampler_stacked"]
            same = {f"{path}_{t}": ms for path, row in paths.items() for t, ms in row.items()}
            same_at, same_ms = _best(same)
            per_parent[name] = {
                "native_ms": native,
                "native_setting": native_at,
                "same_sampler_ms": same_ms,
                "same_sampler_setting": same_at,  # path (own network or stacked) and threads
                "all_ms": {
                    key.split("|")[1]: row
                    for key, row in settings.items()
                    if key.split("|")[0] == name
                },
            }
        composed_ms = {
            f"{t}_{mode}": ms for mode in composed for t, ms in settings[f"composed|{mode}"].items()
        }
        cpu_ms = _medians(cpu)
        paths1 = [  # each parent's faster same-sampler call on one thread
            min((key for key in calls if key.startswith(f"{name}|same_sampler")), key=cpu_ms.get)
            for name in names
        ]
        best_key, best_ms = _best(composed_ms)
        # the composition against the floor in its own execution mode (eager) and thread count
        best_threads = int(best_key.split("_")[0].removeprefix("threads"))
        floor_ms = settings["floor|eager"]
        single = {name: row["native_ms"] for name, row in per_parent.items()}
        same_sampler = {name: row["same_sampler_ms"] for name, row in per_parent.items()}
        out[f"batch{batch}"] = {
            "fused": composed["serial"].fused is not None,
            "threads_timed": sorted(by_threads),
            "rounds": rounds,
            "threads2_probe_ms": {probe_key: probe},
            "per_parent": per_parent,
            "single_ms": single,
            "single_same_sampler_ms": same_sampler,
            "composed_ms": composed_ms,
            "best_composed": best_key,
            "ratio_vs_slower_parent": best_ms / max(single.values()),
            "ratio_vs_slower_parent_same_sampler": best_ms / max(same_sampler.values()),
            "ratio_vs_sum_of_parents": best_ms / sum(single.values()),
            "ratio_vs_sum_of_parents_same_sampler": best_ms / sum(same_sampler.values()),
            # on one thread, the serial composition against each parent's faster same-sampler
            # path there: per-round ratios (wall), and medians of CPU ms
            "ratio_same_sampler_paired_threads1": _paired_ratio(wall, "composed|serial", paths1),
            "cpu_ms_threads1": cpu_ms,
            "stacked_network_ratio_cpu": floor,  # fused pairs: K parents' network over one's
            "ratio_vs_slower_parent_same_sampler_cpu": cpu_ms["composed|serial"]
            / max(cpu_ms[key] for key in paths1),
            # the floor: both parents' networks and the sampler, eager, timed in the same rounds
            "floor_ms": floor_ms,
            "ratio_to_floor": best_ms / floor_ms[f"threads{best_threads}"],
            "ratio_to_floor_paired_threads1": _paired_ratio(
                wall, "composed|serial", ["floor|eager"]
            ),
            "ratio_to_floor_cpu_threads1": cpu_ms["composed|serial"] / cpu_ms["floor|eager"],
            "load_average": list(os.getloadavg()),
        }
        print(f"latency batch {batch}: {json.dumps(out[f'batch{batch}'])}", flush=True)
    torch.set_num_threads(2)
    return out


def _same_sampler_headline(results: dict) -> None:
    """`latency_ratio_same_sampler`: the equal-footing ratio of the worst task, batch 1 or 16;
    `_cpu`: the same from one-thread CPU time, which other jobs on the machine disturb less."""
    for suffix in ("", "_cpu"):
        results[f"latency_ratio_same_sampler{suffix}"] = max(
            row[batch][f"ratio_vs_slower_parent_same_sampler{suffix}"]
            for row in results["latency"].values()
            for batch in ("batch1", "batch16")
        )
    floors = [
        row[batch]["ratio_to_floor"]
        for row in results["latency"].values()
        for batch in ("batch1", "batch16")
        if "ratio_to_floor" in row[batch]
    ]
    if floors:
        results["latency_ratio_to_floor"] = max(floors)


def search_cost(task: str, episodes: int, first_slice: int, replays: int) -> dict:
    parents, _ = parents_of(task)
    seeds = list(range(SEED_START, SEED_START + episodes))
    folder = OUT / task
    grid = search(parents, seeds, out_dir=folder, method="grid")
    rate = {c.key: c.rate for c in grid.candidates}
    optimum = max(rate.values())
    keys = [c.key for c in grid.candidates]  # each parent alone first, then the weights
    cache = episode_cache(
        parents, [k for k in keys if not isinstance(k, NativeParent)], seeds, folder
    )
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
        hits += 100 * (optimum - rate[found.choice]) <= 2.0
    return {
        "task": task,
        "grid_episodes": grid.episodes_spent,
        "grid_optimum": optimum,
        "grid_chosen": list(grid.chosen),
        "grid_chosen_kind": grid.chosen_kind,
        "candidates": "each parent alone (native sampler) and the 11 convex weights",
        "grid_table": grid.table(),
        "halving_first_slice": first_slice,
        "replays": replays,
        "search_cost_ratio": statistics.mean(ratios),
        "within_2pts_fraction": hits / replays,
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
    parents = [load_policy(ROOT / "checkpoints" / name) for name in K3_PARENTS]
    seeds = list(range(SEED_START, SEED_START + episodes))
    folder = OUT / "Stack_k3"
    grid = search(parents, seeds, out_dir=folder, method="grid", step=0.1)
    print(f"K=3 grid:\n{grid.table()}", flush=True)
    cache = episode_cache(parents, [c.weights for c in grid.candidates], seeds, folder)
    orders = seed_orders(seeds, replays)
    methods = {}
    for method, settings in _k3_methods(episodes).items():
        methods[method] = {key: replay(run, cache, orders) for key, run in settings.items()}
        methods[method + "_cheapest_90pct"] = cheapest_reliable(methods[method])
        print(f"K=3 {method}: {json.dumps(methods[method])}", flush=True)

    regions = _regions(grid.candidates)
    outcome = {w: [bool(cache[w][s]["success"]) for s in seeds] for w in regions.values()}
    fresh_seeds = list(range(HELDOUT_SEED_START, HELDOUT_SEED_START + fresh_episodes))
    fresh = {}
    for w in set(regions.values()):
        fresh[w] = convex_episodes(parents, w, fresh_seeds, folder / "fresh")
        print(f"K=3 fresh {candidate_label('convex', w)}: {fresh[w].summary()}", flush=True)
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


def _store_quality(results: dict, task: str, found: dict) -> None:
    per_task = results.setdefault("quality", {})
    per_task[task] = per_task.get(task, {}) | found  # keeps the parts stored apart (vertex_gap)
    rows = list(per_task.values())
    results["mean_delta_pts"] = statistics.mean(r["delta_pts"] for r in rows)
    fresh = [r for r in rows if "delta_pts_fresh" in r]
    results["mean_delta_pts_fresh"] = statistics.mean(r["delta_pts_fresh"] for r in fresh)
    results["tasks_ci_above_zero"] = sorted(
        t for t, r in per_task.items() if r.get("ci_above_zero")
    )
    chosen = [r for r in rows if "never_worse" in r]
    if chosen:
        results["never_worse"] = all(r["never_worse"] for r in chosen)
        results["never_worse_tasks"] = sorted(t for t, r in per_task.items() if "never_worse" in r)


class _LoggedCandidates(SelectorMethod):
    """A study's method: executes candidate `executed` (parent i alone on the chunk's own noise,
    so the episode is that parent's) and logs every score's rank of it among the candidates."""

    def __init__(self, executed: int) -> None:
        self.executed, self.log = executed, []

    def predict_actions(self, policy, obs, noise):
        chunks, _ = candidates(policy, obs, noise, SELECTOR_CANDIDATES)
        row = {}
        for name, score in SCORES.items():
            values = score(policy, obs, chunks)  # (C, B)
            mine = values[self.executed]
            # the fraction of the other candidates it beats (ties count half)
            beats = (mine > values).double().sum(0) + 0.5 * (mine == values).double().sum(0)
            row[name] = ((beats - 0.5) / (values.shape[0] - 1)).tolist()
        self.log.append(row)
        chosen = chunks[self.executed]
        return policy.parents[0].action_normalizer.unnormalize(chosen)


def _auc(positive: list[float], negative: list[float]) -> float | None:
    """P(a positive's value > a negative's), ties half: 0.5 is chance."""
    if not positive or not negative:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in positive for n in negative)
    return wins / (len(positive) * len(negative))


def selector_scores(task: str, episodes: int) -> dict:
    """How well each selector score ranks: on `episodes` fresh seeds per parent, parent i alone
    executes its own chunks (the episode is its native one) while every chunk's candidates
    (SELECTOR_CANDIDATES native samples per parent, one convex 0.5/0.5 composition) are scored;
    the executed chunk's rank among them is logged with the episode's outcome. AUC of the mean
    rank per episode (and of every chunk's rank) between successful and failed episodes: 0.5
    ranks like chance."""
    parents, names = parents_of(task)
    seeds = list(range(HELDOUT_SEED_START, HELDOUT_SEED_START + episodes))
    folder = OUT / task / "selector_scores"
    folder.mkdir(parents=True, exist_ok=True)
    out: dict = {"seeds": {"start": seeds[0], "episodes": len(seeds)}, "per_parent": {}}
    pooled: dict[str, dict[bool, list]] = {n: {True: [], False: []} for n in SCORES}
    chunk_pooled: dict[str, dict[bool, list]] = {n: {True: [], False: []} for n in SCORES}
    for i, name in enumerate(names):

        def run(seed: int, offset: int = i * SELECTOR_CANDIDATES) -> dict:
            policy = compose(parents, "selector", (0.5, 0.5))
            policy.method = _LoggedCandidates(offset)
            result = evaluate(policy, [seed], num_envs=1, progress=False)
            return {"success": bool(result.records[0]["success"]), "ranks": policy.method.log}

        rows = resume_records(folder / f"{name}.jsonl", seeds, run, key_field="seed")
        for record in rows:
            for score in SCORES:
                ranks = [r for chunk in record["ranks"] for r in chunk[score]]
                pooled[score][record["success"]].append(statistics.mean(ranks))
                chunk_pooled[score][record["success"]].extend(ranks)
        out["per_parent"][name] = {
            "success": statistics.mean(r["success"] for r in rows),
            "episodes": len(rows),
        }
    out["auc_episode_mean_rank"] = {n: _auc(v[True], v[False]) for n, v in pooled.items()}
    out["auc_chunk_rank"] = {n: _auc(v[True], v[False]) for n, v in chunk_pooled.items()}
    out["episodes_success_failure"] = {n: [len(v[True]), len(v[False])] for n, v in pooled.items()}
    print(f"{task} selector scores: {json.dumps(out)}", flush=True)
    return out


def selector_run(task: str, episodes: int) -> dict:
    """The selector on fresh seeds against the better parent there (paired) and the per-seed
    oracle of the parents: success, the share of the oracle gap it closes."""
    parents, names = parents_of(task)
    seeds = list(range(HELDOUT_SEED_START, HELDOUT_SEED_START + episodes))
    fresh_dir = OUT / task / "fresh"
    on_fresh = compare(*parents, seeds, out_dir=fresh_dir, labels=tuple(names))
    rows = {n: r.row() for n, r in zip(names, on_fresh.results, strict=True)}
    better = _pick(rows)
    label = candidate_label("selector", (0.5, 0.5))
    pair = compare(
        compose(parents, "selector", (0.5, 0.5)),
        parents[names.index(better)],
        seeds,
        out_dir=fresh_dir,
        labels=(label, better),
    )
    success, base, oracle = (
        pair.results[0].row()["success"],
        rows[better]["success"],
        on_fresh.oracle,
    )
    return {
        "method": "selector (agreement, 2 native samples per parent + convex 0.5/0.5)",
        "seeds": {"start": seeds[0], "episodes": len(seeds)},
        "better_parent": better,
        **pair.results[0].row(),
        "minus_better_parent": paired_entry(pair),
        "oracle": oracle,
        "oracle_gap_closed": (success - base) / (oracle - base) if oracle > base else None,
    }


def _store_vertex_gap(results: dict, task: str, gap: dict) -> None:
    """`vertex_gap` beside the task's P1 row; the headline says whether every interval holds 0."""
    results.setdefault("quality", {}).setdefault(task, {})["vertex_gap"] = gap
    gaps = [r["vertex_gap"] for r in results["quality"].values() if "vertex_gap" in r]
    results["vertex_gaps_contain_zero"] = all(g["all_contain_zero"] for g in gaps)


def _store_selector(results: dict, task: str, selector: dict) -> None:
    """`selector` beside the task's P1 row; the headline: the mean share of the oracle gap."""
    results.setdefault("quality", {}).setdefault(task, {})["selector"] = selector
    shares = [
        r["selector"]["oracle_gap_closed"]
        for r in results["quality"].values()
        if r.get("selector", {}).get("oracle_gap_closed") is not None
    ]
    if shares:
        results["oracle_gap_closed"] = statistics.mean(shares)
        results["oracle_gap_closed_tasks"] = sorted(
            t for t, r in results["quality"].items() if "selector" in r
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    add_parts(parser, PARTS, default=[p for p in PARTS if p != "selector"])
    parser.add_argument("--selector-episodes", type=int, default=100, help="selector seeds")
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
    args = parser.parse_args()
    tasks = args.tasks.split(",")
    for task in tasks if "latency" in args.parts else ():
        _record(
            "latency",
            task,
            latency(task, args.repeats),
            "latency_ratio",
            lambda rows: max(r["batch1"]["ratio_vs_slower_parent"] for r in rows),
        )
        RESULTS.update(_same_sampler_headline)
    for task in tasks if "vertex" in args.parts else ():
        parents, names = parents_of(task)
        seeds = list(range(HELDOUT_SEED_START, HELDOUT_SEED_START + args.vertex_episodes))
        gap = vertex_gap(parents, names, seeds, OUT / task / "fresh")
        RESULTS.update(lambda results, task=task, gap=gap: _store_vertex_gap(results, task, gap))
    for task in tasks if "selector" in args.parts else ():
        scores = selector_scores(task, args.selector_episodes)
        run = selector_run(task, args.selector_episodes)
        RESULTS.update(
            lambda results, task=task, run=run, scores=scores: _store_selector(
                results, task, run | {"score_ranking": scores}
            )
        )
    for task in tasks if "search" in args.parts else ():
        _record(
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
        RESULTS.update(lambda results, task=task, found=found: _store_quality(results, task, found))


if __name__ == "__main__":
    main()

"""Tables of docs/results/composition.md: what composing the shipped and external pairs does,
and what it costs."""

from __future__ import annotations

from report_tables import fmt
from robocompose.composition.methods import method_title
from robocompose.records import rate_of


def _complementarity(c: dict) -> str:
    return f"{c['only_a']} / {c['only_b']} / {c['both']} / {c['neither']}"


def _measured(results: dict) -> list[tuple[str, dict]]:
    """Tasks measured by P1's current protocol (search seeds, then fresh seeds), by name."""
    return sorted((t, q) for t, q in results["quality"].items() if "fresh" in q)


def composition_search() -> str:
    """P1 on the search seeds: the parents, who solves what, and every operator tried there."""
    results = fmt.read("composition.json")
    rows = []
    for task, q in _measured(results):
        a, b = q["parents"]
        ops = q["operators"]
        cells = [f"{fmt.weights(ops['convex']['weights'])}: {fmt.rate(ops['convex'])}"]
        keys = ("product_of_experts", "superdiff_and", "superdiff_or", "mixture")
        cells += [fmt.rate(ops[k]) if k in ops else "not run" for k in keys]
        rows.append(
            [
                task,
                f"{a['checkpoint']} ({q['modalities'][a['checkpoint']]}): {fmt.rate(a)}",
                f"{b['checkpoint']} ({q['modalities'][b['checkpoint']]}): {fmt.rate(b)}",
                _complementarity(q["complementarity_search"]),
                *cells,
                _choice(q["chosen_candidate"]["search"]),
                q["search"]["episodes_spent"],
            ]
        )
    header = (
        "task",
        "parent A",
        "parent B",
        "only A / only B / both / neither",
        "GPC convex (searched w)",
        "product (1, 1)",
        "SuperDiff AND",
        "SuperDiff OR",
        "mixture",
        "the search's choice",
        "search episodes",
    )
    return fmt.table(header, rows)


def composition_fresh() -> str:
    """P1 on fresh seeds: the search's choice and each composition minus the better parent,
    paired per seed."""
    results = fmt.read("composition.json")
    rows = []
    for task, q in _measured(results):
        fresh, better, chosen = q["fresh"], q["better_parent"], q["chosen_candidate"]
        paired = fresh["paired_vs_better_parent"]
        keys = ("convex", "product_of_experts", "sharpened_better_parent")
        rows.append(
            [
                task,
                f"{better}: {fmt.rate(fresh['parents'][better])}",
                _complementarity(fresh["complementarity"]),
                _choice(chosen["search"]),
                fmt.points(chosen["fresh"]),
                *_both_parents(q),
                *(fmt.paired_cell(paired.get(k)) for k in keys),
                fmt.paired_cell(q.get("product_vs_sharpened_control")),
                fmt.paired_cell(q.get("better_parent_karras_grid")),
                str(q.get("never_worse", "-")).lower(),
            ]
        )
    header = (
        "task",
        "better parent",
        "only A / only B / both / neither",
        "the search's choice",
        "choice - better",
        "its best of both parents",
        "that - better",
        "convex - better",
        "product - better",
        "better sharpened (control) - better",
        "product - control",
        "better on the Karras grid - better",
        "never worse",
    )
    return fmt.table(header, rows)


def _both_parents(q: dict) -> list[str]:
    """The search's best composition weighing both parents, and its fresh gain."""
    both = q.get("both_parents_candidate")
    return [_choice(both["search"]), fmt.points(both["fresh"])] if both else ["-", "-"]


def composition_headlines() -> str:
    d = fmt.read("composition.json")
    return fmt.table(
        ("headline", "value"),
        (
            (
                "the search's choice minus the better parent, mean over tasks (points, fresh "
                "seeds)",
                f"{d['mean_delta_pts_fresh']:+.1f}",
            ),
            (
                "its best composition of both parents minus the better parent, mean",
                f"{d['mean_delta_pts_fresh_both_parents']:+.1f}",
            ),
            ("tasks whose interval lies above 0", ", ".join(d["tasks_ci_above_zero"])),
            (
                "never worse than the better parent",
                f"{d['never_worse']} ({', '.join(d['never_worse_tasks'])})",
            ),
            ("every vertex gap's interval holds 0", d["vertex_gaps_contain_zero"]),
        ),
    )


def _vertex_rows(task: str, gap: dict) -> list[list[str]]:
    rows = []
    for parent, g in gap.items():
        if not isinstance(g, dict) or "composed_minus_native" not in g:
            continue
        former = g.get("former_path_minus_native")
        grid = "its own" + (" (also the pair's)" if parent == gap["pair_grid_of"] else "")
        before = (
            f"{fmt.points(former)} ({gap['pair_grid_of']}'s grid)" if former else "(the same path)"
        )
        rows.append([task, parent, grid, fmt.points(g["composed_minus_native"]), before])
    return rows


def vertex_gap() -> str:
    """Each parent natively against its vertex (weights (1, 0)), paired on fresh seeds."""
    rows = []
    for task, q in sorted(fmt.read("composition.json")["quality"].items()):
        if "vertex_gap" in q:
            rows += _vertex_rows(task, q["vertex_gap"])
    for task, pair in _external_pairs():
        if "vertex_gap" in pair:
            rows += _vertex_rows(task, pair["vertex_gap"])
    header = (
        "task",
        "parent",
        "its vertex on",
        "vertex - parent alone (paired)",
        "vertex on the pair's grid (before) - parent alone",
    )
    return fmt.table(header, rows)


def latency_to_floor() -> str:
    d = fmt.read("composition.json")["latency"]
    rows = []
    for task, lat in sorted(d.items()):
        b1, b16 = lat["batch1"], lat["batch16"]
        if "ratio_to_floor" not in b1:
            continue
        pair = ("ratio_to_floor", "ratio_to_floor_cpu_threads1", "ratio_to_floor_paired_threads1")
        cells = [f"{b1[k]:.2f} ({b16[k]:.2f})" for k in pair]
        floor = f"{b1['floor_ms']['threads1']:.1f} ({b16['floor_ms']['threads1']:.1f})"
        load = (
            f"{min(b1['load_average']):.1f}-{max(b1['load_average']):.1f}"
            if isinstance(b1.get("load_average"), list)
            else str(b1.get("load_average", "-"))
        )
        rows.append([task, *cells, floor, load])
    header = (
        "task",
        "composed / floor, batch 1 (16)",
        "same, one-thread CPU time",
        "per-round ratio, one thread",
        "floor ms, batch 1 (16)",
        "load",
    )
    return fmt.table(header, rows)


def composition_cost() -> str:
    """P2 (composed chunk latency over the slower parent's) and P3 (search episodes)."""
    results = fmt.read("composition.json")
    rows = []
    for task in sorted(results["quality"]):
        lat, cost = results["latency"][task], results["search_cost"][task]
        b1, b16 = lat["batch1"], lat["batch16"]
        same, cpu = "ratio_vs_slower_parent_same_sampler", "ratio_vs_slower_parent_same_sampler_cpu"
        rows.append(
            [
                task,
                f"{b1['ratio_vs_slower_parent']:.2f} ({b16['ratio_vs_slower_parent']:.2f})",
                f"{b1[same]:.2f} ({b16[same]:.2f})",
                f"{b1[cpu]:.2f} ({b16[cpu]:.2f})",
                b1["best_composed"],
                f"{cost['search_cost_ratio']:.3f} of {cost['grid_episodes']}",
                f"{100 * cost['within_2pts_of_grid_choice']:.0f}% of {cost['replays']} seed orders",
            ]
        )
    header = (
        "task",
        "P2 composed / slower parent, batch 1 (16)",
        "same, parents on the composed sampler",
        "same, one-thread CPU time",
        "best setting, batch 1",
        "P3 halving / grid episodes",
        "halving within 2 points of the grid's choice",
    )
    return fmt.table(header, rows)


def latency_floor() -> str:
    d = fmt.read("latency_floor.json")
    rows = []
    for task, t in d["tasks"].items():
        cells = [task]
        for batch in ("batch1", "batch16"):
            b = t[batch]
            cells += [f"{b['network_ratio']:.2f} ({b['n2_way']})", f"{b['floor_ratio']:.2f}"]
        rows.append(cells)
    header = (
        "task",
        "both / one network, batch 1",
        "floor, batch 1",
        "both / one network, batch 16",
        "floor, batch 16",
    )
    intro = (
        f"A 1024 x 1024 matmul runs {d['matmul_2_thread_speedup']:.2f}x faster on two threads.\n\n"
    )
    return intro + fmt.table(header, rows)


def _selector_row(task: str, s: dict) -> list[str]:
    ranking = s.get("score_ranking", {}).get("auc_episode_mean_rank", {})
    auc = " / ".join(f"{ranking[k]:.2f}" for k in ("agreement", "denoising") if k in ranking)
    return [
        task,
        s["method"].split("(")[1].split(",")[0],
        fmt.rate(s),
        fmt.points(s["minus_better_parent"]),
        fmt.pct(s["oracle"]),
        fmt.signed(s["oracle_gap_closed"]),
        auc or "-",
    ]


def selector() -> str:
    """The selector against the better parent, on the suite's tasks and the external pairs."""
    rows = []
    for task, q in sorted(fmt.read("composition.json")["quality"].items()):
        for s in [q.get("selector"), *q.get("selector_by_score", {}).values()]:
            if s:
                rows.append(_selector_row(task, s))
    for task, pair in _external_pairs():
        for s in [pair.get("selector"), *pair.get("selector_by_score", {}).values()]:
            if s:
                rows.append(_selector_row(task, s))
    header = (
        "task",
        "score",
        "selector",
        "- better parent (paired)",
        "oracle",
        "share of the oracle gap",
        "AUC agreement / denoising",
    )
    d = fmt.read("composition.json")
    pooled = (
        f"\n\nMean share of the oracle gap over the suite's tasks "
        f"{d['oracle_gap_closed']:+.2f}, pooled {d['oracle_gap_closed_pooled']:+.2f}."
    )
    return fmt.table(header, rows) + pooled


def _choice(chosen: dict) -> str:
    if chosen["kind"] == "parent_native":
        return f"{chosen['parent']} alone"
    weights = chosen["weights"]
    if chosen["operator"] == "weighted_sum" and sum(w > 0 for w in weights) == 1:
        return f"one parent sharpened {fmt.weights(weights)}"  # p^2: no composition
    return f"{method_title(chosen['operator'])} {fmt.weights(weights)}"


def _composed_candidate(selector: dict) -> dict:
    """The composition the selector draws besides the parents: stored since runs kept it, else
    the search's choice, which was that composition whenever it was one."""
    if "composed_candidate" in selector:
        return selector["composed_candidate"]
    chosen = selector["search_all_operators"]["chosen"]
    if chosen["kind"] == "parent_native":
        raise ValueError("a selector stored without its composed candidate: rerun --parts verifier")
    return chosen


def _round(row: dict) -> str:
    """A selector round's success, with the share of its chunks that were the composed one's."""
    share = row.get("composed_share")
    return f"{100 * row['success']:.0f}%" + ("" if share is None else f" ({100 * share:.0f}%)")


def verifier_selector() -> str:
    """The selector by the learned verifier (at each margin run): the composition among its
    candidates, its rounds, and on fresh seeds against the better parent, that composition
    alone and the oracle; the verifier's ranking of
    counterfactual labels (only where that very file scored them) beside the untrained scores'
    (counterfactual.json)."""
    d = fmt.read("composition.json")
    labelled = fmt.read("counterfactual.json").get("tasks", {})
    rows = []
    pairs = [*sorted(d["quality"].items()), *_external_pairs()]
    learned = [
        (task, s)
        for task, q in pairs
        for s in [q.get("selector", {}), *q.get("selector_by_margin", {}).values()]
        if "verifier" in s
    ]
    for task, s in learned:
        aucs = " -> ".join(f"{r['auc_held_out']:.2f}" for r in s["verifier"]["training"])
        rounds = ", ".join(_round(r) for r in s["verifier"]["rounds"]) or "-"
        scores = labelled.get(task, {}).get("scores", {})
        counterfactual = " / ".join(
            "-" if auc is None else f"{auc:.2f}"
            for auc in (
                s.get("verifier_auc_counterfactual"),
                scores.get("contrast", {}).get("auc"),
                scores.get("agreement", {}).get("auc"),
            )
        )
        rows.append(
            [
                task,
                _choice(_composed_candidate(s)),
                f"{s.get('selector_margin', 0.0):g}",
                aucs,
                rounds,
                fmt.rate(s),
                fmt.points(s["minus_better_parent"]),
                fmt.paired_cell(s.get("minus_composed_candidate")),
                fmt.pct(s["oracle"]),
                fmt.signed(s["oracle_gap_closed"]),
                counterfactual,
            ]
        )
    header = (
        "task",
        "composed candidate",
        "margin",
        "verifier held-out AUC by round",
        "selector in its rounds (composed chunks)",
        "selector (fresh)",
        "- better parent (paired)",
        "- composed candidate alone (paired)",
        "oracle",
        "share of the oracle gap",
        "counterfactual AUC verifier / contrast / agreement",
    )
    half = ", ".join(d.get("oracle_gap_half_tasks", [])) or "none"
    not_run = "".join(
        f"\n\nNot run on {task}: {q['verifier_not_run']['not_run']}."
        for task, q in _external_pairs()
        if "verifier_not_run" in q
    )
    significant = ", ".join(fmt.read("external.json").get("selector_significant_gain_pairs", []))
    return (
        fmt.table(header, rows)
        + f"\n\nOur tasks where it closes half the oracle gap: {half}. External pairs where the "
        + f"selector is significantly above the better parent: {significant or 'none'}."
        + not_run
    )


def chunk_repeatability() -> str:
    """How far a boundary's chunk decides its outcome: the same counterfactual boundaries under
    several finisher noises (counterfactual.json `repeatability`)."""
    d = fmt.read("counterfactual.json").get("repeatability", {})
    rows = []
    for task, r in sorted(d.items()):
        ci = r["ceiling_auc_ci95"]
        ceiling = "-" if r["ceiling_auc"] is None else f"{r['ceiling_auc']:.2f}"
        if ci is not None:
            ceiling += f" [{ci[0]:.2f}, {ci[1]:.2f}]"
        rows.append(
            [
                task,
                f"{r['seeds']['episodes']} episodes, {r['boundaries']} boundaries",
                r["repeats"],
                fmt.pct(r["flip_rate"]),
                fmt.pct(r["informative"]),
                ceiling,
                f"{100 * r['choice_gain']:+.1f}",
                fmt.pct(r["selector_chosen_success"]),
            ]
        )
    header = (
        "task",
        "labelled",
        "finisher noises",
        "candidates whose outcome a noise flips",
        "boundaries with mixed outcomes (per noise)",
        "ceiling AUC (knowing each chance)",
        "a chooser by the other noises: + pts per boundary",
        "the selector's own pick",
    )
    return fmt.table(header, rows)


def selector_cost() -> str:
    """The selector's ms per chunk over the floor's, by score and samples per parent."""
    d = fmt.read("composition.json").get("selector_latency", {})
    rows = []
    for task, t in sorted(d.items()):
        for score in ("agreement", "verifier"):
            if score not in t["batch1"]:
                continue
            for k, one in t["batch1"][score].items():
                sixteen = t["batch16"][score][k]
                rows.append(
                    [
                        task,
                        score,
                        f"{k} ({one['candidates']} candidates)",
                        f"{one['ms']:.1f} ms, {one['ratio_to_floor']:.1f}x",
                        f"{sixteen['ms']:.1f} ms, {sixteen['ratio_to_floor']:.1f}x",
                    ]
                )
    header = ("task", "score", "samples per parent", "batch 1: per chunk, / floor",
              "batch 16: per chunk, / floor")  # fmt: skip
    return fmt.table(header, rows)


def search_k3() -> str:
    """Three parents on Stack: each method's cheapest budget landing near the grid optimum in
    90% of the seed orders, then the best picks measured on fresh seeds."""
    k3 = fmt.read("composition.json")["search_k3"]
    methods = k3["methods"]
    rows = [
        [
            m,
            methods[f"{m}_cheapest_90pct"]["setting"],
            f"{r['mean_episodes']:.0f}",
            f"{100 * r['within_2pts_fraction']:.0f}%",
        ]
        for m in methods
        if f"{m}_cheapest_90pct" in methods
        for r in [methods[f"{m}_cheapest_90pct"]]
    ]
    intro = (
        f"{k3['task']}, parents {', '.join(k3['parents'])}; the full grid {k3['grid_episodes']} "
        f"episodes on {k3['seeds']} seeds, replayed over {k3['replays']} seed orders:\n\n"
    )
    tolerance = f"within {k3['tolerance_pts']:g} points"
    table = fmt.table(("method", "cheapest budget", "mean episodes", tolerance), rows)
    picks = fmt.table(
        ("chosen on the grid's seeds", "weights", f"on {k3['fresh_seeds']} fresh seeds"),
        (
            (k.replace("_", " "), fmt.weights(r["weights"]), fmt.rate(r))
            for k, r in k3["fresh"].items()
        ),
    )
    gains = (
        f"\n\nPair minus best parent {k3['edge_minus_vertex']['fresh_seeds']['text']}; "
        f"three minus pair {k3['interior_minus_edge']['fresh_seeds']['text']}."
    )
    return intro + table + "\n\n" + picks + gains


def _external_pairs() -> list[tuple[str, dict]]:
    """Every external task's parent pair: robosuite's and FetchReach's, GymPushT's two."""
    d = fmt.read("external.json")
    pairs = [
        (t, p) for t, p in sorted(d.items()) if isinstance(p, dict) and "chosen_candidate" in p
    ]
    gym = d.get("GymPushT", {})
    pairs += [
        (f"GymPushT ({k.removeprefix('policies').strip('_') or 'mlp'})", gym[k])
        for k in ("policies", "policies_unet")
        if k in gym
    ]
    return pairs


def external() -> str:
    """The external pairs on fresh seeds: each parent, what the search returns, the compositions."""
    rows = []
    for task, p in _external_pairs():
        parents = p["parents"] if isinstance(p["parents"], dict) else p["fresh"]
        a, b = (f"{n}: {fmt.rate(r)}" for n, r in parents.items())
        composed = p.get("composed", {})
        ops = [
            f"{fmt.weights(composed[k]['weights'])}: {fmt.rate(composed[k])}"
            if k in composed
            else "-"
            for k in ("convex", "product_of_experts")
        ]
        chosen = p["chosen_candidate"]
        kind = (
            chosen.get("parent", chosen["kind"])
            if chosen["kind"] == "parent_native"
            else (f"{chosen.get('operator', 'convex')} {fmt.weights(chosen['weights'])}")
        )
        rows.append([task, a, b, *ops, kind, fmt.points(chosen["minus_better_parent"])])
    header = (
        "task",
        "parent A",
        "parent B",
        "searched convex",
        "product (1, 1)",
        "search returns",
        "its gain over the better parent (paired)",
    )
    d = fmt.read("external.json")
    gains = ", ".join(d.get("significant_gain_pairs", [])) or "none"
    return fmt.table(header, rows) + f"\n\nPairs significantly above their better parent: {gains}."


def external_grid() -> str:
    d = fmt.read("external.json")
    rows = [("PickPlaceCan_grid_cost", d["PickPlaceCan_grid_cost"]["formatted"])]
    for op, r in d.get("PickPlaceCan_grid_choice", {}).items():
        if isinstance(r, dict):
            rows.append(
                (
                    f"PickPlaceCan_grid_choice: {op}",
                    ", ".join(f"{k} {v}" for k, v in r.items() if isinstance(v, str)),
                )
            )
    return fmt.table(("measured", "result"), rows)


def gym_pusht() -> str:
    """gym-pusht's expert and the parents against our PushT's."""
    g = fmt.read("external.json")["GymPushT"]
    e = g["expert"]
    rows = [
        (
            "GymPushT expert",
            e["success"]["text"],
            f"{e['mean_steps']:.0f}",
            f"{e['seconds_per_episode']:.1f}",
        )
    ]
    ours = g["compare"]["PushT"]["expert"]
    rows.append(
        (
            "PushT expert (ours)",
            ours["success"]["text"],
            f"{ours['mean_steps']:.0f}",
            f"{ours['seconds_per_episode']:.1f}",
        )
    )
    return fmt.table(("expert", "success", "steps an episode", "s an episode"), rows)


def jax_torch() -> str:
    j = fmt.read("external.json")["jax_torch"]
    p = j["policies"]
    first = p["parents"][0]
    rows = [
        (f"{n} ({p['frameworks'][n]})", rate_of(r).format(episodes=False), "")
        for n, r in p["fresh"].items()
    ]
    for op, r in p["composed"].items():
        vs = r.get(f"vs_{first}")
        rows.append(
            (
                f"{op} {fmt.weights(r['weights'])}",
                rate_of(r).format(episodes=False),
                fmt.points(vs) if vs else "",
            )
        )
    table = fmt.table(("policy", "success [95% CI]", f"vs {first} (paired)"), rows)
    twin = p["jax_vs_torch_twin"]
    o = j["overhead"]
    chunk = ", ".join(f"{k} {v:.1f} ms" for k, v in o["chunk_ms"].items())
    return (
        f"{table}\n\nJAX flow MLP minus its torch twin: {fmt.points(twin)} (paired). Per chunk at "
        f"batch {o['batch']}, {o['torch_threads']} torch thread(s): {chunk}; "
        f"{sum(v for k, v in o['crossings_per_chunk'].items() if k != 'zero_copy')} DLPack "
        f"crossings a chunk, {o['crossings_per_chunk'].get('zero_copy', 0)} of them without a copy."
    )


TABLES = (
    composition_search,
    composition_fresh,
    composition_headlines,
    vertex_gap,
    latency_to_floor,
    composition_cost,
    latency_floor,
    selector,
    verifier_selector,
    chunk_repeatability,
    selector_cost,
    search_k3,
    external,
    external_grid,
    gym_pusht,
    jax_torch,
)

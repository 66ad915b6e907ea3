"""Markdown tables of the measured figures in benchmarks/results/ (what the README quotes).

python benchmarks/report.py
"""

from __future__ import annotations

from common import ResultsFile

from robocompose.records import rate_of


def _read(name: str) -> dict:
    return ResultsFile(name).read()


def _rate(row: dict) -> str:
    return f"{rate_of(row).format(episodes=False)} ({row['episodes']})"


def policies_table() -> str:
    rows = _read("policies.json")["checkpoints"]
    lines = [
        "| checkpoint | success [95% CI] (episodes) | demos | train steps | train min |",
        "|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: r["checkpoint"]):
        lines.append(
            f"| {r['checkpoint']} | {_rate(r)} | {r['demos']} | {r['train_steps']} | "
            f"{r['train_minutes']:.1f} |"
        )
    return "\n".join(lines)


def _complementarity(c: dict) -> str:
    return f"{c['only_a']} / {c['only_b']} / {c['both']} / {c['neither']}"


def _paired(p: dict) -> str:
    d, lo, hi = (100 * p[k] for k in ("difference", "ci_low", "ci_high"))
    return f"{d:+.1f} [{lo:+.1f}, {hi:+.1f}]"


def _paired_cell(p: dict | None) -> str:
    """A paired difference, or "not run" for a comparison the run left out (or skipped)."""
    if not p or "skipped" in p:
        return "not run"
    return _paired(p)


def _measured(results: dict) -> list[tuple[str, dict]]:
    """Tasks measured by P1's current protocol (search seeds, then fresh seeds), by name."""
    return sorted((t, q) for t, q in results["quality"].items() if "fresh" in q)


def composition_table() -> str:
    """P1 on the search seeds: the parents, who solves what, and every operator tried there."""
    results = _read("composition.json")
    lines = [
        "| task | parent A | parent B | only A / only B / both / neither | GPC convex "
        "(searched w) | product (1, 1) | SuperDiff AND | SuperDiff OR | mixture | chosen |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for task, q in _measured(results):
        a, b = q["parents"]
        ops = q["operators"]
        weights = ", ".join(f"{w:.1f}" for w in ops["convex"]["weights"])
        cells = [f"({weights}): {_rate(ops['convex'])}"]
        keys = ("product_of_experts", "superdiff_and", "superdiff_or", "mixture")
        cells += [_rate(ops[k]) if k in ops else "not run" for k in keys]
        lines.append(
            f"| {task} | {a['checkpoint']} ({q['modalities'][a['checkpoint']]}): {_rate(a)} "
            f"| {b['checkpoint']} ({q['modalities'][b['checkpoint']]}): {_rate(b)} "
            f"| {_complementarity(q['complementarity_search'])} | {' | '.join(cells)} "
            f"| {q['chosen_operator']} |"
        )
    return "\n".join(lines)


def fresh_table() -> str:
    """P1 on fresh seeds: each composition minus the better parent, paired per seed."""
    results = _read("composition.json")
    lines = [
        "| task | better parent | only A / only B / both / neither | convex - better | product "
        "- better | chosen operator - better | better sharpened (control) - better | product - "
        "control | better on the Karras grid - better |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for task, q in _measured(results):
        fresh = q["fresh"]
        better = q["better_parent"]
        paired = fresh["paired_vs_better_parent"]
        keys = ("convex", "product_of_experts", "chosen_operator", "sharpened_better_parent")
        control = q.get("product_vs_sharpened_control")
        grid = q.get("better_parent_karras_grid")
        lines.append(
            f"| {task} | {better}: {_rate(fresh['parents'][better])} "
            f"| {_complementarity(fresh['complementarity'])} "
            f"| {' | '.join(_paired_cell(paired.get(k)) for k in keys)} "
            f"| {_paired_cell(control)} | {_paired_cell(grid)} |"
        )
    return "\n".join(lines)


def cost_table() -> str:
    results = _read("composition.json")
    lines = [
        "| task | P2 composed / slower parent, batch 1 (16) | same, parents on the composed "
        "sampler | same, one-thread CPU time | best setting, batch 1 | P3 halving / grid episodes "
        "| halving within 2 points of the grid optimum |",
        "|---|---|---|---|---|---|---|",
    ]
    for task in sorted(results["quality"]):
        lat, cost = results["latency"][task], results["search_cost"][task]
        b1, b16 = lat["batch1"], lat["batch16"]
        same, cpu = "ratio_vs_slower_parent_same_sampler", "ratio_vs_slower_parent_same_sampler_cpu"
        lines.append(
            f"| {task} | {b1['ratio_vs_slower_parent']:.2f} ({b16['ratio_vs_slower_parent']:.2f}) "
            f"| {b1[same]:.2f} ({b16[same]:.2f}) | {b1[cpu]:.2f} ({b16[cpu]:.2f}) "
            f"| {b1['best_composed']} | {cost['search_cost_ratio']:.3f} "
            f"| {100 * cost['within_2pts_fraction']:.0f}% of {cost['replays']} seed orders |"
        )
    return "\n".join(lines)


def families_table(model: str = "qwen2.5-coder-1.5b") -> str:
    """Per family and planner on the held-out split (benchmarks/results/hierarchical.json)."""
    results = _read("hierarchical.json")
    families, planners = results["families"][model], ("goal", "skills", "code", "saycan")
    shown = [p for p in planners if p in families]
    lines = [
        "| family | " + " | ".join(shown) + " |",
        "|---|" + "---|" * len(shown),
    ]
    for family in families[shown[0]]:
        cells = [families[p].get(family, {}).get("success", {}).get("text", "not run")
                 for p in shown]  # fmt: skip
        lines.append(f"| {family} | " + " | ".join(cells) + " |")
    outcome = results["outcomes"][model]
    for name in ("right", "wrong", "asked_or_refused"):
        cells = [outcome[p][name]["text"] for p in shown]
        lines.append(f"| all feasible: {name.replace('_', ' ')} | " + " | ".join(cells) + " |")
    refusals = results["refusals"][model]
    cells = [
        f"{refusals[p]['refused_or_asked']['text']}, {refusals[p]['robot_calls']} robot calls"
        for p in shown
    ]
    lines.append("| infeasible: refused or asked | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    print("## Shipped checkpoints (benchmarks/results/policies.json)\n")
    print(policies_table())
    print("\n## Composition, P1 (benchmarks/results/composition.json)\n")
    print(composition_table())
    print("\n## Composition, P1 on fresh seeds, paired against the better parent\n")
    print(fresh_table())
    print("\n## Composition, P2 latency and P3 search cost\n")
    print(cost_table())
    print("\n## Planning: task families, held-out split (benchmarks/results/hierarchical.json)\n")
    print(families_table())


if __name__ == "__main__":
    main()

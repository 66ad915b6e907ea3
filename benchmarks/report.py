"""Markdown tables of the measured figures in benchmarks/results/ (what the README quotes).

    python benchmarks/report.py
"""

from __future__ import annotations

import json

from common import RESULTS

from robocompose.records import rate_of


def _read(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


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


def composition_table() -> str:
    results = _read("composition.json")
    lines = [
        "| task | parent A | parent B | GPC convex (searched w) | product of experts (1, 1) "
        "| better parent sharpened (2, 0) | convex - best parent |",
        "|---|---|---|---|---|---|---|",
    ]
    for task, q in sorted(results["quality"].items()):
        a, b = q["parents"]
        best, ops = q["best"], q["operators"]
        cells = []
        for key in ("product_of_experts", "sharpened_best_parent"):
            cells.append(_rate(ops[key]) if "success" in ops.get(key, {}) else "not run")
        weights = ", ".join(f"{w:.1f}" for w in best["weights"])
        lines.append(
            f"| {task} | {a['checkpoint']}: {_rate(a)} | {b['checkpoint']}: {_rate(b)} "
            f"| ({weights}): {_rate(best)} | {cells[0]} | {cells[1]} | {q['delta_pts']:+.1f} |"
        )
    return "\n".join(lines)


def heldout_table() -> str:
    results = _read("composition.json")
    lines = [
        "| task | seeds from | parents | GPC convex | product of experts | convex - best parent "
        "| product - best parent |",
        "|---|---|---|---|---|---|---|",
    ]
    for task, q in sorted(results["quality"].items()):
        if "heldout" not in q:
            continue
        held, names = q["heldout"], [p["checkpoint"] for p in q["parents"]]
        rows = held["rows"]
        convex = next(v for k, v in rows.items() if k.startswith("convex_"))
        product = next(v for k, v in rows.items() if k.startswith("weighted_sum_"))
        parents = "; ".join(f"{n}: {_rate(rows[n])}" for n in names)
        lines.append(
            f"| {task} | {held['seed_start']} | {parents} | {_rate(convex)} | {_rate(product)} "
            f"| {held['convex_delta_pts']:+.1f} | {held['product_delta_pts']:+.1f} |"
        )
    return "\n".join(lines)


def cost_table() -> str:
    results = _read("composition.json")
    lines = [
        "| task | P2 composed / slower parent, batch 1 (16) | same, parents on the composed "
        "sampler | best setting, batch 1 | P3 halving / grid episodes "
        "| halving within 2 points of the grid optimum |",
        "|---|---|---|---|---|---|",
    ]
    for task in sorted(results["quality"]):
        lat, cost = results["latency"][task], results["search_cost"][task]
        b1, b16 = lat["batch1"], lat["batch16"]
        same = "ratio_vs_slower_parent_same_sampler"
        lines.append(
            f"| {task} | {b1['ratio_vs_slower_parent']:.2f} ({b16['ratio_vs_slower_parent']:.2f}) "
            f"| {b1[same]:.2f} ({b16[same]:.2f}) "
            f"| {b1['best_composed']} | {cost['search_cost_ratio']:.3f} "
            f"| {100 * cost['within_2pts_fraction']:.0f}% of {cost['replays']} seed orders |"
        )
    return "\n".join(lines)


def main() -> None:
    print("## Shipped checkpoints (benchmarks/results/policies.json)\n")
    print(policies_table())
    print("\n## Composition, P1 (benchmarks/results/composition.json)\n")
    print(composition_table())
    print("\n## Composition, P1 again on held-out seeds\n")
    print(heldout_table())
    print("\n## Composition, P2 latency and P3 search cost\n")
    print(cost_table())


if __name__ == "__main__":
    main()

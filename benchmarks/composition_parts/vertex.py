"""Vertex gap (`--parts vertex`): each parent's vertex of the convex composition against the
parent on its own sampler, paired on fresh seeds (external.py and external_pusht.py use it too)."""

from __future__ import annotations

from robocompose.compare import compare
from robocompose.composition.api import candidate_label, compose

from .shared import paired_entry


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


def store_vertex_gap(results: dict, task: str, gap: dict) -> None:
    """`vertex_gap` beside the task's P1 row; the headline says whether every interval holds 0."""
    results.setdefault("quality", {}).setdefault(task, {})["vertex_gap"] = gap
    gaps = [r["vertex_gap"] for r in results["quality"].values() if "vertex_gap" in r]
    results["vertex_gaps_contain_zero"] = all(g["all_contain_zero"] for g in gaps)

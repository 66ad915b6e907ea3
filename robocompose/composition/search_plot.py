"""The figure of a weight search: success against the weights, each point with its 95% interval
and the number of episodes behind it.

Two parents: success against parent A's weight, the parents alone at w = 1 and 0. More: ranked
bars; three also get the 2-simplex as a heat map. Matplotlib is imported when a figure is drawn.
"""

from __future__ import annotations

import itertools
import math
import os
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from robocompose.composition.weight_search import (
    KIND_COMPOSITION,
    KIND_NATIVE,
    NativeParent,
    SearchResult,
    weights_text,
)

N_NOTE = "n = episodes behind each point"


def _title(result: SearchResult, title: str) -> str:
    """The caller's title, or the task, operator and parents; then what backs each point."""
    if not title and result.provenance:
        letters = (f"{chr(ord('A') + i)} = {name}" for i, name in enumerate(_parent_names(result)))
        title = (
            f"{result.provenance['task']['name']}, {result.provenance['operator']}: "
            + ", ".join(letters)
        )
    depth = (
        f"every point on {result.seeds} seeds"
        if {c.episodes for c in result.candidates} == {result.seeds}
        else f"up to {result.seeds} seeds, pruned candidates on fewer"
    )
    title = textwrap.fill(title or "test-time weight search", 100)
    return f"{title}\n{result.method}: {depth}\n{N_NOTE}"


def _errors(rows: Sequence[dict]) -> list[list[float]]:
    """Asymmetric CI bars in percentage points."""
    return [
        [max(0.0, 100 * (r["success"] - r["ci_low"])) for r in rows],
        [max(0.0, 100 * (r["ci_high"] - r["success"])) for r in rows],
    ]


def _labelled(row: dict) -> str:
    return f"{row['label']} (n={row['episodes']})" if "episodes" in row else row["label"]


def _parent_names(result: SearchResult) -> list[str]:
    given = [p["name"] for p in result.provenance.get("parents", [])]
    return given or [f"parent {chr(ord('A') + i)}" for i in range(len(result.chosen))]


def _weight_axis(ax: Any, result: SearchResult, parents: Sequence[dict]) -> None:
    """K=2: success against parent A's weight, each composition with its CI bar and its n;
    the parents alone at w = 1 and 0 (`parents`, else the search's own native candidates)."""
    composed = [c for c in result.candidates if c.kind == KIND_COMPOSITION]
    rows = sorted((c.row() for c in composed), key=lambda r: r["weights"][0])
    w = [r["weights"][0] for r in rows]
    y = [100 * r["success"] for r in rows]
    if len({r["episodes"] for r in rows}) == 1:  # one n: a curve; across mixed n it would mislead
        ax.plot(w, y, "-", color="tab:blue", alpha=0.4)
    ax.errorbar(w, y, yerr=_errors(rows), fmt="none", ecolor="tab:blue", alpha=0.6, capsize=3)
    most = max(r["episodes"] for r in rows) or 1
    sizes = [15 + 85 * r["episodes"] / most for r in rows]
    ax.scatter(w, y, s=sizes, color="tab:blue", zorder=3, label=f"composed ({result.method})")
    for x, value, r in zip(w, y, rows, strict=True):
        ax.annotate(
            f"n={r['episodes']}",
            (x, value),
            xytext=(0, 7),
            textcoords="offset points",
            ha="center",
            fontsize=6,
        )
    natives = [c for c in result.candidates if isinstance(c.key, NativeParent)]
    if not parents and natives:
        names = _parent_names(result)
        parents = [
            {**c.row(), "label": names[c.key.index]}
            for c in sorted(natives, key=lambda c: c.key.index)
        ]
    for x_pos, parent in zip((1.0, 0.0), parents, strict=False):
        ax.errorbar(
            [x_pos],
            [100 * parent["success"]],
            yerr=_errors([parent]),
            fmt="s",
            ms=9,
            capsize=4,
            label=f"{_labelled(parent)} alone",
        )
    chosen = next(c.row() for c in result.candidates if c.key == result.choice)
    ax.plot(
        [chosen["weights"][0]],
        [100 * chosen["success"]],
        "*",
        ms=16,
        color="gold",
        markeredgecolor="black",
        label="chosen",
        zorder=4,
    )
    ax.set_xlabel("weight w of parent A (parent B gets 1 - w)")
    ax.set_ylabel("success rate (%, 95% CI)")
    ax.set_ylim(-2, 108)


TOP_BARS = 15
LEVEL_COLORS = ("tab:purple", "tab:brown", "tab:gray", "tab:olive", "tab:cyan", "tab:pink")


def _ranked_bars(ax: Any, result: SearchResult) -> None:
    """K>2: the best candidates as bars, best on top, each with its CI bar and its n."""
    ranked = sorted(result.candidates, key=lambda c: (c.rate, c.mean_score), reverse=True)
    rows = [c.row() for c in ranked[:TOP_BARS]][::-1]
    y = list(range(len(rows)))
    chosen = result.chosen_kind, list(result.chosen)
    colors = ["gold" if (r["kind"], r["weights"]) == chosen else "tab:blue" for r in rows]
    ax.barh(
        y,
        [100 * r["success"] for r in rows],
        xerr=_errors(rows),
        color=colors,
        capsize=3,
        edgecolor="black",
        linewidth=0.5,
    )
    for pos, r in zip(y, rows, strict=True):
        ax.annotate(
            f"n={r['episodes']}",
            (100 * r["ci_high"], pos),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=7,
        )
    labels = [
        weights_text(r["weights"]) + (" alone" if r["kind"] == KIND_NATIVE else "") for r in rows
    ]
    ax.set_yticks(y, labels, fontsize=7)
    letters = ", ".join(chr(ord("A") + i) for i in range(len(result.chosen)))
    shown = f"best {len(rows)} of {len(ranked)}" if len(ranked) > len(rows) else "all"
    ax.set_ylabel(f"weights of ({letters}); {shown} candidates, chosen in gold", fontsize=8)
    ax.set_xlabel("success rate (%, 95% CI)")
    ax.set_xlim(0, 115)


def _simplex_xy(weights: Sequence[float]) -> tuple[float, float]:
    """A point of the 2-simplex in the plane: A at (0, 0), B at (1, 0), C at the apex."""
    return weights[1] + weights[2] / 2, weights[2] * math.sqrt(3) / 2


def _triangle(ax: Any, result: SearchResult) -> None:
    """K=3: success over the 2-simplex, one marker per candidate (area grows with its n), a
    heat map between them where every candidate ran the same seeds, the chosen one starred
    (the parents alone are in the ranked bars beside it)."""
    import matplotlib.tri as mtri

    rows = [c.row() for c in result.candidates if c.kind == KIND_COMPOSITION]
    x, y = zip(*(_simplex_xy(r["weights"]) for r in rows), strict=True)
    z = [100 * r["success"] for r in rows]
    style = {"cmap": "viridis", "vmin": 0, "vmax": 100}
    if len({r["episodes"] for r in rows}) == 1 and len(rows) >= 3:  # one n: a heat map
        ax.tripcolor(mtri.Triangulation(x, y), z, shading="gouraud", alpha=0.85, **style)
    most = max(r["episodes"] for r in rows) or 1
    sizes = [10 + 110 * r["episodes"] / most for r in rows]
    points = ax.scatter(x, y, c=z, s=sizes, edgecolors="black", linewidths=0.4, **style)
    ax.figure.colorbar(points, ax=ax, shrink=0.8, label="success rate (%)")
    cx, cy = _simplex_xy(result.chosen)
    ax.plot([cx], [cy], "*", ms=16, color="gold", markeredgecolor="black", label="chosen")
    ax.plot([0, 1, 0.5, 0], [0, 0, math.sqrt(3) / 2, 0], color="black", lw=0.8)
    corners = ((0, 0, "right"), (1, 0, "left"), (0.5, math.sqrt(3) / 2, "center"))
    for i, (name, (vx, vy, align)) in enumerate(zip(_parent_names(result), corners, strict=True)):
        ax.annotate(
            f"{chr(ord('A') + i)} = {name}",
            (vx, vy),
            xytext=(0, -12 if vy == 0 else 6),
            textcoords="offset points",
            ha=align,
            fontsize=7,
        )
    ax.set_title("success over the weights; marker area grows with n", fontsize=8, pad=16)
    ax.set_aspect("equal")
    ax.set_axis_off()
    ax.legend(fontsize=7, loc="upper right")


def search_figure(
    result: SearchResult,
    parents: Sequence[dict] = (),
    title: str = "",
    others: Sequence[dict] = (),
) -> Any:
    """The search's matplotlib figure: a weight axis for two parents, ranked bars for more, and
    for three the 2-simplex as a heat map beside the bars.

    `parents` (K=2: drawn at w = 1 and 0; more: as levels), `others` (e.g. another operator,
    drawn as a dashed level with its interval): rows {"label", "success", "ci_low", "ci_high"
    [, "episodes"]} measured on the same seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    two, three = len(result.chosen) == 2, len(result.chosen) == 3
    if three:  # ranked bars with their intervals, and the simplex as a heat map beside them
        fig, (ax, simplex) = plt.subplots(1, 2, figsize=(13, 5.5))
        _triangle(simplex, result)
    else:
        fig, ax = plt.subplots(figsize=(6.5, 4.5 if two else 5.5))
    if two:
        _weight_axis(ax, result, parents)
    else:
        _ranked_bars(ax, result)
    level = ax.axhline if two else ax.axvline
    band = ax.axhspan if two else ax.axvspan
    alone = [] if two else [{**p, "label": f"{p['label']} alone"} for p in parents]
    for other, color in zip([*alone, *others], itertools.cycle(LEVEL_COLORS), strict=False):
        level(100 * other["success"], ls="--", color=color, label=_labelled(other))
        band(100 * other["ci_low"], 100 * other["ci_high"], color=color, alpha=0.08)
    ax.set_title(_title(result, title), fontsize=8)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def plot_search(
    result: SearchResult,
    path: str | os.PathLike[str],
    parents: Sequence[dict] = (),
    title: str = "",
    others: Sequence[dict] = (),
) -> Path:
    """`search_figure` saved as a PNG at `path`."""
    import matplotlib.pyplot as plt

    fig = search_figure(result, parents, title, others)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)

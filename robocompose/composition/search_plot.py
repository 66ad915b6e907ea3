"""The figure of a search: success against the weights, each point with its 95% interval and the
number of episodes behind it, each searched method in its own colour and marker.

Two parents: success against parent A's weight, the parents alone at w = 1 and 0; a candidate off
the simplex (the product of experts at (1, 1), a parent sharpened at (2, 0)) has no place on that
axis and is a labelled horizontal line at its success. More: ranked bars; three also get the
2-simplex as a heat map. Matplotlib is imported when a figure is drawn.
"""

from __future__ import annotations

import itertools
import math
import os
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from robocompose.composition.methods import method_title, on_simplex
from robocompose.composition.weight_search import (
    KIND_NATIVE,
    Candidate,
    Composed,
    NativeParent,
    SearchResult,
    weights_text,
)

N_NOTE = "n = episodes behind each point"
# per searched method, in the order the pool lists them: colour, marker
METHOD_STYLES = (("tab:blue", "o"), ("tab:green", "D"), ("tab:red", "^"), ("tab:orange", "v"))
NATIVE_COLOR = "tab:gray"  # a parent alone's bar


def _styles(result: SearchResult) -> dict[str, tuple[str, str]]:
    """Each searched method's colour and marker."""
    methods = dict.fromkeys(c.key.operator for c in _composed(result))
    return dict(zip(methods, itertools.cycle(METHOD_STYLES), strict=False))


def _composed(result: SearchResult, operator: str | None = None) -> list[Candidate]:
    """The compositions (of `operator` alone when given), in the pool's order."""
    return [
        c
        for c in result.candidates
        if isinstance(c.key, Composed) and operator in (None, c.key.operator)
    ]


def _title(result: SearchResult, title: str) -> str:
    """The caller's title, or the task, methods and parents; then what backs each point."""
    if not title and result.provenance:
        letters = (f"{chr(ord('A') + i)} = {name}" for i, name in enumerate(_parent_names(result)))
        methods = " + ".join(_styles(result))
        title = f"{result.provenance['task']['name']}, {methods}: " + ", ".join(letters)
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
    """K=2: success against parent A's weight, each method's compositions on the simplex with
    their CI bars and n, those off it as levels; the parents alone at w = 1 and 0 (`parents`,
    else the search's own native candidates)."""
    for operator, (color, marker) in _styles(result).items():
        candidates = _composed(result, operator)
        on = [c for c in candidates if on_simplex(c.weights)]
        if on:
            _weight_points(ax, [c.row() for c in on], color, marker, method_title(operator))
        off = [c for c in candidates if not on_simplex(c.weights)]
        for c, dashes in zip(off, itertools.cycle(LEVEL_DASHES), strict=False):
            chosen = c.key == result.choice
            row = {**c.row(), "label": str(c.key) + (", chosen" if chosen else "")}
            _level(ax, row, color, True, band=0.04, ls=dashes, lw=2.5 if chosen else 1.2)
    natives = [c for c in result.candidates if isinstance(c.key, NativeParent)]
    if not parents and natives:
        names = _parent_names(result)
        parents = [
            {**c.row(), "label": names[c.key.index]}
            for c in sorted(natives, key=lambda c: c.key.index)
        ]
    for x_pos, parent, color in zip((1.0, 0.0), parents, LEVEL_COLORS, strict=False):
        ax.errorbar(
            [x_pos],
            [100 * parent["success"]],
            yerr=_errors([parent]),
            fmt="s",
            ms=9,
            capsize=4,
            color=color,
            label=f"{_labelled(parent)} alone",
        )
    chosen = next(c.row() for c in result.candidates if c.key == result.choice)
    if on_simplex(chosen["weights"]):  # off it, the chosen one's level is drawn bold
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


def _weight_points(ax: Any, rows: list[dict], color: str, marker: str, label: str) -> None:
    """One method's compositions against parent A's weight, each with its CI bar and its n
    (the marker grows with n); a curve through them when they share one n."""
    rows = sorted(rows, key=lambda r: r["weights"][0])
    w = [r["weights"][0] for r in rows]
    y = [100 * r["success"] for r in rows]
    if len({r["episodes"] for r in rows}) == 1:  # one n: a curve; across mixed n it would mislead
        ax.plot(w, y, "-", color=color, alpha=0.4)
    ax.errorbar(w, y, yerr=_errors(rows), fmt="none", ecolor=color, alpha=0.6, capsize=3)
    most = max(r["episodes"] for r in rows) or 1
    sizes = [15 + 85 * r["episodes"] / most for r in rows]
    ax.scatter(w, y, s=sizes, color=color, marker=marker, zorder=3, label=label)
    for x, value, r in zip(w, y, rows, strict=True):
        ax.annotate(
            f"n={r['episodes']}",
            (x, value),
            xytext=(0, 7),
            textcoords="offset points",
            ha="center",
            fontsize=6,
        )


def _level(
    ax: Any, row: dict, color: str, horizontal: bool, band: float = 0.08, **line: Any
) -> None:
    """`row` as a labelled line at its success (horizontal, or vertical beside ranked bars),
    its 95% interval a band around it (of opacity `band`: lighter where several overlap)."""
    level, span = (ax.axhline, ax.axhspan) if horizontal else (ax.axvline, ax.axvspan)
    level(100 * row["success"], color=color, label=_labelled(row), **{"ls": "--", **line})
    span(100 * row["ci_low"], 100 * row["ci_high"], color=color, alpha=band)


TOP_BARS = 15
LEVEL_COLORS = ("tab:purple", "tab:brown", "tab:gray", "tab:olive", "tab:cyan", "tab:pink")
LEVEL_DASHES = ("--", ":", "-.")  # one method's candidates off the simplex, one after another


def _ranked_bars(ax: Any, result: SearchResult) -> None:
    """K>2: the best candidates as bars, best on top, each with its CI bar and its n; a colour
    per method (a parent alone grey), the chosen one gold."""
    ranked = sorted(result.candidates, key=lambda c: (c.rate, c.mean_score), reverse=True)
    shown = ranked[:TOP_BARS][::-1]
    rows = [c.row() for c in shown]
    for label, (color, positions) in _bar_groups(result, shown).items():
        ax.barh(
            positions,
            [100 * rows[p]["success"] for p in positions],
            xerr=_errors([rows[p] for p in positions]),
            color=color,
            capsize=3,
            edgecolor="black",
            linewidth=0.5,
            label=label,
        )
    for pos, r in enumerate(rows):
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
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    letters = ", ".join(chr(ord("A") + i) for i in range(len(result.chosen)))
    what = f"best {len(rows)} of {len(ranked)}" if len(ranked) > len(rows) else "all"
    ax.set_ylabel(f"weights of ({letters}); {what} candidates, chosen in gold", fontsize=8)
    ax.set_xlabel("success rate (%, 95% CI)")
    ax.set_xlim(0, 115)


def _bar_groups(
    result: SearchResult, shown: Sequence[Candidate]
) -> dict[str, tuple[str, list[int]]]:
    """The bars' legend entries: label -> (colour, positions in `shown`)."""
    styles, groups = _styles(result), {}
    for pos, c in enumerate(shown):
        if c.key == result.choice:
            label, color = "chosen", "gold"
        elif isinstance(c.key, NativeParent):
            label, color = "parent alone", NATIVE_COLOR
        else:
            label, color = method_title(c.key.operator), styles[c.key.operator][0]
        groups.setdefault(label, (color, []))[1].append(pos)
    return groups


def _simplex_xy(weights: Sequence[float]) -> tuple[float, float]:
    """A point of the 2-simplex in the plane: A at (0, 0), B at (1, 0), C at the apex."""
    return weights[1] + weights[2] / 2, weights[2] * math.sqrt(3) / 2


def _triangle(ax: Any, result: SearchResult) -> None:
    """K=3: success over the 2-simplex, one marker per composition on it (its method's shape,
    area growing with its n), a heat map between them where one method's candidates all ran
    the same seeds, the chosen one starred when it lies on the simplex (the parents alone and
    the candidates off it are in the ranked bars beside it)."""
    import matplotlib.tri as mtri

    style, styles = {"cmap": "viridis", "vmin": 0, "vmax": 100}, _styles(result)
    on = {
        operator: [c.row() for c in _composed(result, operator) if on_simplex(c.weights)]
        for operator in styles
    }
    on = {operator: rows for operator, rows in on.items() if rows}
    every = [r for rows in on.values() for r in rows]
    most = max(r["episodes"] for r in every) or 1
    for operator, rows in on.items():
        x, y = zip(*(_simplex_xy(r["weights"]) for r in rows), strict=True)
        z = [100 * r["success"] for r in rows]
        one_n = len({r["episodes"] for r in rows}) == 1
        if len(on) == 1 and one_n and len(rows) >= 3:  # one method, one n: a heat map
            ax.tripcolor(mtri.Triangulation(x, y), z, shading="gouraud", alpha=0.85, **style)
        sizes = [10 + 110 * r["episodes"] / most for r in rows]
        points = ax.scatter(
            x,
            y,
            c=z,
            s=sizes,
            marker=styles[operator][1],
            edgecolors="black",
            linewidths=0.4,
            label=method_title(operator),
            **style,
        )
    ax.figure.colorbar(points, ax=ax, shrink=0.8, label="success rate (%)")
    if on_simplex(result.chosen):
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


def search_figure(result: SearchResult, parents: Sequence[dict] = (), title: str = "") -> Any:
    """The search's matplotlib figure: a weight axis for two parents, ranked bars for more, and
    for three the 2-simplex as a heat map beside the bars (when compositions lie on it).

    `parents` (K=2: drawn at w = 1 and 0; more: as levels): rows {"label", "success",
    "ci_low", "ci_high" [, "episodes"]} measured on the same seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    two = len(result.chosen) == 2
    three = len(result.chosen) == 3 and any(on_simplex(c.weights) for c in _composed(result))
    if three:  # ranked bars with their intervals, and the simplex as a heat map beside them
        fig, (ax, simplex) = plt.subplots(1, 2, figsize=(13, 5.5))
        _triangle(simplex, result)
    else:
        fig, ax = plt.subplots(figsize=(6.5, 4.5 if two else 5.5))
    if two:
        _weight_axis(ax, result, parents)
    else:
        _ranked_bars(ax, result)
        alone = [{**p, "label": f"{p['label']} alone"} for p in parents]
        for row, color in zip(alone, itertools.cycle(LEVEL_COLORS), strict=False):
            _level(ax, row, color, False)
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
) -> Path:
    """`search_figure` saved as a PNG at `path`."""
    import matplotlib.pyplot as plt

    fig = search_figure(result, parents, title)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)

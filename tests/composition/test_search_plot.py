"""The search plot names the task and the parents, shows each point's episode count (successive
halving leaves pruned candidates on fewer seeds) and its 95% interval; more than two parents
get ranked bars, and three the 2-simplex as a heat map beside them."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from matplotlib.collections import LineCollection, PathCollection, TriMesh
from matplotlib.container import BarContainer

from robocompose.composition.search_plot import N_NOTE, plot_search, search_figure
from robocompose.composition.weight_search import (
    Candidate,
    Composed,
    NativeParent,
    SearchResult,
    simplex_grid,
)

PROVENANCE = {
    "task": {"name": "Stack", "env_id": "robocompose/Stack-v0"},
    "parents": [
        {"name": "Stack_diffusion_mlp", "path": None, "fingerprint": "a"},
        {"name": "Stack_flow_mlp", "path": None, "fingerprint": "b"},
    ],
    "operator": "convex",
}


def _convex(weights) -> Composed:
    return Composed("convex", weights)


def _curves(ax) -> list:
    """Lines drawn through more than one point (an errorbar's caps are markers, no line)."""
    return [
        line for line in ax.lines if len(line.get_xdata()) > 1 and line.get_linestyle() != "None"
    ]


def _halving_result() -> SearchResult:
    """Three candidates as successive halving leaves them: the winner on 8 seeds, losers on 4."""
    candidates = [
        Candidate(_convex((0.0, 1.0)), successes=2, episodes=4, mean_score=0.5),
        Candidate(_convex((0.5, 0.5)), successes=7, episodes=8, mean_score=0.9),
        Candidate(_convex((1.0, 0.0)), successes=1, episodes=4, mean_score=0.3),
    ]
    chosen = _convex((0.5, 0.5))
    return SearchResult("successive_halving", candidates, chosen, 16, 8, provenance=PROVENANCE)


def test_two_parents_title_names_them_and_every_point_shows_its_n(tmp_path: Path) -> None:
    fig = search_figure(_halving_result())
    ax = fig.axes[0]
    title = ax.get_title()
    assert title.startswith("Stack, convex: A = Stack_diffusion_mlp, B = Stack_flow_mlp")
    assert "pruned candidates on fewer" in title and N_NOTE in title
    notes = sorted(t.get_text() for t in ax.texts)
    assert notes == ["n=4", "n=4", "n=8"]
    points = next(c for c in ax.collections if isinstance(c, PathCollection))
    sizes = dict(zip((0.0, 0.5, 1.0), points.get_sizes(), strict=True))
    assert sizes[0.5] > sizes[0.0] == sizes[1.0]  # marker size grows with n
    bars = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert len(bars) == 1 and len(bars[0].get_segments()) == 3  # one CI bar per candidate
    assert _curves(ax) == []  # points on different n are not joined into a curve
    plt.close(fig)
    assert plot_search(_halving_result(), tmp_path / "s.png").stat().st_size > 1000


def test_the_callers_title_stays_and_a_grid_is_one_curve() -> None:
    grid = [Candidate(_convex(w), successes=3, episodes=5) for w in simplex_grid(2, 0.5)]
    result = SearchResult("grid", grid, _convex((0.0, 1.0)), 15, 5)
    fig = search_figure(result, title="my title")
    title = fig.axes[0].get_title()
    assert title.splitlines() == ["my title", "grid: every point on 5 seeds", N_NOTE]
    assert [len(line.get_xdata()) for line in _curves(fig.axes[0])] == [3]
    plt.close(fig)


def test_three_parents_get_ranked_bars_with_their_n() -> None:
    weights = simplex_grid(3, 0.25)
    candidates = [
        Candidate(_convex(w), successes=i % 6, episodes=5 + i % 3) for i, w in enumerate(weights)
    ]
    provenance = {
        **PROVENANCE,
        "parents": [*PROVENANCE["parents"], {"name": "Stack_flow_mlp_b", "path": None}],
    }
    best = max(candidates, key=lambda c: (c.rate, c.mean_score))
    result = SearchResult("grid", candidates, best.key, 100, 7, provenance=provenance)
    alone = {"label": "Stack_flow_mlp", "success": 0.6, "ci_low": 0.3, "ci_high": 0.85}
    fig = search_figure(result, parents=[{**alone, "episodes": 10}])
    ax = fig.axes[0]
    assert "C = Stack_flow_mlp_b" in ax.get_title()
    legend = ["GPC convex", "chosen", "Stack_flow_mlp alone (n=10)"]
    assert sorted(ax.get_legend_handles_labels()[1]) == sorted(legend)
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert sum(len(b.patches) for b in bars) == len(weights) == 15  # every candidate a bar
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[-1] == "(" + ", ".join(f"{x:.2f}" for x in best.weights) + ")"  # best on top
    assert {t.get_text() for t in ax.texts} == {f"n={c.episodes}" for c in candidates}
    plt.close(fig)


def _simplex_axis(result: SearchResult):
    fig = search_figure(result)
    return fig, fig.axes[1]  # ranked bars, then the simplex (then its colour bar)


def test_three_parents_get_the_simplex_as_a_heat_map_with_the_chosen_starred() -> None:
    weights = simplex_grid(3, 0.25)
    candidates = [Candidate(_convex(w), successes=i % 6, episodes=5) for i, w in enumerate(weights)]
    chosen = _convex((0.25, 0.25, 0.5))
    provenance = {
        **PROVENANCE,
        "parents": [*PROVENANCE["parents"], {"name": "Stack_flow_mlp_b", "path": None}],
    }
    grid = SearchResult("grid", candidates, chosen, 75, 5, provenance=provenance)
    fig, ax = _simplex_axis(grid)
    assert any(isinstance(c, TriMesh) for c in ax.collections)  # one n: a heat map
    points = next(c for c in ax.collections if isinstance(c, PathCollection))
    assert len(points.get_offsets()) == len(weights)
    star = next(line for line in ax.lines if line.get_marker() == "*")
    x, y = star.get_xdata()[0], star.get_ydata()[0]
    assert (x, y) == pytest.approx((0.25 + 0.5 / 2, 0.5 * math.sqrt(3) / 2))
    corners = {t.get_text() for t in ax.texts}
    assert corners == {"A = Stack_diffusion_mlp", "B = Stack_flow_mlp", "C = Stack_flow_mlp_b"}
    plt.close(fig)

    pruned = [
        Candidate(_convex(w), successes=1, episodes=5 if w == chosen.weights else 2)
        for w in weights
    ]
    halving = SearchResult("successive_halving", pruned, chosen, 33, 5, provenance=provenance)
    fig, ax = _simplex_axis(halving)
    assert not any(isinstance(c, TriMesh) for c in ax.collections)  # mixed n: no smoothing
    sizes = next(c for c in ax.collections if isinstance(c, PathCollection)).get_sizes()
    assert max(sizes) == sizes[weights.index(chosen.weights)] > min(sizes)
    plt.close(fig)


def _two_methods(chosen: Composed | NativeParent) -> SearchResult:
    """Both parents alone, three convex weights and the weighted sum's three points off the
    simplex, as a search of both methods leaves them."""
    rates = {
        NativeParent(0, 2): 4,
        NativeParent(1, 2): 5,
        _convex((0.0, 1.0)): 5,
        _convex((0.5, 0.5)): 6,
        _convex((1.0, 0.0)): 4,
        Composed("weighted_sum", (1.0, 1.0)): 8,
        Composed("weighted_sum", (2.0, 0.0)): 3,
        Composed("weighted_sum", (0.0, 2.0)): 6,
    }
    candidates = [Candidate(key, successes=n, episodes=10) for key, n in rates.items()]
    return SearchResult("grid", candidates, chosen, 80, 10, provenance=PROVENANCE)


def test_each_method_has_its_colour_and_points_off_the_simplex_are_levels() -> None:
    """Two parents: the convex weights are points on the weight axis; the product of experts
    and the sharpened sums have no weight there and are labelled horizontal lines, the chosen
    one bold (and no star, which would sit at a weight it does not have)."""
    product = Composed("weighted_sum", (1.0, 1.0))
    fig = search_figure(_two_methods(product))
    ax = fig.axes[0]
    assert ax.get_title().startswith("Stack, convex + weighted_sum: A = Stack_diffusion_mlp")
    labels = ax.get_legend_handles_labels()[1]
    assert "GPC convex" in labels
    levels = [line for line in ax.lines if line.get_label().startswith("product of experts")]
    assert [line.get_label() for line in levels] == [
        "product of experts at weights (1.00, 1.00), chosen (n=10)",
        "product of experts at weights (2.00, 0.00) (n=10)",
        "product of experts at weights (0.00, 2.00) (n=10)",
    ]
    assert [line.get_ydata()[0] for line in levels] == [80.0, 30.0, 60.0]  # at their success
    assert levels[0].get_linewidth() > levels[1].get_linewidth()
    assert not any(line.get_marker() == "*" for line in ax.lines)
    convex = next(c for c in ax.collections if c.get_label() == "GPC convex")
    assert len(convex.get_offsets()) == 3  # only the convex weights are points on the axis
    plt.close(fig)

    fig = search_figure(_two_methods(_convex((0.5, 0.5))))
    star = next(line for line in fig.axes[0].lines if line.get_marker() == "*")
    assert (star.get_xdata()[0], star.get_ydata()[0]) == (0.5, 60.0)
    plt.close(fig)


def test_three_parents_colour_the_bars_by_method_and_star_only_on_the_simplex() -> None:
    weights = simplex_grid(3, 0.5)
    convex = [Candidate(_convex(w), successes=2, episodes=5) for w in weights]
    product = Candidate(Composed("weighted_sum", (1.0, 1.0, 1.0)), successes=5, episodes=5)
    provenance = {
        **PROVENANCE,
        "parents": [*PROVENANCE["parents"], {"name": "Stack_flow_mlp_b", "path": None}],
    }
    result = SearchResult("grid", [*convex, product], product.key, 35, 5, provenance=provenance)
    fig, simplex = _simplex_axis(result)
    bars = fig.axes[0]
    assert sorted(bars.get_legend_handles_labels()[1]) == ["GPC convex", "chosen"]
    gold = next(c for c in bars.containers if c.get_label() == "chosen")
    assert len(gold.patches) == 1 and gold.patches[0].get_width() == 100.0
    assert not any(line.get_marker() == "*" for line in simplex.lines)  # (1, 1, 1) is off it
    points = next(c for c in simplex.collections if isinstance(c, PathCollection))
    assert len(points.get_offsets()) == len(weights)
    plt.close(fig)

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
from robocompose.composition.weight_search import Candidate, SearchResult, simplex_grid

PROVENANCE = {
    "task": {"name": "Stack", "env_id": "robocompose/Stack-v0"},
    "parents": [
        {"name": "Stack_diffusion_mlp", "path": None, "fingerprint": "a"},
        {"name": "Stack_flow_mlp", "path": None, "fingerprint": "b"},
    ],
    "operator": "convex",
}


def _curves(ax) -> list:
    """Lines drawn through more than one point (an errorbar's caps are markers, no line)."""
    return [
        line for line in ax.lines if len(line.get_xdata()) > 1 and line.get_linestyle() != "None"
    ]


def _halving_result() -> SearchResult:
    """Three candidates as successive halving leaves them: the winner on 8 seeds, losers on 4."""
    candidates = [
        Candidate((0.0, 1.0), successes=2, episodes=4, mean_score=0.5),
        Candidate((0.5, 0.5), successes=7, episodes=8, mean_score=0.9),
        Candidate((1.0, 0.0), successes=1, episodes=4, mean_score=0.3),
    ]
    return SearchResult("successive_halving", candidates, (0.5, 0.5), 16, 8, provenance=PROVENANCE)


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
    grid = [Candidate(w, successes=3, episodes=5) for w in simplex_grid(2, 0.5)]
    result = SearchResult("grid", grid, (0.0, 1.0), 15, 5)
    fig = search_figure(result, title="my title")
    title = fig.axes[0].get_title()
    assert title.splitlines() == ["my title", "grid: every point on 5 seeds", N_NOTE]
    assert [len(line.get_xdata()) for line in _curves(fig.axes[0])] == [3]
    plt.close(fig)


def test_three_parents_get_ranked_bars_with_their_n() -> None:
    weights = simplex_grid(3, 0.25)
    candidates = [Candidate(w, successes=i % 6, episodes=5 + i % 3) for i, w in enumerate(weights)]
    provenance = {
        **PROVENANCE,
        "parents": [*PROVENANCE["parents"], {"name": "Stack_flow_mlp_b", "path": None}],
    }
    best = max(candidates, key=lambda c: (c.rate, c.mean_score))
    result = SearchResult("grid", candidates, best.weights, 100, 7, provenance=provenance)
    alone = {"label": "Stack_flow_mlp", "success": 0.6, "ci_low": 0.3, "ci_high": 0.85}
    fig = search_figure(result, parents=[{**alone, "episodes": 10}])
    ax = fig.axes[0]
    assert "C = Stack_flow_mlp_b" in ax.get_title()
    assert ax.get_legend_handles_labels()[1] == ["Stack_flow_mlp alone (n=10)"]
    bars = next(c for c in ax.containers if isinstance(c, BarContainer))
    assert len(bars.patches) == len(weights) == 15  # every candidate a bar
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[-1] == "(" + ", ".join(f"{x:.2f}" for x in best.weights) + ")"  # best on top
    assert {t.get_text() for t in ax.texts} == {f"n={c.episodes}" for c in candidates}
    plt.close(fig)


def _simplex_axis(result: SearchResult):
    fig = search_figure(result)
    return fig, fig.axes[1]  # ranked bars, then the simplex (then its colour bar)


def test_three_parents_get_the_simplex_as_a_heat_map_with_the_chosen_starred() -> None:
    weights = simplex_grid(3, 0.25)
    candidates = [Candidate(w, successes=i % 6, episodes=5) for i, w in enumerate(weights)]
    chosen = (0.25, 0.25, 0.5)
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

    pruned = [Candidate(w, successes=1, episodes=5 if w == chosen else 2) for w in weights]
    halving = SearchResult("successive_halving", pruned, chosen, 33, 5, provenance=provenance)
    fig, ax = _simplex_axis(halving)
    assert not any(isinstance(c, TriMesh) for c in ax.collections)  # mixed n: no smoothing
    sizes = next(c for c in ax.collections if isinstance(c, PathCollection)).get_sizes()
    assert max(sizes) == sizes[weights.index(chosen)] > min(sizes)
    plt.close(fig)

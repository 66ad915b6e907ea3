"""The episode table: one line per row, a row torn by a kill is dropped, another sweep's table is
refused; the summary's intervals are Wilson's; one plot per axis, categories never joined."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from matplotlib.collections import LineCollection

from robocompose.config import ConfigError
from robocompose.stats import success_rate
from robocompose.sweep.table import EpisodeTable, axis_figure, plot_axes, summary

AXES = ["composition", "composition.steps"]


def _row(op: str, steps: str, seed: int, success: bool, error: str | None = None) -> dict:
    return {
        "composition": op,
        "composition.steps": steps,
        "episode_seed": seed,
        "success": success,
        "score": 1.0 if success else 0.25,
        "return": 3.0,
        "length": 40,
        "error": error,
        "elapsed_s": 0.1,
    }


def test_rows_survive_a_torn_write_and_other_columns_are_refused(tmp_path: Path) -> None:
    table = EpisodeTable(tmp_path / "episodes.csv", AXES)
    table.append([_row("convex", "4", 1, True), _row("or", "4", 1, False, "boom\nat step 3")])
    with table.path.open("a") as f:
        f.write("convex,8,2,Tr")  # the kill landed mid-row
    rows = table.read()
    assert [(r["composition"], r["error"]) for r in rows] == [
        ("convex", ""),
        ("or", "boom at step 3"),
    ]
    assert table.path.read_text().count("\n") == 3  # header + 2 rows, the torn one cut off
    table.append([_row("convex", "8", 2, True)])
    assert len(table.read()) == 3
    with pytest.raises(ConfigError, match="set another sweep.dir"):
        EpisodeTable(table.path, ["composition"]).read()
    with pytest.raises(ConfigError, match="may not be named"):
        EpisodeTable(table.path, ["success"])


def test_summary_pools_each_cell_with_wilson_intervals(tmp_path: Path) -> None:
    table = EpisodeTable(tmp_path / "episodes.csv", AXES)
    table.append(
        [_row("convex", "4", s, s < 3) for s in range(4)]
        + [_row("convex", "8", s, True) for s in range(4)]
        + [_row("or", "4", s, s < 1) for s in range(4)]
    )
    rows = table.read()
    text = summary(rows, AXES, {("merge", "4"): "parameter merge needs one architecture"})
    lines = text.splitlines()
    three = success_rate(3, 4)
    header = "| composition | composition.steps | success [95% CI] | episodes | mean score |"
    assert lines[0] == header
    assert lines[2] == (
        f"| convex | 4 | 75.0% [{100 * three.ci_low:.1f}, {100 * three.ci_high:.1f}] | 4 | 0.812 |"
    )
    assert lines[-1].startswith("| merge | 4 | skipped: parameter merge needs one architecture")
    plots = plot_axes(rows, AXES, tmp_path / "plots")
    assert [p.name for p in plots] == ["composition.png", "composition.steps.png"]
    assert all(p.stat().st_size > 1000 for p in plots)


def _joined(ax) -> list:
    """Lines drawn through more than one point (an errorbar's caps are markers, no line)."""
    return [
        line for line in ax.lines if len(line.get_xdata()) > 1 and line.get_linestyle() != "None"
    ]


def test_categorical_axes_are_points_and_numeric_axes_are_lines() -> None:
    rows = [
        _row(op, steps, s, s < k)
        for op, k in (("convex", 3), ("or", 1), ("weighted_sum", 2))
        for steps in ("4", "8", "16")
        for s in range(4)
    ]
    operators = axis_figure(rows, AXES, "composition", context="Stack: A = a, B = b")
    ax = operators.axes[0]
    assert _joined(ax) == []  # convex, or, weighted_sum: nothing between them to draw
    assert [t.get_text() for t in ax.get_xticklabels()] == ["convex", "or", "weighted_sum"]
    bars = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert sum(len(c.get_segments()) for c in bars) == 9  # a CI bar per (operator, steps)
    assert ax.get_title().startswith("Stack: A = a, B = b\nsuccess against composition")
    steps = axis_figure(rows, AXES, "composition.steps").axes[0]
    assert [list(line.get_xdata()) for line in _joined(steps)] != []
    assert all(len(line.get_xdata()) == 3 for line in _joined(steps))  # one line per operator
    weights = [{**r, "composition": f"[{s / 4},{1 - s / 4}]"} for r in rows for s in (0, 4)]
    assert _joined(axis_figure(weights, AXES, "composition").axes[0]) == []  # weight lists
    plt.close("all")

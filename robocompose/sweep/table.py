"""The sweep's one tidy table (a CSV, one row per episode) and what is read off it: a markdown
summary per cell and one plot per axis. Rows are episode records (`robocompose.records`), pooled
and formatted by that module.

Rows are appended and fsynced as each task's episodes come back, so a killed sweep keeps every
finished task; a row cut short by the kill is dropped when the table is next opened.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from robocompose.config import ConfigError
from robocompose.records import Group, group

OUTCOME = ("episode_seed", "success", "score", "return", "length", "error", "elapsed_s")


class EpisodeTable:
    """`path` with columns: one per axis (the cell's override values), then OUTCOME."""

    def __init__(self, path: str | os.PathLike[str], axes: Sequence[str]) -> None:
        self.path = Path(path)
        self.axes = list(axes)
        self.columns = [*self.axes, *OUTCOME]
        clash = set(self.axes) & set(OUTCOME)
        if clash:
            raise ConfigError(f"sweep axes may not be named {sorted(clash)} (table columns).")

    def read(self) -> list[dict[str, str]]:
        """Every complete row; drops a last line cut short by a kill, refuses other columns."""
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            data = data[: data.rfind(b"\n") + 1]
            with self.path.open("r+b") as f:
                f.truncate(len(data))
        reader = csv.DictReader(io.StringIO(data.decode("utf-8")))
        if reader.fieldnames is not None and list(reader.fieldnames) != self.columns:
            raise ConfigError(
                f"{self.path} holds a sweep with columns {reader.fieldnames}, this sweep has "
                f"{self.columns}; set another sweep.dir (or sweep.name)."
            )
        return list(reader)

    def append(self, rows: Iterable[dict[str, Any]]) -> None:
        """Write `rows` (one line each) and fsync; the header first if the file is new."""
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, self.columns, lineterminator="\n")
        if not self.path.exists() or self.path.stat().st_size == 0:
            writer.writeheader()
        for row in rows:
            writer.writerow({k: _one_line(row[k]) for k in self.columns})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(buffer.getvalue())
            f.flush()
            os.fsync(f.fileno())


def _one_line(value: Any) -> Any:
    """One row = one line, so a torn write is always the last line (error texts can hold \\n)."""
    if value is None:
        return ""
    return " ".join(value.split()) if isinstance(value, str) else value


def summary(
    rows: Sequence[dict[str, str]], axes: Sequence[str], skipped: dict[tuple[str, ...], str]
) -> str:
    """The markdown table: one line per cell (mean success, Wilson 95% CI, episodes, score)."""
    lines = [
        "| " + " | ".join([*axes, "success [95% CI]", "episodes", "mean score"]) + " |",
        "|" + "---|" * (len(axes) + 3),
    ]
    for g in group(rows, axes):
        values = [*g.key, g.cell(), str(g.rate.episodes), f"{g.mean_score:.3f}"]
        lines.append("| " + " | ".join(values) + " |")
    for key, reason in skipped.items():
        lines.append("| " + " | ".join([*key, f"skipped: {reason}", "0", ""]) + " |")
    return "\n".join(lines)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def axis_figure(
    rows: Sequence[dict[str, str]], axes: Sequence[str], axis: str, context: str = ""
) -> Any:
    """Success (95% CI bars) against `axis`, pooled over the other axes, one series per value of
    the next axis. Numeric values sit on a numeric axis joined by lines; other values (operator
    or sampler names, weight lists) are categories: points with their bars, never joined."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    others = [a for a in axes if a != axis]
    hue = others[:1]
    order = list(dict.fromkeys(r[axis] for r in rows))
    numbers = [_number(v) for v in order]
    numeric = all(n is not None for n in numbers)
    position = {
        v: (n if numeric else i) for i, (v, n) in enumerate(zip(order, numbers, strict=True))
    }
    fig, ax = plt.subplots(figsize=(6, 4))
    series: dict[tuple[str, ...], list[Group]] = {}
    for g in group(rows, [*hue, axis]):
        series.setdefault(g.key[:-1], []).append(g)
    span = (max(position.values()) - min(position.values())) or 1.0
    step = 0.3 * span / max(1, len(order) - 1) / max(1, len(series))  # dodge: none hides another
    for j, (key, groups) in enumerate(series.items()):
        groups.sort(key=lambda g: position[g.key[-1]])
        shift = (j - (len(series) - 1) / 2) * step
        x = [position[g.key[-1]] + shift for g in groups]
        y = [100 * g.rate.rate for g in groups]
        err = [
            [max(0.0, 100 * (g.rate.rate - g.rate.ci_low)) for g in groups],
            [max(0.0, 100 * (g.rate.ci_high - g.rate.rate)) for g in groups],
        ]
        label = f"{hue[0]}={key[0]}" if hue else "all cells"
        ax.errorbar(x, y, yerr=err, fmt="o-" if numeric else "o", capsize=4, label=label)
    if not numeric:
        ax.set_xticks(range(len(order)), order, rotation=20 if len(order) > 4 else 0)
        ax.set_xlim(-0.5, len(order) - 0.5)
    pooled = f" (pooled over {', '.join(others[1:])})" if len(others) > 1 else ""
    title = f"success against {axis}{pooled}"
    ax.set_title(f"{textwrap.fill(context, 90)}\n{title}" if context else title, fontsize=9)
    ax.set_xlabel(axis)
    ax.set_ylabel("success rate (%, 95% CI)")
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def plot_axes(
    rows: Sequence[dict[str, str]],
    axes: Sequence[str],
    folder: str | os.PathLike[str],
    context: str = "",
) -> list[Path]:
    """`axis_figure` for every axis, saved as <folder>/<axis>.png; `context` (e.g. the task and
    the parents) heads every title."""
    import matplotlib.pyplot as plt

    paths: list[Path] = []
    if not rows:
        return paths
    for axis in axes:
        fig = axis_figure(rows, axes, axis, context)
        path = Path(folder) / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', axis)}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths

"""`robocompose replay LOG`: plots and a summary of a deploy step log
(`robocompose.real_robot.replay`).

Light to import (the command line reads `ReplayConfig` for `--help`); `run` imports matplotlib.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(kw_only=True)
class ReplayConfig:
    """`robocompose replay`: which step log, where the plots go, which episode to plot."""

    log: str
    out: str | None = None  # plots folder; None: <the log's folder>/plots
    seed: int | None = None  # the episode to plot; None: the first in the log


def run(config: ReplayConfig) -> tuple[str, list[Path]]:
    """Print the summary and the plots written; returns both."""
    from robocompose.real_robot.replay import format_summary, plot, read_log, summarize

    lines = read_log(config.log)
    out = Path(config.out) if config.out else Path(config.log).parent / "plots"
    text, plots = format_summary(summarize(lines)), plot(lines, out, config.seed)
    print(text)
    for path in plots:
        print(f"plot: {path}")
    return text, plots

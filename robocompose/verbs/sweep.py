"""`robocompose sweep`: a grid of compositions (`robocompose.sweep`); prints the summary and
where the table and plots went.

Light to import (the command line builds the grid with `robocompose.sweep.config.plan`); `run`
imports the engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from robocompose.sweep.config import SweepPlan
    from robocompose.sweep.run import SweepReport


def run(sweep_plan: SweepPlan, progress: bool = True) -> SweepReport:
    """Run (or resume) the sweep, then print its summary, table and plots."""
    from robocompose.sweep.run import run_sweep

    report = run_sweep(sweep_plan, progress)
    print(f"\n{report.summary}\n")
    print(f"table: {report.table} ({report.rows} episodes, {report.ran} run now)")
    for path in report.plots:
        print(f"plot: {path}")
    return report

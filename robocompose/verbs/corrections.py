"""`robocompose corrections LOG ...`: correction logs of plan runs as training pairs (state,
instruction, corrected call) and the corrected plans `plan correction_logs=[...]` puts in the
planner's prompt (`robocompose.hierarchical.run.correction_bank.run_corrections`); prints the
summary."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from robocompose.hierarchical.run.correction_bank import CorrectionsConfig


def run(config: CorrectionsConfig) -> str:
    from robocompose.hierarchical.run.correction_bank import run_corrections

    summary = run_corrections(config)
    print(summary)
    return summary

"""`robocompose report RUN`: a training run's curves as one PNG
(`robocompose.policies.train_curves`).

Light to import (the command line reads `ReportConfig` for `--help`); `run` imports matplotlib.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(kw_only=True)
class ReportConfig:
    """`robocompose report`: which run folder, where the PNG goes."""

    run: str  # a `robocompose train` out folder
    out: str | None = None  # the PNG; None: <run>/curves.png


def run(config: ReportConfig) -> Path:
    """Write the report and print where it went."""
    from robocompose.policies.train_curves import write_report

    out = write_report(Path(config.run), Path(config.out) if config.out else None)
    print(f"plot: {out}")
    return out

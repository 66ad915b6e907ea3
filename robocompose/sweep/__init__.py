"""Ablation sweeps: a grid of compositions from Hydra configs, every episode a row of one table,
run here or on Ray, summarised as a markdown table and one plot per axis.

Where things are: `config.py` (the sweep's config and its grid of cells: `plan(overrides)`),
`run.py` (the engine of the `sweep` verb: `run_sweep(plan)` runs the cells' missing episodes,
as tasks of `robocompose.launch`, here or on Ray, and summarises), `table.py` (the episode
table, summary, plots), `describe.py` (what the cells share, for the summary and plots). The
verb is `robocompose.verbs.sweep`.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> its module, imported on first use: running a sweep loads torch, its config does not
_EXPORTS = {
    "SweepConfig": "config",
    "plan": "config",
    "SweepReport": "run",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)

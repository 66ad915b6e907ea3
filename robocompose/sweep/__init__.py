"""Ablation sweeps: a grid of compositions from Hydra configs, every episode a row of one table,
run here or on Ray, summarised as a markdown table and one plot per axis."""

from __future__ import annotations

import importlib
from typing import Any

# name -> its module, imported on first use: running a sweep loads torch, its config does not
_EXPORTS = {
    "SweepConfig": "config",
    "plan": "config",
    "SweepReport": "run",
    "run_sweep": "run",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)

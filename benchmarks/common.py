"""Paths the benchmarks share."""

from __future__ import annotations

from pathlib import Path

from robocompose.shipped import CHECKPOINTS, shipped_checkpoints

ROOT = CHECKPOINTS.parent
RESULTS = Path(__file__).resolve().parent / "results"

__all__ = ["CHECKPOINTS", "RESULTS", "ROOT", "shipped_checkpoints"]

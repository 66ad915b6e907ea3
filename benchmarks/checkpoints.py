"""The shipped checkpoints: where they live and how to list them (shared by the benchmarks)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINTS = ROOT / "checkpoints"
RESULTS = Path(__file__).resolve().parent / "results"


def shipped_checkpoints() -> list[Path]:
    """Every folder under checkpoints/ that holds a config.json, sorted by name."""
    return sorted(p.parent for p in CHECKPOINTS.glob("*/config.json"))

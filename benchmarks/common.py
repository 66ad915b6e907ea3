"""Paths and timing the benchmarks share."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from robocompose.shipped import CHECKPOINTS, shipped_checkpoints

ROOT = CHECKPOINTS.parent
RESULTS = Path(__file__).resolve().parent / "results"

__all__ = ["CHECKPOINTS", "RESULTS", "ROOT", "median_ms", "shipped_checkpoints"]


def median_ms(fn: Callable[[], Any], repeats: int, warmup: int = 0) -> float:
    """Median wall milliseconds of `fn()` over `repeats` calls, after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times)

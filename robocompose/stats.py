"""Success-rate statistics shared by evaluation, search and benchmarks."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

Z_95 = 1.959963984540054


@dataclass(frozen=True)
class SuccessRate:
    """A success rate with its episode count and Wilson 95% interval."""

    successes: int
    episodes: int
    rate: float
    ci_low: float
    ci_high: float

    def __str__(self) -> str:
        return self.format()

    def format(self, episodes: bool = True) -> str:
        """The one way a rate is printed: "63.0% [53.2, 71.8] (n=100)"; without the "(n=...)"
        where a table gives the episodes a column of their own."""
        text = f"{100 * self.rate:.1f}% [{100 * self.ci_low:.1f}, {100 * self.ci_high:.1f}]"
        return f"{text} (n={self.episodes})" if episodes else text


def wilson_interval(successes: int, episodes: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval; unlike the normal approximation it stays inside [0, 1] at 0 or n."""
    if episodes <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= episodes:
        raise ValueError(f"`successes` must be in [0, episodes={episodes}]. Got {successes}.")
    p = successes / episodes
    denom = 1 + z**2 / episodes
    centre = (p + z**2 / (2 * episodes)) / denom
    half = z * math.sqrt(p * (1 - p) / episodes + z**2 / (4 * episodes**2)) / denom
    low = 0.0 if successes == 0 else max(0.0, centre - half)  # exact ends, no float dust
    high = 1.0 if successes == episodes else min(1.0, centre + half)
    return low, high


def success_rate(successes: int, episodes: int) -> SuccessRate:
    low, high = wilson_interval(successes, episodes)
    rate = successes / episodes if episodes else 0.0
    return SuccessRate(successes, episodes, rate, low, high)


@dataclass(frozen=True)
class PairedOutcomes:
    """Two policies on the same seeds: who succeeded where, and the difference of their rates
    (A minus B) with Newcombe's 95% interval for paired proportions (his method 10: Wilson
    intervals of both rates, combined with the correlation of the pairs). Pairing is what makes
    a small difference detectable: seeds both solve or both fail carry no information about it.
    """

    only_a: int
    only_b: int
    both: int
    neither: int
    difference: float
    ci_low: float
    ci_high: float

    @property
    def episodes(self) -> int:
        return self.only_a + self.only_b + self.both + self.neither

    def format(self) -> str:
        """ "+6.0 points [-2.1, 14.0] (n=100 paired)"."""
        d, lo, hi = (100 * v for v in (self.difference, self.ci_low, self.ci_high))
        return f"{d:+.1f} points [{lo:+.1f}, {hi:+.1f}] (n={self.episodes} paired)"

    def __str__(self) -> str:
        return self.format()


def paired_outcomes(a: list[bool], b: list[bool], z: float = Z_95) -> PairedOutcomes:
    """`a[i]` and `b[i]`: the two policies' outcomes on seed i."""
    if len(a) != len(b) or not a:
        raise ValueError(
            f"paired outcomes need two equal, non-empty lists. Got {len(a)}, {len(b)}."
        )
    both = sum(x and y for x, y in zip(a, b, strict=True))
    only_a = sum(x and not y for x, y in zip(a, b, strict=True))
    only_b = sum(y and not x for x, y in zip(a, b, strict=True))
    n = len(a)
    neither = n - both - only_a - only_b
    p1, p2 = (both + only_a) / n, (both + only_b) / n
    l1, u1 = wilson_interval(both + only_a, n, z)
    l2, u2 = wilson_interval(both + only_b, n, z)
    margins = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    phi = (both * neither - only_a * only_b) / math.sqrt(margins) if margins else 0.0
    below = (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2
    above = (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2
    difference = p1 - p2
    low = max(-1.0, difference - math.sqrt(max(below, 0.0)))
    high = min(1.0, difference + math.sqrt(max(above, 0.0)))
    return PairedOutcomes(only_a, only_b, both, neither, difference, low, high)


def auc(scores: Sequence[float] | np.ndarray, labels: Sequence[bool] | np.ndarray) -> float | None:
    """The area under the ROC curve: P(a positive's score > a negative's), ties counting half
    (0.5 is chance), by the rank-sum (Mann-Whitney U) formula with average ranks for ties, so
    O(n log n) in the number of scores. None when either class is absent."""
    values = np.asarray(scores, dtype=np.float64)
    positive = np.asarray(labels, dtype=bool)
    if values.shape != positive.shape or values.ndim != 1:
        raise ValueError(
            f"`scores` and `labels` must be two lists of one length. Got shapes {values.shape} "
            f"and {positive.shape}."
        )
    n_pos = int(positive.sum())
    n_neg = len(values) - n_pos
    if not n_pos or not n_neg:
        return None
    order = np.argsort(values, kind="mergesort")
    _, first, counts = np.unique(values[order], return_index=True, return_counts=True)
    ranks = np.empty(len(values))
    ranks[order] = np.repeat(first + (counts + 1) / 2, counts)  # 1-based, ties averaged
    wins = ranks[positive].sum() - n_pos * (n_pos + 1) / 2
    return float(wins / (n_pos * n_neg))


def bootstrap_interval(
    statistic: Callable[[np.ndarray], float],
    units: int,
    *,
    resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """The percentile bootstrap interval of `statistic(indices)`, each draw `units` indices into
    the independent units (say, the boundaries of counterfactual labels) taken with
    replacement: for a statistic no closed form covers. Seeded, so a rerun gives the same."""
    if units < 1:
        raise ValueError(f"`units` must be >= 1. Got {units}.")
    rng = np.random.default_rng(seed)
    values = [statistic(rng.integers(0, units, units)) for _ in range(resamples)]
    tail = (1 - level) / 2
    low, high = np.quantile(values, [tail, 1 - tail])
    return float(low), float(high)

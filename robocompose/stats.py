"""Success-rate statistics shared by evaluation, search and benchmarks."""

from __future__ import annotations

import math
from dataclasses import dataclass

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

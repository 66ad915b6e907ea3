"""Test-time search over composition weights, on one seed list for every candidate.

Common random numbers: every candidate runs the same episode seeds (and the runner draws each
episode's sampling noise from its seed), so differences between candidates are paired.

- `grid_search`: every weight on a simplex lattice (step 0.1 for K=2, as the GPC paper), on all
  seeds.
- `successive_halving` (Jamieson & Talwalkar 2016): all candidates on a first slice of the seeds,
  keep the best 1/eta, double the slice, repeat; the winner ends on the full seed list so its
  interval is comparable with the grid's. Slices are prefixes of one seed list, so every episode
  already run is reused.

The evaluator does the episodes and must be resumable (the harness's JSONL files are), so an
interrupted search picks up where it stopped.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from robocompose.stats import success_rate

Weights = tuple[float, ...]
# (weights, seeds) -> one record per seed with at least "seed", "success", "score"
Evaluator = Callable[[Weights, Sequence[int]], list[dict]]


def simplex_grid(k: int, step: float = 0.1) -> list[Weights]:
    """All weight vectors with entries in {0, step, 2 step, ..., 1} summing to 1."""
    n = round(1 / step)
    if not math.isclose(n * step, 1.0):
        raise ValueError(f"`step` must divide 1. Got {step}.")
    if k < 2:
        raise ValueError(f"the simplex needs k >= 2 parents. Got {k}.")
    points = [c for c in itertools.product(range(n + 1), repeat=k - 1) if sum(c) <= n]
    return [tuple(round(i / n, 10) for i in (*c, n - sum(c))) for c in points]


@dataclass
class Candidate:
    weights: Weights
    successes: int = 0
    episodes: int = 0
    mean_score: float = 0.0

    @property
    def rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0

    def row(self) -> dict:
        rate = success_rate(self.successes, self.episodes)
        return {
            "weights": list(self.weights),
            "success": rate.rate,
            "ci_low": rate.ci_low,
            "ci_high": rate.ci_high,
            "episodes": self.episodes,
            "mean_score": self.mean_score,
        }


@dataclass
class SearchResult:
    method: str
    candidates: list[Candidate]
    chosen: Weights
    episodes_spent: int
    seeds: int
    extra: dict = field(default_factory=dict)

    def table(self) -> str:
        """A markdown table, best first; the chosen weights are marked."""
        lines = ["| weights | success [95% CI] | episodes | mean score |", "|---|---|---|---|"]
        for c in sorted(self.candidates, key=lambda c: (-c.rate, -c.mean_score)):
            r = c.row()
            mark = " **chosen**" if c.weights == self.chosen else ""
            w = ", ".join(f"{x:.2f}" for x in c.weights)
            lines.append(
                f"| ({w}){mark} | {100 * r['success']:.1f}% [{100 * r['ci_low']:.1f}, "
                f"{100 * r['ci_high']:.1f}] | {c.episodes} | {c.mean_score:.3f} |"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "method": self.method,
            "chosen": list(self.chosen),
            "episodes_spent": self.episodes_spent,
            "seeds": self.seeds,
            "candidates": [c.row() for c in self.candidates],
            **self.extra,
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")


def _score(candidate: Candidate, records: list[dict]) -> None:
    candidate.episodes = len(records)
    candidate.successes = sum(bool(r["success"]) for r in records)
    candidate.mean_score = sum(float(r["score"]) for r in records) / max(1, len(records))


def _best(candidates: Sequence[Candidate]) -> Candidate:
    return max(candidates, key=lambda c: (c.rate, c.mean_score))


def grid_search(
    evaluate: Evaluator,
    candidates: Sequence[Weights],
    seeds: Sequence[int],
    progress: bool = True,
) -> SearchResult:
    pool = [Candidate(tuple(w)) for w in candidates]
    for c in tqdm(pool, desc="grid search", disable=not progress):
        _score(c, evaluate(c.weights, seeds))
    spent = sum(c.episodes for c in pool)
    return SearchResult("grid", pool, _best(pool).weights, spent, len(seeds))


def successive_halving(
    evaluate: Evaluator,
    candidates: Sequence[Weights],
    seeds: Sequence[int],
    first_slice: int = 25,
    eta: float = 2.0,
    progress: bool = True,
) -> SearchResult:
    if first_slice < 1 or eta <= 1:
        raise ValueError(f"need first_slice >= 1 and eta > 1. Got {first_slice}, {eta}.")
    pool = [Candidate(tuple(w)) for w in candidates]
    alive, n, rounds = list(pool), min(first_slice, len(seeds)), []
    bar = tqdm(desc="successive halving", disable=not progress, unit="round")
    while True:
        for c in alive:
            _score(c, evaluate(c.weights, seeds[:n]))
        rounds.append({"seeds": n, "alive": [list(c.weights) for c in alive]})
        bar.update()
        if len(alive) == 1 and n == len(seeds):
            break
        alive = sorted(alive, key=lambda c: (c.rate, c.mean_score), reverse=True)
        alive = alive[: max(1, math.ceil(len(alive) / eta))]
        n = len(seeds) if len(alive) == 1 else min(len(seeds), 2 * n)
    bar.close()
    spent = sum(c.episodes for c in pool)
    return SearchResult(
        "successive_halving", pool, alive[0].weights, spent, len(seeds), {"rounds": rounds}
    )


def plot_search(
    result: SearchResult,
    path: str | os.PathLike[str],
    parents: Sequence[dict] = (),
    title: str = "",
    others: Sequence[dict] = (),
) -> Path:
    """Success against the first parent's weight (K=2) with the 95% band; parents as markers.

    `parents`, `others` (e.g. another operator, drawn as a dashed level with its interval): rows
    {"label", "success", "ci_low", "ci_high"} measured on the same seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted((c.row() for c in result.candidates), key=lambda r: r["weights"][0])
    w = [r["weights"][0] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.fill_between(
        w,
        [100 * r["ci_low"] for r in rows],
        [100 * r["ci_high"] for r in rows],
        alpha=0.25,
        label="95% CI",
    )
    ax.plot(w, [100 * r["success"] for r in rows], "o-", label=f"composed ({result.method})")
    for x_pos, parent in zip((1.0, 0.0), parents, strict=False):
        err = [
            [max(0.0, 100 * (parent["success"] - parent["ci_low"]))],
            [max(0.0, 100 * (parent["ci_high"] - parent["success"]))],
        ]
        ax.errorbar(
            [x_pos],
            [100 * parent["success"]],
            yerr=err,
            fmt="s",
            ms=9,
            capsize=4,
            label=f"{parent['label']} alone",
        )
    for other, color in zip(others, ("tab:purple", "tab:brown", "tab:gray"), strict=False):
        ax.axhline(100 * other["success"], ls="--", color=color, label=other["label"])
        ax.axhspan(100 * other["ci_low"], 100 * other["ci_high"], color=color, alpha=0.08)
    chosen = next(r for r in rows if tuple(r["weights"]) == result.chosen)
    ax.plot(
        [chosen["weights"][0]],
        [100 * chosen["success"]],
        "*",
        ms=16,
        color="gold",
        markeredgecolor="black",
        label="chosen",
    )
    ax.set_xlabel("weight of parent A (parent B gets 1 - w)")
    ax.set_ylabel("success rate (%)")
    ax.set_ylim(-2, 102)
    ax.set_title(title or "test-time weight search")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)

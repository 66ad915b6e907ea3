"""Two policies on the same seeds: each one's success, where each succeeds alone, and the paired
difference. Before a search it says whether a pair has anything to gain: a composition can only
win on seeds where one parent succeeds and the other fails.

    from robocompose.compare import compare
    print(compare("checkpoints/Stack_diffusion_mlp", "checkpoints/Stack_flow_mlp",
                  range(100_000, 100_100), out_dir="runs/compare").table())

`robocompose compare A B` is `run(CompareConfig(...))`. Light to import: `compare` imports the
rollout when it runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robocompose.records import EvalResult, is_success
from robocompose.rollout_config import EpisodesConfig
from robocompose.stats import PairedOutcomes, paired_outcomes

if TYPE_CHECKING:
    from robocompose.evaluation import PolicyLike


@dataclass(kw_only=True)
class CompareConfig(EpisodesConfig):
    """`robocompose compare A B`: two checkpoints on the same seeds, and where each succeeds
    alone (what a composition of them could gain)."""

    checkpoints: list[str]
    num_envs: int | None = None
    out: str = "runs/compare"  # episodes of each (<name>.jsonl, resumable) and compare.json

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.checkpoints) != 2:
            raise ValueError(f"`checkpoints` must name 2 checkpoints. Got {self.checkpoints}.")


@dataclass(frozen=True)
class Comparison:
    labels: tuple[str, str]
    results: tuple[EvalResult, EvalResult]
    paired: PairedOutcomes

    @property
    def oracle(self) -> float:
        """The rate of a policy that always picked the parent that succeeds on each seed: what a
        composition of the two could reach if it did no more than choose well."""
        p = self.paired
        return (p.both + p.only_a + p.only_b) / p.episodes

    def table(self) -> str:
        (a, b), p = self.labels, self.paired
        rows = [
            "| policy | success [95% CI] | episodes |",
            "|---|---|---|",
            *(
                f"| {label} | {r.success.format(episodes=False)} | {r.episodes} |"
                for label, r in zip(self.labels, self.results, strict=True)
            ),
            "",
            f"| only {a} | only {b} | both | neither |",
            "|---|---|---|---|",
            f"| {p.only_a} | {p.only_b} | {p.both} | {p.neither} |",
            "",
            f"{a} - {b}: {p}",
            f"either succeeds (a per-seed oracle picking the right one): {100 * self.oracle:.1f}%",
        ]
        return "\n".join(rows)

    def to_dict(self) -> dict[str, Any]:
        p = self.paired
        return {
            "labels": list(self.labels),
            "rows": [r.row() for r in self.results],
            "only_a": p.only_a,
            "only_b": p.only_b,
            "both": p.both,
            "neither": p.neither,
            "difference": p.difference,
            "ci_low": p.ci_low,
            "ci_high": p.ci_high,
            "oracle": self.oracle,
        }


def compare(
    a: PolicyLike,
    b: PolicyLike,
    seeds: Iterable[int],
    *,
    out_dir: str | os.PathLike[str] | None = None,
    labels: tuple[str, str] | None = None,
    **evaluate_kwargs: Any,
) -> Comparison:
    """Evaluate `a` and `b` on the same `seeds` (into out_dir/<label>.jsonl, resumable) and pair
    their outcomes seed by seed; `evaluate_kwargs` go to `robocompose.evaluation.evaluate`."""
    from robocompose.evaluation import evaluate

    if _same_policy(a, b):
        raise ValueError(
            f"compare runs two different policies; both are {a if _is_path(a) else 'one object'} "
            "(a policy against itself differs nowhere)."
        )
    seeds = list(seeds)
    labels = labels or tuple(_label(p, i) for i, p in enumerate((a, b)))  # type: ignore[assignment]
    if labels[0] == labels[1]:
        labels = (f"{labels[0]} (A)", f"{labels[1]} (B)")
    results = tuple(
        evaluate(
            policy,
            seeds,
            label=label,
            out=Path(out_dir) / f"{label}.jsonl" if out_dir is not None else None,
            **evaluate_kwargs,
        )
        for policy, label in zip((a, b), labels, strict=True)
    )
    outcomes = [[is_success(r["success"]) for r in result.records] for result in results]
    return Comparison(labels, results, paired_outcomes(*outcomes))  # type: ignore[arg-type]


def run(config: CompareConfig) -> Comparison:
    """Compare, print the table and write it to `out/compare.json`."""
    result = compare(
        *config.checkpoints,
        config.seeds(),
        out_dir=config.out,
        num_envs=config.num_envs,
        device=config.device,
        batch_invariant=config.batch_invariant,
    )
    print(result.table())
    record = Path(config.out) / "compare.json"
    record.write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    print(f"record: {record}")
    return result


def _label(policy: PolicyLike, index: int) -> str:
    if isinstance(policy, str | os.PathLike):
        return Path(policy).name
    folder = getattr(policy, "checkpoint_dir", None)
    return Path(folder).name if folder else "AB"[index]


def _is_path(policy: PolicyLike) -> bool:
    return isinstance(policy, str | os.PathLike)


def _same_policy(a: PolicyLike, b: PolicyLike) -> bool:
    """One checkpoint folder named twice (however spelt), or one object passed twice."""
    if _is_path(a) and _is_path(b):
        return Path(a).resolve() == Path(b).resolve()  # type: ignore[arg-type]
    return a is b

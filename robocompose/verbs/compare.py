"""`robocompose compare A B`: two candidates on the same seeds (`robocompose.compare.compare`);
prints the table and writes `out/compare.json`.

Light to import (the command line reads `CompareConfig` for `--help`); `compare` imports the
rollout when it runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from robocompose.compare import CandidateSpec, Comparison, compare
from robocompose.rollout_config import EpisodesConfig


@dataclass(kw_only=True)
class CompareConfig(EpisodesConfig):
    """`robocompose compare A B`: two checkpoints on the same seeds, and where each succeeds
    alone (what a composition of them could gain)."""

    # two candidates: checkpoint folders, OPERATOR:WEIGHTS:CKPT,CKPT or a search.json's choice
    candidates: list[str]
    num_envs: int | None = None
    out: str = "runs/compare"  # episodes of each (<name>.jsonl, resumable) and compare.json

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.candidates) != 2:
            raise ValueError(f"`candidates` must name 2 candidates. Got {self.candidates}.")
        self.specs()

    def specs(self) -> list[CandidateSpec]:
        return [CandidateSpec.parse(c) for c in self.candidates]


def run(config: CompareConfig) -> Comparison:
    """Compare, print the table and write it to `out/compare.json`."""
    specs = config.specs()
    result = compare(
        *(s.policy() for s in specs),
        config.seeds(),
        out_dir=config.out,
        labels=tuple(s.label() for s in specs),  # type: ignore[arg-type]
        num_envs=config.num_envs,
        device=config.device,
        batch_invariant=config.batch_invariant,
    )
    print(result.table())
    record = Path(config.out) / "compare.json"
    record.write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    print(f"record: {record}")
    return result

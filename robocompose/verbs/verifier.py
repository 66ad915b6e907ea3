"""`robocompose verifier LOGS...`: train a chunk verifier on chunk logs (written by `eval` or
`compose` with `chunk_log=`), print its held-out AUC and write its file, which the selector
scores by (`composition=selector composition.selector_score=verifier composition.verifier=FILE`).

    from robocompose.verbs.verifier import VerifierConfig, run
    run(VerifierConfig(logs=["runs/chunks"], out="runs/verifier/stack.safetensors"))

Light to import (the command line reads `VerifierConfig` for `--help`); `run` imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from robocompose.composition.verifier_config import VerifierTrainConfig

if TYPE_CHECKING:
    from robocompose.composition.verifier_training import VerifierReport


@dataclass(kw_only=True)
class VerifierConfig(VerifierTrainConfig):
    """`robocompose verifier`: which chunk logs, where the verifier goes, how it trains."""

    logs: list[str]  # chunk log folders (searched at any depth) or episode files
    out: str = "runs/verifier/verifier.safetensors"  # the verifier file (replaced)


def run(config: VerifierConfig) -> VerifierReport:
    """Train, print the report and where the file went."""
    from robocompose.composition.verifier_training import train_verifier

    report = train_verifier(config.logs, config.out, config)
    print(report.summary())
    print(f"verifier: {report.out}")
    return report

"""How a chunk verifier is trained (`composition.verifier_training`): data only, no torch, so
the `verifier` verb's config reads it for `--help` without loading torch."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(kw_only=True)
class VerifierTrainConfig:
    """How a verifier is trained: its size and the training loop's settings."""

    members: int = 5  # MLPs in the ensemble (their spread is the uncertainty)
    hidden: int = 128  # units per hidden layer
    layers: int = 2  # hidden layers (0: logistic regression)
    held_out: float = 0.2  # the share of the seeds held out for early stopping and the AUC
    max_epochs: int = 300
    patience: int = 20  # epochs without a lower held-out loss before training stops
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 1e-4
    seed: int = 0  # initialisation, split and chunk order
    torch_threads: int = 1  # torch's intra-op threads while training

    def __post_init__(self) -> None:
        if not 0 < self.held_out < 1:
            raise ValueError(f"`held_out` must be in (0, 1). Got {self.held_out}.")
        for name in ("members", "hidden", "max_epochs", "patience", "batch_size", "torch_threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"`{name}` must be >= 1. Got {getattr(self, name)}.")
        if self.layers < 0:
            raise ValueError(f"`layers` must be >= 0. Got {self.layers}.")

"""The task part of every verb's config (`task=<preset>`): which task, its demo file, and the
episode seeds' lower bound. Below the policies and the rollout: training and collecting need a
task, not a rollout."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from robocompose.sim.tasks import get_task, register_external


def check_seed_start(seed_start: int) -> None:
    """Env seeds are non-negative: a negative one fails every reset, which would be recorded
    as failed episodes (and a rerun would keep them)."""
    if seed_start < 0:
        raise ValueError(
            f"`seed_start` must be >= 0 (env seeds are non-negative). Got {seed_start}."
        )


@dataclass(kw_only=True)
class TaskConfig:
    """A task: its expert demo file and how many demos `make checkpoints` collects. A preset
    with an `external` block makes a third-party env the task (robocompose.sim.external)."""

    name: str
    dataset: str
    demos: int
    external: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.external:
            register_external(self.name, self.external)
        get_task(self.name)
        if self.demos < 1:
            raise ValueError(f"`demos` must be >= 1. Got {self.demos}.")

"""`robocompose collect TASK`: a task's scripted expert demos appended to an hdf5 file (or a
LeRobot dataset folder) until it holds `episodes` (`robocompose.sim.collect.collect`).

Light to import (the command line reads `CollectConfig` for `--help`); `run` imports MuJoCo.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from robocompose.rollout_config import TaskConfig, check_seed_start

if TYPE_CHECKING:
    from robocompose.stats import SuccessRate


@dataclass(kw_only=True)
class CollectConfig:
    """`robocompose collect`: successful expert demos appended to `out` until it holds
    `episodes`."""

    task: TaskConfig
    episodes: int
    out: str
    obs_keys: list[str] = field(default_factory=lambda: ["state"])
    image_size: int | None = None  # side of the `image` key in pixels; None: the env's default
    seed_start: int = 0
    expert: dict[str, Any] = field(default_factory=dict)  # e.g. +expert.action_noise_m=0.003
    # per-step skill labels (and `skill_args` on the tabletop tasks): skill-policy data
    skills: bool = False
    env: dict[str, Any] = field(default_factory=dict)  # more env kwargs, e.g. +env.order=[..]
    # hdf5 (robomimic's layout) or lerobot (`out` a LeRobot v3.0 dataset folder)
    format: str = "hdf5"

    def __post_init__(self) -> None:
        check_seed_start(self.seed_start)
        if self.format not in ("hdf5", "lerobot"):
            raise ValueError(f"`format` must be 'hdf5' or 'lerobot'. Got {self.format!r}.")


def run(config: CollectConfig) -> SuccessRate:
    """Collect, then print where the demos went and the expert's success in this run."""
    from robocompose.sim.collect import collect

    rate = collect(
        config.task.name,
        config.episodes,
        config.out,
        obs_keys=tuple(config.obs_keys),
        image_size=config.image_size,
        seed_start=config.seed_start,
        expert_config=config.expert,
        skills=config.skills,
        env_config=config.env,
        format=config.format,
    )
    print(f"{config.task.name}: wrote {config.out}; expert success this run {rate}")
    return rate

"""`robocompose collect TASK`: a task's scripted expert demos appended to an hdf5 file (or a
LeRobot dataset folder) until it holds `episodes` (`robocompose.sim.collect.collect`).

Light to import (the command line reads `CollectConfig` for `--help`); `run` imports MuJoCo.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from robocompose.choices import check_choices, one_of
from robocompose.sim.episode import FORMATS
from robocompose.sim.task_config import TaskConfig, check_seed_start

if TYPE_CHECKING:
    from robocompose.stats import SuccessRate


@dataclass(kw_only=True)
class CollectConfig:
    """`robocompose collect`: successful expert demos appended to `out` until it holds
    `episodes`."""

    task: TaskConfig
    episodes: int | None = None  # None: the preset's `demos`
    out: str | None = None  # None: the preset's `dataset`
    obs_keys: list[str] = field(default_factory=lambda: ["state"])
    image_size: int | None = None  # side of the `image` key in pixels; None: the env's default
    seed_start: int = 0
    # merged into the preset's `expert_config` (an external task's), e.g. +expert.gain=8
    expert: dict[str, Any] = field(default_factory=dict)
    # end each demo at the first step the task reports success (as evaluation ends an episode);
    # false: run on to the env's time limit, so the expert must behave after success too
    stop_on_success: bool = False
    # the expert may run this many episodes per demo asked for before collect gives up
    attempts_per_demo: int = 3
    # per-step skill labels (and `skill_args` on the tabletop tasks): skill-policy data
    skills: bool = False
    env: dict[str, Any] = field(default_factory=dict)  # more env kwargs, e.g. +env.order=[..]
    format: str = one_of(FORMATS, "hdf5")  # lerobot: `out` is a LeRobot v3.0 dataset folder

    def __post_init__(self) -> None:
        check_seed_start(self.seed_start)
        check_choices(self)
        if self.attempts_per_demo < 1:
            raise ValueError(f"`attempts_per_demo` must be >= 1. Got {self.attempts_per_demo}.")
        if self.episodes is not None and self.episodes < 1:
            raise ValueError(f"`episodes` must be >= 1 or None. Got {self.episodes}.")
        self.episodes = self.episodes or self.task.demos
        self.out = self.out or self.task.dataset


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
        attempts_per_demo=config.attempts_per_demo,
        stop_on_success=config.stop_on_success,
        expert_config=config.expert,
        skills=config.skills,
        env_config=config.env,
        format=config.format,
    )
    print(f"{config.task.name}: wrote {config.out}; expert success this run {rate}")
    return rate

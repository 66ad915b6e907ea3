"""The task suite: one table of tasks, gymnasium registration, and name resolution.

Adding a task = one env module, one expert, one `TaskSpec` line here.
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: naming and checking tasks needs no gymnasium
    import gymnasium as gym

NAMESPACE = "robocompose"


@dataclass(frozen=True)
class TaskSpec:
    """A registered task: its gymnasium id, env class, episode limit and scripted expert."""

    name: str
    entry_point: str  # "module:Class" of the env
    max_episode_steps: int
    expert: str  # "module:Class" of the scripted expert
    kwargs: dict[str, Any] = field(default_factory=dict)
    version: int = 0

    @property
    def env_id(self) -> str:
        return f"{NAMESPACE}/{self.name}-v{self.version}"


TASKS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        TaskSpec(
            "PushT",
            "robocompose.sim.pusht:PushTEnv",
            300,
            "robocompose.sim.experts.pusht:PushTExpert",
        ),
        TaskSpec(
            "PickPlace",
            "robocompose.sim.pick_place:PickPlaceEnv",
            150,
            "robocompose.sim.experts.grasping:PickPlaceExpert",
            {"n_cubes": 1},
        ),
        TaskSpec(
            "PickPlaceTwoCubes",
            "robocompose.sim.pick_place:PickPlaceEnv",
            150,
            "robocompose.sim.experts.grasping:PickPlaceExpert",
            {"n_cubes": 2},
        ),
        TaskSpec(
            "Stack",
            "robocompose.sim.stack:StackEnv",
            300,
            "robocompose.sim.experts.grasping:StackExpert",
        ),
        TaskSpec(
            "SortBins",
            "robocompose.sim.sort_bins:SortBinsEnv",
            450,
            "robocompose.sim.experts.sort_bins:SortBinsExpert",
        ),
    )
}


def register_tasks() -> None:
    """Register every task id with gymnasium (lazy entry points; idempotent)."""
    import gymnasium as gym

    for spec in TASKS.values():
        if spec.env_id not in gym.registry:
            gym.register(
                spec.env_id,
                entry_point=spec.entry_point,
                max_episode_steps=spec.max_episode_steps,
                kwargs=dict(spec.kwargs),
            )


def get_task(name: str) -> TaskSpec:
    """Resolve "PushT", "pusht" or "robocompose/PushT-v0"; unknown names list the choices."""
    by_key = {spec.name.lower(): spec for spec in TASKS.values()}
    by_key |= {spec.env_id.lower(): spec for spec in TASKS.values()}
    spec = by_key.get(name.lower())
    if spec is None:
        choices = sorted(TASKS)
        nearest = difflib.get_close_matches(name, choices + [s.env_id for s in TASKS.values()], 1)
        hint = f" Did you mean {nearest[0]!r}?" if nearest else ""
        raise ValueError(f"unknown task {name!r}. Choices: {', '.join(choices)}.{hint}")
    return spec


def make_env(name: str, **kwargs: Any) -> gym.Env:
    """`gym.make` of a suite task by short name or id, with env kwargs."""
    import gymnasium as gym

    register_tasks()
    return gym.make(get_task(name).env_id, **kwargs)


def make_expert(name: str, **config: Any) -> Any:
    """The task's scripted expert, configured by keyword (e.g. `action_noise_m=0.003`)."""
    module, cls_name = get_task(name).expert.split(":")
    cls = getattr(importlib.import_module(module), cls_name)
    config_cls = getattr(importlib.import_module(module), f"{cls_name}Config")
    return cls(config_cls(**config))

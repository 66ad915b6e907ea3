"""The task suite: one table of tasks, gymnasium registration, and name resolution.

Adding a task = one env module, one expert, one `TaskSpec` line here: its env and expert, how
many demos `make checkpoints` collects, and (once checkpoints are shipped for it) its parent
pair. Every verb's `task=<name>` option comes from this table (`robocompose.config`).
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
    """A registered task: its gymnasium id, env class, episode limit, scripted expert, and the
    recipe of its shipped checkpoints (the Makefile reads `demos` from here)."""

    name: str
    entry_point: str  # "module:Class" of the env
    max_episode_steps: int
    expert: str  # "module:Class" of the scripted expert
    kwargs: dict[str, Any] = field(default_factory=dict)
    version: int = 0
    about: str = ""  # what the task is, and how its shipped parents were trained
    demos: int = 200  # expert demos `make checkpoints` collects into `dataset`
    dataset: str = ""  # the expert demo file; "" means data/<name>.hdf5
    # the checkpoints composition uses on the task: checkpoints/<name>_<kind> for each kind;
    # chosen with headroom (the better parent between 40% and 85%), `about` says how
    shipped_pair: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        if not self.dataset:
            object.__setattr__(self, "dataset", f"data/{self.name}.hdf5")

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
            about="Push a T-shaped block onto its goal pose. The hardest to learn: it gets "
            "twice the demos (and longer training), and every shipped parent saw all of them. "
            "Composition pairs the v-prediction diffusion UNet (60.5%) with the flow UNet "
            "(73.5%): two families of one architecture, both short of the expert.",
            demos=400,
            shipped_pair=("diffusion_unet_v", "flow_unet"),
        ),
        TaskSpec(
            "PickPlace",
            "robocompose.sim.pick_place:PickPlaceEnv",
            150,
            "robocompose.sim.experts.grasping:PickPlaceExpert",
            {"n_cubes": 1},
            about="Pick one cube and place it on the target. Every state parent saw all demos. "
            "Composition pairs two modalities and families: the state diffusion UNet (68.5%) "
            "and the image flow MLP (52.5%: 64 px camera + proprio, 200 demos, 6000 steps); the "
            "state flow MLP (99%) leaves nothing to gain.",
            shipped_pair=("diffusion_unet", "image_flow"),
        ),
        TaskSpec(
            "PickPlaceTwoCubes",
            "robocompose.sim.pick_place:PickPlaceEnv",
            150,
            "robocompose.sim.experts.grasping:PickPlaceExpert",
            {"n_cubes": 2},
            about="Two identical cubes; either one in the target disc succeeds (the expert takes "
            "cube 0). The state parents split the demos in halves (_diffusion_unet and "
            "_flow_mlp: the first, _flow_mlp_b: the second). Composition pairs two modalities "
            "and families: the state diffusion UNet (68%) and the image flow MLP (9%: 64 px "
            "camera + proprio, 200 demos of its own file, the UNet's action normaliser; with "
            "two identical cubes it rarely finishes a place); the state flow MLPs (97.5-100%) "
            "leave nothing to gain.",
            demos=800,
            shipped_pair=("diffusion_unet", "image_flow"),
        ),
        TaskSpec(
            "Stack",
            "robocompose.sim.stack:StackEnv",
            300,
            "robocompose.sim.experts.grasping:StackExpert",
            about="Stack the red, green and blue blocks, red at the bottom. The shipped parents "
            "split the demos in halves (_diffusion_unet and _flow_mlp: the first, _flow_mlp_b "
            "and the v-prediction _diffusion_mlp: the second); composition pairs the diffusion "
            "MLP and the flow MLP: disjoint halves of one file, so one normaliser.",
            demos=400,
            shipped_pair=("diffusion_mlp", "flow_mlp"),
        ),
        TaskSpec(
            "SortBins",
            "robocompose.sim.sort_bins:SortBinsEnv",
            450,
            "robocompose.sim.experts.sort_bins:SortBinsExpert",
            about="Put each block into the bin of its colour: the long-horizon sorting task of "
            "`robocompose plan`. Its scripted expert collects demos like any task's; no "
            "checkpoints are shipped for it.",
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

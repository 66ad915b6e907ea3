"""The task suite: one table of tasks, gymnasium registration, and name resolution.

Adding a task = one env module, one expert, one `TaskSpec` line here: its env and expert, how
many demos `make checkpoints` collects, and (once checkpoints are shipped for it) its parent
pair. Every verb's `task=<name>` option comes from this table (`robocompose.config`).

A third-party env joins with no code: a task preset with an `external:` block
(`robocompose.sim.external`) registers it as `robocompose/<name>-v0` when the preset is loaded;
a dataset or checkpoint of it carries the block, and reading one registers it again.
"""

from __future__ import annotations

import difflib
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
    max_episode_steps: int | None  # None: the env's own limit (an external env's)
    expert: str  # "module:Class" of the scripted expert ("": none)
    kwargs: dict[str, Any] = field(default_factory=dict)
    version: int = 0
    about: str = ""  # what the task is, and how its shipped parents were trained
    demos: int = 200  # expert demos `make checkpoints` collects into `dataset`
    dataset: str = ""  # the expert demo file; "" means data/<name>.hdf5
    # the checkpoints composition uses on the task: the shipped <name>_<kind> for each kind;
    # chosen with headroom (the better parent between 40% and 85%), `about` says how
    shipped_pair: tuple[str, str] | None = None
    # a third-party env: its `ExternalTask` block as recorded (see robocompose.sim.external)
    external: dict[str, Any] | None = None

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


# external tasks known to this process (from presets, datasets and checkpoints read so far)
EXTERNAL_TASKS: dict[str, TaskSpec] = {}


def _all_tasks() -> list[TaskSpec]:
    return [*TASKS.values(), *EXTERNAL_TASKS.values()]


def register_external(name: str, block: dict[str, Any]) -> TaskSpec:
    """Make the third-party env of an `external:` block the task `name` (idempotent); the block
    is checked here, so a bad preset fails when it is loaded, naming the field."""
    from robocompose.sim.external import ExternalTask

    if name.lower() in {n.lower() for n in TASKS}:
        raise ValueError(f"external task {name!r}: the suite has a task of that name; rename it.")
    task = ExternalTask.from_dict(block)
    recorded = task.to_dict()
    known = EXTERNAL_TASKS.get(name)
    if known is not None and known.external != recorded:
        raise ValueError(
            f"external task {name!r} is already registered with another `external` block "
            f"({known.external['env_id']}); give this one another name."
        )
    spec = TaskSpec(
        name,
        "robocompose.sim.external:make_external_env",
        task.max_episode_steps,
        task.expert,
        about=task.about or f"{task.env_id}, a third-party env",
        external=recorded,
    )
    EXTERNAL_TASKS[name] = spec
    register_tasks()
    return spec


def register_recorded(env_name: str | None, env_kwargs: dict[str, Any] | None) -> None:
    """Register the external task a dataset's or checkpoint's env args describe (none: no-op),
    so its env id resolves in a process that never loaded its preset."""
    block = (env_kwargs or {}).get("external")
    if not block or not env_name:
        return
    prefix, _, rest = env_name.partition("/")
    name = rest.rsplit("-v", 1)[0]
    if prefix != NAMESPACE or not name:
        raise ValueError(
            f"an external task's env name must be {NAMESPACE}/<name>-v0. Got {env_name!r}."
        )
    register_external(name, block)


def attached_env(
    env_name: str | None, env_kwargs: dict[str, Any], source: str, task: str | None
) -> tuple[str | None, dict[str, Any]]:
    """The env a dataset or checkpoint (`source`) runs on: the one it records, or the task
    `task` attaches to it when it records none that is registered (a foreign robomimic file:
    its `env_args` name an env of another suite). `task` never replaces a registered env."""
    if task is None:
        return env_name, env_kwargs
    spec = get_task(task)
    if env_name == spec.env_id:
        return env_name, env_kwargs
    if env_name and is_registered(env_name):
        raise ValueError(
            f"{source} runs on {env_name}, a registered env; task={spec.name} attaches an env "
            "only to data or a checkpoint whose own env is missing. Drop task=."
        )
    return spec.env_id, {"external": spec.external} if spec.external else {}


def is_registered(env_id: str) -> bool:
    """Whether gymnasium can make `env_id` (the suite's and known external tasks included)."""
    import gymnasium as gym

    register_tasks()
    return env_id in gym.registry


def missing_env_error(env_id: str, source: str) -> ValueError:
    """What to do when a dataset or checkpoint names an env nobody registered."""
    return ValueError(
        f"{source} runs on env {env_id!r}, which is not a registered gymnasium env (a dataset "
        "from another suite?). Attach a task to it: `task=<preset>` (a task of configs/task/ or "
        "the suite, or your own preset with --config-dir DIR) on `eval`, or on `train` to "
        "record it in the checkpoint."
    )


def register_tasks() -> None:
    """Register every task id with gymnasium (lazy entry points; idempotent)."""
    import gymnasium as gym

    for spec in _all_tasks():
        if spec.env_id not in gym.registry:
            gym.register(
                spec.env_id,
                entry_point=spec.entry_point,
                max_episode_steps=spec.max_episode_steps,
                kwargs=dict(spec.kwargs) | ({"external": spec.external} if spec.external else {}),
            )


def get_task(name: str) -> TaskSpec:
    """Resolve "PushT", "pusht" or "robocompose/PushT-v0"; unknown names list the choices."""
    by_key = {spec.name.lower(): spec for spec in _all_tasks()}
    by_key |= {spec.env_id.lower(): spec for spec in _all_tasks()}
    spec = by_key.get(name.lower())
    if spec is None:
        choices = sorted(s.name for s in _all_tasks())
        ids = [s.env_id for s in _all_tasks()]
        nearest = difflib.get_close_matches(name, choices + ids, 1)
        hint = f" Did you mean {nearest[0]!r}?" if nearest else ""
        raise ValueError(f"unknown task {name!r}. Choices: {', '.join(choices)}.{hint}")
    return spec


def make_env(name: str, **kwargs: Any) -> gym.Env:
    """`gym.make` of a suite task by short name or id, with env kwargs."""
    import gymnasium as gym

    register_tasks()
    return gym.make(get_task(name).env_id, **kwargs)


def make_expert(name: str, **config: Any) -> Any:
    """The task's scripted expert, configured by keyword (e.g. `action_noise_m=0.003`) on top of
    an external task's `expert_config`."""
    spec = get_task(name)
    if not spec.expert:
        raise ValueError(
            f"task {spec.name!r} has no scripted expert; set `external.expert` "
            "('module:Class') in its preset to collect demos."
        )
    from robocompose.sim.external import load_expert

    defaults = (spec.external or {}).get("expert_config", {})
    return load_expert(spec.expert, {**defaults, **config})

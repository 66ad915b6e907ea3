"""The config parts the rollout verbs share: a task, which episodes (seeds, device), and a task's
parents composed (`RolloutConfig`: compose runs one, search searches its weights, sweep runs one
per cell; eval, compare, view and serve use the parts). Light to import: no torch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from robocompose.choices import one_of
from robocompose.composition.config import CompositionConfig
from robocompose.composition.methods import CompositionMethod, method_names, method_of
from robocompose.devices import check_device
from robocompose.shipped import checkpoint_folder, parent_pair
from robocompose.sim.task_config import TaskConfig, check_seed_start
from robocompose.sim.tasks import get_task

if TYPE_CHECKING:  # policies need torch, which a config does not
    from robocompose.composition.api import AnyPolicy
    from robocompose.policies.base import GenerativePolicy

SEED_STRIDE = 1_000_000  # replicate `seed` s runs episode seeds seed_start + s * SEED_STRIDE + i


@dataclass(kw_only=True)
class CompositionSpec(CompositionConfig):
    """A verb's `CompositionConfig`: its method (`operator`), weights and shared settings,
    checked against the method as the verb's arguments are read."""

    # a registered method (robocompose.composition.methods), which checks the name itself
    operator: str = one_of(method_names, CompositionConfig.operator, checked=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        method_of(self)

    def method(self) -> CompositionMethod:
        return method_of(self)

    def denoising_steps(self) -> int:
        """`steps`, or the method's default when unset."""
        return self.method().denoising_steps(self)

    def settings(self) -> dict[str, Any]:
        """Every field but operator and weights: what a search keeps across its candidates."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(CompositionConfig)
            if f.name not in ("operator", "weights")
        }


@dataclass(kw_only=True)
class EpisodesConfig:
    """Which episodes to run: `episodes` seeds from seed_start, in the block of replicate `seed`.

    Every candidate of a comparison runs the same seeds (common random numbers)."""

    episodes: int = 50
    seed: int = 0
    seed_start: int = 100_000  # far from the demonstration seeds (0, 1, ...)
    device: str = "auto"  # auto (CUDA if present), cpu, cuda, cuda:N or mps
    # true: each episode's inference is its own batch of one, so its actions do not depend on
    # num_envs or a resume; false: envs replan in one batch (faster, episodes depend on it)
    batch_invariant: bool = True

    def __post_init__(self) -> None:
        check_device(self.device)
        if not 1 <= self.episodes <= SEED_STRIDE:
            raise ValueError(f"`episodes` must be in [1, {SEED_STRIDE}]. Got {self.episodes}.")
        if self.seed < 0:
            raise ValueError(f"`seed` must be >= 0. Got {self.seed}.")
        check_seed_start(self.seed_start)

    def seeds(self) -> list[int]:
        start = self.seed_start + self.seed * SEED_STRIDE
        return list(range(start, start + self.episodes))


@dataclass(kw_only=True)
class RolloutConfig(EpisodesConfig):
    """A composition of parents on their task. `parents` empty: the task's shipped pair."""

    task: TaskConfig
    parents: list[str] = field(default_factory=list)
    composition: CompositionSpec = field(default_factory=CompositionSpec)
    num_envs: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.parents) == 1:
            raise ValueError(f"`parents` must name >= 2 checkpoints (or none). Got {self.parents}.")

    def parent_paths(self) -> list[Path]:
        """Absolute checkpoint folders (so Ray workers find them whatever their directory)."""
        if not self.parents:
            return parent_pair(self.task.name)
        return [checkpoint_folder(p).resolve() for p in self.parents]

    def load_parents(self) -> list[GenerativePolicy]:
        from robocompose.policies.checkpoint import load_parent

        return [load_parent(str(p)) for p in self.parent_paths()]

    def on_parents(self, paths: list[str]) -> Self:
        """This config on other copies of its parents (a Ray node's): a `PolicyRecipe`."""
        return dataclasses.replace(self, parents=paths)

    def policy(self) -> AnyPolicy:
        """The composed (or parameter-merged) policy; the parents must be of `task`."""
        from robocompose.composition.api import compose, task_of

        spec = self.composition
        policy = compose(self.load_parents(), spec.operator, spec.weights, **spec.settings())
        env_id, _ = task_of(policy)
        if env_id != get_task(self.task.name).env_id:
            raise ValueError(
                f"the parents were trained on {env_id}, not on task {self.task.name!r}; "
                f"set task=<their task>."
            )
        return policy

    def label(self) -> str:
        from robocompose.composition.api import candidate_label

        return candidate_label(self.composition.operator, self.composition.weights)

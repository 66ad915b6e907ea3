"""The notebook API: load parents, compose them, evaluate, search the weights.

    from robocompose.composition import load, compose, evaluate, search
    dp, flow = load("PushT_diffusion_unet"), load("PushT_flow_mlp")
    print(evaluate(compose([dp, flow], weights=(0.6, 0.4)), seeds=range(100)).summary())
    result = search([dp, flow], seeds=range(100), out_dir="runs/search")  # every operator

The CLI verbs `compose` and `search` call these same functions.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from robocompose.composition import search_record
from robocompose.composition.composed_policy import ComposedPolicy
from robocompose.composition.config import CompositionConfig
from robocompose.composition.methods import method_of
from robocompose.composition.search_plot import plot_search
from robocompose.composition.timing import ParentTimes, sum_times
from robocompose.composition.weight_search import (
    Composed,
    Key,
    NativeParent,
    Round,
    SearchResult,
    SearchSettings,
    candidate_label,
    grid_search,
    racing,
    search_pool,
    successive_halving,
)
from robocompose.devices import check_device
from robocompose.evaluation import check_one_task, evaluate, task_of
from robocompose.launch.config import LauncherConfig
from robocompose.launch.episodes import Run, evaluate_runs
from robocompose.launch.launchers import connected
from robocompose.policies.base import GenerativePolicy
from robocompose.policies.checkpoint import load_parent
from robocompose.policies.checkpoint import load_policy as load  # the one checkpoint loader
from robocompose.shipped import checkpoint_folder
from robocompose.sim.tasks import get_task

__all__ = [
    "candidate_label",
    "chosen_policy",
    "compose",
    "evaluate",
    "load",
    "search",
    "task_of",
]

AnyPolicy = GenerativePolicy | ComposedPolicy


def compose(
    parents: Sequence[GenerativePolicy],
    operator: str = "convex",
    weights: Sequence[float] | None = None,
    **config: Any,
) -> AnyPolicy:
    """The policy that the method `operator` builds: a `ComposedPolicy`, or one policy for a
    method that merges parameters ("merge").

    Parents of different tasks are refused first, naming each parent's task: comparing their
    normalisers or architectures would only hide that."""
    check_one_task(parents)
    weights = tuple(weights) if weights is not None else (1 / len(parents),) * len(parents)
    composition = CompositionConfig(operator=operator, weights=weights, **config)
    built = method_of(composition).build(parents, composition)
    return built if built is not None else ComposedPolicy(parents, composition)


def chosen_policy(parents: Sequence[GenerativePolicy], key: Key, **config: Any) -> AnyPolicy:
    """A search candidate as a policy: a parent alone, or its method at its weights."""
    if isinstance(key, NativeParent):
        return parents[key.index]
    return compose(parents, key.operator, key.weights, **config)


@dataclass(frozen=True)
class CandidateRecipe:
    """A search candidate as a Ray worker builds it (a `PolicyRecipe`): the parents' checkpoint
    folders, the candidate, and the composition settings every candidate shares."""

    parents: tuple[str, ...]
    key: Key
    config: dict[str, Any]

    def policy(self) -> AnyPolicy:
        return chosen_policy([load_parent(p) for p in self.parents], self.key, **self.config)

    def parent_paths(self) -> list[Path]:
        return [Path(p) for p in self.parents]

    def on_parents(self, paths: list[str]) -> CandidateRecipe:
        return replace(self, parents=tuple(paths))


class _Candidates:
    """The search's evaluator: each candidate's episodes into out_dir/episodes/<label>.jsonl,
    a round's candidates at once through the launcher (`many`: on Ray, in parallel)."""

    def __init__(
        self,
        parents: Sequence[GenerativePolicy | str | os.PathLike[str]],
        policies: list[GenerativePolicy],
        config: dict[str, Any],
        folder: Path,
        launcher: LauncherConfig,
        chunk_log: bool,
        settings: dict[str, Any],
    ) -> None:
        self.policies, self.config, self.folder = policies, config, folder
        self.launcher, self.chunk_log, self.settings = launcher, chunk_log, settings
        self.folders = _parent_folders(parents) if launcher.remote else ()
        self.times: list[ParentTimes] = []

    def __call__(self, key: Key, seeds: Sequence[int]) -> list[dict]:
        return self.many([(key, seeds)])[0]

    def many(self, runs: Round) -> list[list[dict]]:
        built = [self._policy(key) for key, _ in runs]
        results = evaluate_runs(
            [
                Run(
                    policy,
                    seeds,
                    out=self.folder / "episodes" / f"{key.label}.jsonl",
                    label=key.label,
                    chunk_log=self.folder / "chunks" / key.label if self.chunk_log else None,
                )
                for policy, (key, seeds) in zip(built, runs, strict=True)
            ],
            self.launcher,
            progress=False,
            **self.settings,
        )
        self.times += [p.times for p in built if isinstance(p, ComposedPolicy)]
        return [result.records for result in results]

    def _policy(self, key: Key) -> AnyPolicy | CandidateRecipe:
        """Here the candidate itself; for Ray its recipe (the workers load the parents)."""
        if self.launcher.remote:
            return CandidateRecipe(self.folders, key, self.config)
        return chosen_policy(self.policies, key, **self.config)


def _parent_folders(
    parents: Sequence[GenerativePolicy | str | os.PathLike[str]],
) -> tuple[str, ...]:
    """The parents' checkpoint folders, absolute, for Ray to ship to its nodes."""
    loaded = [type(p).__name__ for p in parents if not isinstance(p, str | os.PathLike)]
    if loaded:
        raise TypeError(
            "launcher=ray loads the parents on its workers from their checkpoint folders: pass "
            f"folders (or shipped names), not loaded policies ({', '.join(loaded)})."
        )
    return tuple(str(checkpoint_folder(p).resolve()) for p in parents)


def _one_of_each_method(pool: Sequence[Key]) -> list[Composed]:
    """The first composition of each method in `pool`: built before any episode, so a setting
    one of them cannot run is refused before the search starts."""
    first: dict[str, Composed] = {}
    for key in pool:
        if isinstance(key, Composed):
            first.setdefault(key.operator, key)
    return list(first.values())


def search(
    parents: Sequence[GenerativePolicy | str | os.PathLike[str]],
    seeds: Iterable[int],
    *,
    out_dir: str | os.PathLike[str],
    task: str | None = None,
    operators: Sequence[str] | None = None,
    method: str = SearchSettings.method,
    step: float | None = SearchSettings.step,
    first_slice: int = SearchSettings.first_slice,
    tolerance: float = SearchSettings.tolerance,
    beat_parent_z: float = SearchSettings.beat_parent_z,
    num_envs: int | None = None,
    device: str = "auto",
    batch_invariant: bool = True,
    chunk_log: bool = False,
    progress: bool = True,
    launcher: LauncherConfig | None = None,
    **config: Any,
) -> SearchResult:
    """Search the compositions of `parents` (checkpoint folders or loaded policies), every
    candidate on the same seeds; `config`: the `CompositionConfig` fields every candidate shares
    (sampler, steps, grid, ...).

    The candidates of every method in `operators` race in one pool (None: every searchable
    registered method, so convex's simplex grid, the product of experts and each parent
    sharpened; `("convex",)`: the convex weights alone). Each parent alone on its own sampler
    is a candidate too (listed first, so it wins ties): the result's `choice` is the candidate
    with the best success on these seeds, or the better parent alone unless that candidate's
    paired interval against it (at `beat_parent_z`; 0: any lead) lies above 0 (`chosen_kind`,
    `chosen_operator`; `chosen_policy` builds it).

    Writes into out_dir: episodes/<candidate>.jsonl as episodes end (named by method and
    weights: a rerun resumes, another pool reuses what it shares), search.json (task, parents
    and their fingerprints, composition settings, method, operators, seeds, envs, device,
    batching, version; then the candidates) and search.png; with `chunk_log`, every executed
    chunk to chunks/<candidate>/ (`robocompose.chunk_log`: the verifier's training data, at no
    extra episode). A rerun into out_dir with other parents, task, composition settings or
    batching is refused, naming what differs.

    `launcher` (`LauncherConfig`; None: this process) runs each round's candidates: with
    `name="ray"` their episodes are Ray tasks, run in parallel, the round's decision taken once
    all have ended, from the records a local search gets (the parents must then be checkpoint
    folders, and `chunk_log` is refused: the nodes would write it)."""
    given = {} if operators is None else {"operators": list(operators)}
    settings = SearchSettings(
        method=method,
        step=step,
        first_slice=first_slice,
        tolerance=tolerance,
        beat_parent_z=beat_parent_z,
        **given,
    )
    check_device(device)
    policies = [p if isinstance(p, GenerativePolicy) else load(p) for p in parents]
    seeds = list(seeds)
    if len(policies) < 2 or not seeds:
        raise ValueError(
            f"a search needs >= 2 parents and >= 1 seed. Got {len(policies)} and {len(seeds)}."
        )
    candidates = search_pool(len(policies), settings.grid_step(len(policies)), settings.operators)
    built = [chosen_policy(policies, key, **config) for key in _one_of_each_method(candidates)]
    env_id, _ = task_of(built[0])
    if task is not None and get_task(task).env_id != env_id:
        raise ValueError(f"the parents were trained on {env_id}, not on task {task!r}.")
    folder = Path(out_dir)
    shared = {"num_envs": num_envs, "device": device, "batch_invariant": batch_invariant}
    run = _Candidates(
        parents, policies, config, folder, launcher or LauncherConfig(), chunk_log, shared
    )
    provenance = search_record.provenance(
        get_task(env_id),
        zip(parents, policies, strict=True),
        CompositionConfig(**config),
        settings,
        seeds,
        num_envs=num_envs,
        device=device,
        batch_invariant=batch_invariant,
    )
    search_record.start(folder, provenance)
    with connected(run.launcher):  # one Ray for every round
        z = settings.beat_parent_z
        if settings.method == "grid":
            result = grid_search(run, candidates, seeds, progress, beat_parent_z=z)
        elif settings.method == "racing":
            result = racing(
                run,
                candidates,
                seeds,
                settings.first_slice,
                tolerance=settings.tolerance,
                progress=progress,
                beat_parent_z=z,
            )
        else:
            result = successive_halving(
                run, candidates, seeds, settings.first_slice, progress=progress, beat_parent_z=z
            )
    result.provenance = provenance
    result.times = sum_times(run.times)
    result.save(folder / search_record.RECORD)
    plot_search(result, folder / "search.png")
    return result

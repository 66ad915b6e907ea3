"""Policies evaluated into their episode files through a launcher (`evaluate_runs`): here, one
`evaluate` after another; on Ray, every policy's missing seeds split into tasks that run in
parallel, each record appended to its policy's file by this process (the driver) alone, as its
task ends, so a rerun resumes from the file as it resumes a local run.

A worker builds its policy from a recipe (`PolicyRecipe`: checkpoint folders, shipped as files,
and settings; no torch module is pickled) and runs its seeds with `evaluate`, each episode
inferred on its own and seeded by its seed (`batch_invariant`, the default): its records are
the ones a local run writes. The driver builds the same policy to check it, name its records
and resume, and refuses a record whose policy fingerprint is not its own.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from tqdm import tqdm

from robocompose.evaluation import PolicyLike, Prepared, check_seeds, evaluate, prepare
from robocompose.interrupt import ResumableInterrupt
from robocompose.launch.config import LauncherConfig
from robocompose.launch.launchers import launch, tasks_of
from robocompose.policies.base import GenerativePolicy
from robocompose.policies.checkpoint import load_policy
from robocompose.records import EpisodeLog, EvalResult
from robocompose.shipped import checkpoint_folder
from robocompose.sim.tasks import attached_env

__all__ = ["CheckpointRecipe", "EpisodeJob", "PolicyRecipe", "Run", "evaluate_runs"]

# what `prepare` reads of evaluate's keywords, and what a Ray task passes on to `evaluate`
PREPARE_SETTINGS = ("task", "steps", "n_action_steps", "num_envs", "batch_invariant")
TASK_SETTINGS = (*PREPARE_SETTINGS, "device", "torch_threads")
# files `evaluate` writes beside the records: on Ray they would land on the nodes
LOCAL_ONLY_SETTINGS = ("video_seeds", "video_dir", "video_views")


@runtime_checkable
class PolicyRecipe(Protocol):
    """How a worker builds a policy: picklable, naming the checkpoint folders it reads (which
    the launcher ships to the node, then hands back as the node's copies)."""

    def policy(self) -> PolicyLike: ...

    def parent_paths(self) -> list[Path]: ...

    def on_parents(self, paths: list[str]) -> PolicyRecipe: ...


@dataclass(frozen=True)
class CheckpointRecipe:
    """A checkpoint folder (or a shipped checkpoint's name); `attach`: the suite task whose env
    it runs on when its own env is not registered (`robocompose eval task=`)."""

    path: str
    attach: str | None = None

    def policy(self) -> GenerativePolicy:
        policy = load_policy(self.path)
        if self.attach is None:
            return policy
        recorded = policy.metadata.get("task"), policy.metadata.get("env_kwargs", {})
        env, kwargs = attached_env(*recorded, f"checkpoint {self.path}", self.attach)
        policy.metadata |= {"task": env, "env_kwargs": kwargs}
        return policy

    def parent_paths(self) -> list[Path]:
        return [checkpoint_folder(self.path).resolve()]

    def on_parents(self, paths: list[str]) -> CheckpointRecipe:
        return replace(self, path=paths[0])


@dataclass(frozen=True)
class EpisodeJob:
    """What a task runs on its seeds (`robocompose.launch.launchers.Job`): the policy its recipe
    builds, evaluated with `settings` (evaluate's keywords), quietly and into no file."""

    recipe: PolicyRecipe
    settings: dict[str, Any]

    def parent_paths(self) -> list[Path]:
        return self.recipe.parent_paths()

    def on_parents(self, paths: list[str]) -> EpisodeJob:
        return replace(self, recipe=self.recipe.on_parents(paths))

    def run(self, seeds: list[int]) -> list[dict[str, Any]]:
        return evaluate(self.recipe.policy(), seeds, progress=False, **self.settings).records


@dataclass(frozen=True)
class Run:
    """One policy on some seeds, into its own episode file (None: none) and chunk log."""

    policy: PolicyLike | PolicyRecipe
    seeds: Sequence[int]
    out: str | os.PathLike[str] | None = None
    label: str | None = None
    chunk_log: str | os.PathLike[str] | None = None


def evaluate_runs(
    runs: Sequence[Run],
    launcher: LauncherConfig | None = None,
    *,
    progress: bool = True,
    **settings: Any,
) -> list[EvalResult]:
    """Each run's `evaluate(run.policy, run.seeds, out=run.out, label=run.label,
    chunk_log=run.chunk_log, **settings)`, in order.

    launcher local (or None): one after another in this process, exactly as `evaluate`.
    launcher ray: each run's seeds not yet in its `out` go out as tasks of
    `launcher.episodes_per_task` seeds, all runs' tasks at once, and the call returns when every
    one has ended (a search's round: its decisions see the same records as a local run's). A
    run's policy is then a checkpoint folder or a `PolicyRecipe`; videos and chunk logs are
    refused (the nodes would write them). A task whose worker died is retried
    (`launcher.max_retries`); one lost on every try raises `WorkersLost` once the others are
    saved, and a rerun runs only its seeds."""
    if launcher is None or not launcher.remote:
        return [
            evaluate(
                run.policy.policy() if isinstance(run.policy, PolicyRecipe) else run.policy,
                run.seeds,
                out=run.out,
                label=run.label,
                chunk_log=run.chunk_log,
                progress=progress,
                **settings,
            )
            for run in runs
        ]
    return _on_ray(runs, launcher, progress, settings)


def _recipe(policy: PolicyLike | PolicyRecipe) -> PolicyRecipe:
    if isinstance(policy, str | os.PathLike):
        return CheckpointRecipe(str(policy))
    if isinstance(policy, PolicyRecipe):
        return policy
    raise TypeError(
        f"launcher=ray builds each policy on its worker from checkpoint folders: pass a folder "
        f"or a PolicyRecipe (robocompose.launch.episodes), not a {type(policy).__name__}."
    )


def _driver_copy(run: Run, recipe: PolicyRecipe) -> PolicyLike:
    """The policy the driver checks and names: a folder as given (its name is the label by
    default, as `evaluate` has it), else what the recipe builds."""
    return run.policy if isinstance(run.policy, str | os.PathLike) else recipe.policy()


def _refuse_node_files(runs: Sequence[Run], settings: dict[str, Any]) -> None:
    unknown = sorted(settings.keys() - {*TASK_SETTINGS, *LOCAL_ONLY_SETTINGS})
    if unknown:
        raise TypeError(f"evaluate_runs() got settings `evaluate` does not take: {unknown}.")
    given = [k for k in LOCAL_ONLY_SETTINGS if settings.get(k)]
    given += ["chunk_log"] if any(run.chunk_log is not None for run in runs) else []
    if given:
        raise ValueError(
            f"launcher=ray writes the episode records only; {', '.join(given)} would be "
            "written on the nodes that run the episodes. Run them with launcher=local."
        )


def _check_stamps(record: dict[str, Any], ready: Prepared) -> None:
    """A worker's record names the policy this process built: else the node runs another
    robocompose (or another policy) than the driver."""
    got = (record.get("env_id"), record.get("policy_id"), record.get("batch"))
    if got != (ready.records_env, ready.policy_id, ready.batch):
        raise ValueError(
            f"a Ray worker's episode of {ready.name} (seed {record.get('seed')}) names "
            f"{got}, this process {(ready.records_env, ready.policy_id, ready.batch)}: every "
            "node needs the driver's robocompose version (the checkpoints are shipped)."
        )


def _on_ray(
    runs: Sequence[Run], launcher: LauncherConfig, progress: bool, settings: dict[str, Any]
) -> list[EvalResult]:
    _refuse_node_files(runs, settings)
    recipes = [_recipe(run.policy) for run in runs]
    seeds = [check_seeds(run.seeds) for run in runs]
    checks = {k: settings[k] for k in PREPARE_SETTINGS if k in settings}
    ready = [
        prepare(_driver_copy(run, recipe), label=run.label, **checks)
        for run, recipe in zip(runs, recipes, strict=True)
    ]
    logs = [
        EpisodeLog(run.out, r.records_env, r.policy_id, r.batch) if run.out is not None else None
        for run, r in zip(runs, ready, strict=True)
    ]
    records = []
    for run_seeds, log in zip(seeds, logs, strict=True):
        done = log.read() if log is not None else {}
        records.append({s: done[s] for s in run_seeds if s in done})
    passed = {k: settings[k] for k in TASK_SETTINGS if k in settings}
    tasks = [
        task
        for i, (recipe, r) in enumerate(zip(recipes, ready, strict=True))
        for task in tasks_of(
            i,
            r.name,
            EpisodeJob(recipe, passed | {"label": r.name}),
            [s for s in seeds[i] if s not in records[i]],
            launcher.episodes_per_task,
        )
    ]
    total, saved = sum(map(len, seeds)), sum(map(len, records))
    bar = tqdm(total=total, initial=saved, desc="ray", unit="ep", disable=not progress)
    try:
        with contextlib.ExitStack() as files:
            opened: set[int] = set()  # a file is opened (so made) by its first record
            for task, got in launch(launcher, tasks):
                log = logs[task.index]
                if log is not None and task.index not in opened:
                    files.enter_context(log)
                    opened.add(task.index)
                for record in got:
                    _check_stamps(record, ready[task.index])
                    records[task.index][record["seed"]] = record
                    if log is not None:
                        log.append(record)
                bar.update(len(got))
    except KeyboardInterrupt:
        outs = [str(run.out) for run in runs if run.out is not None]
        if not outs:
            raise
        where = outs[0] if len(outs) == 1 else os.path.commonpath(outs)
        raise ResumableInterrupt(sum(map(len, records)), where) from None
    finally:
        bar.close()
    return [
        EvalResult.from_records(r.records_env, [got[s] for s in run_seeds])
        for r, got, run_seeds in zip(ready, records, seeds, strict=True)
    ]

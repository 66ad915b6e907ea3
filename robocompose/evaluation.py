"""The one way a policy of this project is evaluated: on its task, over a seed list, resumably.

`evaluate` takes a checkpoint folder, a policy, a composition, a parameter-merged policy or any
chunk predictor; the CLI verbs, the notebook API, the sweep, the demo and the benchmarks all call
it. It resolves the task from the parents' metadata, checks the env gives the observations they
were trained on, moves them to the device, and runs the rollout harness (`robocompose.sim.rollout`)
with per-episode inference, so an episode's actions depend on its seed alone. On request it logs
every executed chunk (`robocompose.chunk_log`): a learned verifier's training data.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from robocompose.chunk_log import COMPOSITION, ChunkLog
from robocompose.devices import resolve_device, torch_threads_set
from robocompose.policies.base import GenerativePolicy
from robocompose.policies.checkpoint import load_policy
from robocompose.policies.runner import ChunkPredictor, PolicyPredictor, PolicyRunner
from robocompose.records import EvalResult, batch_layout
from robocompose.sim.rollout import DEFAULT_NUM_ENVS, run_episodes
from robocompose.sim.tasks import get_task, is_registered, missing_env_error, register_tasks
from robocompose.stats import SuccessRate

__all__ = [
    "Prepared",
    "check_observations",
    "check_one_task",
    "check_seeds",
    "evaluate",
    "prepare",
    "task_of",
]

PolicyLike = str | os.PathLike[str] | GenerativePolicy | ChunkPredictor


def evaluate(
    policy: PolicyLike,
    seeds: Iterable[int],
    *,
    task: str | None = None,
    out: str | os.PathLike[str] | None = None,
    label: str | None = None,
    steps: int | None = None,
    n_action_steps: int | None = None,
    num_envs: int | None = None,
    device: str = "auto",
    video_seeds: Iterable[int] = (),
    video_dir: str | os.PathLike[str] | None = None,
    video_views: Sequence[str] = (),
    progress: bool = True,
    batch_invariant: bool = True,
    torch_threads: int | None = 1,
    chunk_log: str | os.PathLike[str] | None = None,
) -> EvalResult:
    """Success (Wilson 95% CI) and score of `policy` over `seeds`; records named
    "<env id>:<label>", appended to `out` (JSONL) as episodes end and reused by a rerun.

    Args:
        policy: a checkpoint folder, a `GenerativePolicy` (single or parameter-merged), a
            `ComposedPolicy`, or any `ChunkPredictor`.
        task: a suite task ("PushT") or a registered env id; default the parents' own task.
        label: default the checkpoint folder's name, else "policy".
        steps: denoising steps of a single or merged policy (None: its own); a composed policy
            has them in its `CompositionConfig`.
        n_action_steps: how many actions of each predicted chunk a single or merged policy
            executes before it replans (None: as trained); at most the steps the chunk holds
            from the current one. A composed policy has it in its `CompositionConfig`.
        device: "auto", "cpu", "cuda", "cuda:N" or "mps"; the policy is moved there.
        video_seeds, video_dir: seeds to film into `video_dir`; each filmed record's "video" is
            the file written.
        video_views: what the videos show side by side (default: the env's render): an image
            observation key, as the policy sees it ("image": an image parent's own frames,
            nearest-pixel scaled), or a camera of the task ("angled", "top").
        batch_invariant: True (default) infers each episode's chunk as its own batch of one, so
            its actions do not depend on `num_envs` or a resume; False batches the envs that
            replan together (faster, but an episode then depends on its batch). Records say
            which ("batch"), and a resume into a file of the other layout is refused.
        torch_threads: torch's intra-op threads while it runs (restored after). One by default:
            batch-of-one inference gains little from more, and with more it stalls whenever
            anything else wants a core (benchmarks/train_threads.py measures the same on
            training). The thread count can change the rounding, so the default also keeps a
            rerun's records identical.
            None: leave torch's setting.
        chunk_log: a folder (one per policy, as `out` is one file per policy): each episode's
            executed chunks, the low-dim observation each was predicted from, its source and
            the episode's outcome, one file per episode written as it ends (format:
            `robocompose.chunk_log`). Logging changes no episode. Episodes reused from `out`
            do not run again, so one without a file stays without (a warning counts them).
    """
    seeds = check_seeds(seeds)
    ready = prepare(
        policy,
        task=task,
        label=label,
        steps=steps,
        n_action_steps=n_action_steps,
        num_envs=num_envs,
        batch_invariant=batch_invariant,
    )
    predictor, env_id, name = ready.predictor, ready.env_id, ready.name
    policy_id, batch = ready.policy_id, ready.batch
    _move(predictor, resolve_device(device))
    log = None
    if chunk_log is not None:
        log = _chunk_log(chunk_log, predictor, env_id, name, policy_id, batch)
        log.check()
    with torch_threads_set(torch_threads):
        result = run_episodes(
            env_id,
            PolicyRunner(predictor, batch_invariant=batch_invariant, recorder=log),
            seeds,
            out=out,
            num_envs=ready.num_envs,
            env_kwargs=ready.env_kwargs,
            video_seeds=video_seeds,
            video_dir=video_dir,
            video_views=video_views,
            progress=progress,
            env_id=ready.records_env,
            policy_id=policy_id,
            batch=batch,
            on_episode=log.end if log is not None else None,
        )
    unlogged = log.missing(seeds) if log is not None else []
    if unlogged:
        warnings.warn(
            f"{len(unlogged)} of {len(seeds)} episodes (the first: seed {unlogged[0]}) were "
            f"reused from {out} and have no chunk log in {chunk_log}; evaluate into a fresh "
            "`out` to log them.",
            stacklevel=2,
        )
    return result


def check_seeds(seeds: Iterable[int]) -> list[int]:
    """The seeds as a list, refused when negative (env seeds are not) or repeated."""
    seeds = list(seeds)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"`seeds` must be non-empty and unique. Got {seeds}.")
    negative = [s for s in seeds if s < 0]
    if negative:
        raise ValueError(
            f"seeds must be >= 0 (env seeds are non-negative). Got {len(negative)} negative, "
            f"the first {negative[0]}."
        )
    return seeds


@dataclass(frozen=True)
class Prepared:
    """A policy checked against its task, before any episode: what its records are named and
    stamped with, so a launcher's driver can resume and write them without running it."""

    predictor: ChunkPredictor
    env_id: str
    env_kwargs: dict[str, Any]
    name: str  # the label
    policy_id: str
    batch: str  # `records.batch_layout`
    num_envs: int

    @property
    def records_env(self) -> str:
        """The records' "env_id": "<env id>:<label>"."""
        return f"{self.env_id}:{self.name}"


def prepare(
    policy: PolicyLike,
    *,
    task: str | None = None,
    label: str | None = None,
    steps: int | None = None,
    n_action_steps: int | None = None,
    num_envs: int | None = None,
    batch_invariant: bool = True,
) -> Prepared:
    """`evaluate`'s checks and names (arguments as its): the policy loaded, its task resolved
    and its observations checked, its fingerprint and inference layout; nothing moved or run."""
    if isinstance(policy, str | os.PathLike):
        label = label or Path(policy).name
        policy = load_policy(policy)
    predictor = _predictor(policy, steps, n_action_steps)
    parents = parents_of(predictor)
    if task is None:
        env_id, env_kwargs = task_of(predictor)
    else:
        check_one_task(parents)
        env_id, env_kwargs = _env_id(task), _env_kwargs(parents)
    check_observations(predictor, env_id, env_kwargs)
    num_envs = num_envs or DEFAULT_NUM_ENVS
    batch = batch_layout(batch_invariant, num_envs)
    name = label or "policy"
    return Prepared(predictor, env_id, env_kwargs, name, predictor.fingerprint(), batch, num_envs)


def _chunk_log(
    folder: str | os.PathLike[str],
    predictor: ChunkPredictor,
    env_id: str,
    label: str,
    policy_id: str,
    batch: str,
) -> ChunkLog:
    """The chunk log of `predictor`'s episodes: a single policy's chunks are its own ("parent0"),
    a composition's "composition" unless it says per chunk which candidate it chose."""
    parents = parents_of(predictor)
    composed = bool(getattr(predictor, "parents", None))
    return ChunkLog(
        folder,
        task=env_id,
        label=label,
        policy_id=policy_id,
        batch=batch,
        parents=[(parent_name(p, i), p.fingerprint()) for i, p in enumerate(parents)],
        source=COMPOSITION if composed else "parent0" if parents else label,
    )


def training_success(policy: GenerativePolicy, seeds: range, device: str) -> SuccessRate:
    """A training run's periodic evaluation (`robocompose.policies.train_monitor.Evaluator`),
    quiet: the train verb hands it to `train`, which sits below this layer."""
    return evaluate(policy, seeds, label="train_eval", device=device, progress=False).success


def _predictor(
    policy: GenerativePolicy | ChunkPredictor, steps: int | None, n_action_steps: int | None
) -> ChunkPredictor:
    if isinstance(policy, GenerativePolicy):
        return PolicyPredictor(policy, steps, n_action_steps)
    executed = getattr(policy, "executed", None)
    executes = executed.stop - executed.start if isinstance(executed, slice) else None
    if n_action_steps is not None and executes != n_action_steps:
        raise ValueError(
            f"`n_action_steps`={n_action_steps} but the {type(policy).__name__} executes "
            f"{executes or 'its own number of'} steps per chunk: set `n_action_steps` in its "
            "CompositionConfig (composition.n_action_steps) instead."
        )
    # a ComposedPolicy samples in its own number of steps; a PolicyPredictor's were set for it
    own = None if isinstance(policy, PolicyPredictor) else getattr(policy, "steps", None)
    if steps is not None and own is None:
        raise ValueError(
            f"`steps`={steps} applies to a checkpoint or a GenerativePolicy; a "
            f"{type(policy).__name__} chooses its own."
        )
    if steps is not None and own != steps:
        raise ValueError(
            f"`steps`={steps} but the composed policy samples in {own} steps: set "
            "`steps` in its CompositionConfig (composition.steps) instead."
        )
    missing = [a for a in ("predict_actions", "fingerprint", "obs_keys") if not hasattr(policy, a)]
    if missing:
        raise TypeError(
            "`policy` must be a checkpoint folder, a GenerativePolicy, a ComposedPolicy or a "
            f"ChunkPredictor. Got {type(policy).__name__} (no {', '.join(missing)})."
        )
    return policy


def parents_of(predictor: ChunkPredictor) -> list[GenerativePolicy]:
    """The trained policies behind a predictor: a composition's parents, or the one policy."""
    parents = getattr(predictor, "parents", None)
    if parents:
        return list(parents)
    single = getattr(predictor, "policy", None)
    return [single] if isinstance(single, GenerativePolicy) else []


def _move(predictor: ChunkPredictor, device: Any) -> None:
    """The predictor's weights onto `device`: through its own `to` (a composition moves its
    parents and what it derived from them), else its policy's."""
    move = getattr(predictor, "to", None)
    if callable(move):
        move(device)
        return
    for parent in parents_of(predictor):
        parent.to(device)


def parent_name(policy: GenerativePolicy, index: int) -> str:
    """How messages name a parent: its checkpoint folder, else its place in the list."""
    folder = getattr(policy, "checkpoint_dir", None)
    return Path(folder).name if folder is not None else f"parent {index}"


def check_one_task(parents: Sequence[GenerativePolicy]) -> None:
    """Refuse parents trained on different tasks, naming each with its task, before anything
    else about them (normalisers, architectures) is compared."""
    tasks = [p.metadata.get("task") for p in parents]
    if len(set(tasks)) > 1:
        named = ", ".join(
            f"{parent_name(p, i)} ({t or 'no task in its metadata'})"
            for i, (p, t) in enumerate(zip(parents, tasks, strict=True))
        )
        raise ValueError(
            f"the parents come from different tasks: {named}; composition needs parents of "
            "one task."
        )


def task_of(policy: GenerativePolicy | ChunkPredictor) -> tuple[str, dict[str, Any]]:
    """The env id the policy's parents were trained on and env kwargs giving every key any
    parent needs."""
    parents = [policy] if isinstance(policy, GenerativePolicy) else parents_of(policy)
    if not parents:
        raise ValueError(
            f"{type(policy).__name__} names no parent policy to read its task from; pass "
            "`task=` (a suite task or an env id)."
        )
    check_one_task(parents)
    env_id = parents[0].metadata.get("task")
    if not env_id:
        raise ValueError(
            f"{parent_name(parents[0], 0)}: its metadata names no `task`; pass `task=` "
            "(a suite task or an env id)."
        )
    if not is_registered(env_id):
        folder = getattr(parents[0], "checkpoint_dir", None) or parent_name(parents[0], 0)
        dataset = parents[0].metadata.get("dataset")
        raise missing_env_error(
            env_id, f"{folder}" + (f" (trained on {dataset})" if dataset else "")
        )
    return env_id, _env_kwargs(parents)


def _env_kwargs(parents: Sequence[GenerativePolicy]) -> dict[str, Any]:
    """Every parent's env kwargs, observing every key any parent needs: a state parent first
    and an image parent second still get the image size the second was trained on. Parents
    recording different values of one kwarg are refused, naming both."""
    merged: dict[str, Any] = {}
    owner: dict[str, int] = {}
    for i, parent in enumerate(parents):
        for key, value in parent.metadata.get("env_kwargs", {}).items():
            if key == "obs_keys":
                continue
            if key in merged and merged[key] != value:
                first = parents[owner[key]]
                raise ValueError(
                    f"the parents need different envs: {parent_name(first, owner[key])} was "
                    f"trained with {key}={merged[key]!r}, {parent_name(parent, i)} with "
                    f"{key}={value!r}."
                )
            merged.setdefault(key, value)
            owner.setdefault(key, i)
    keys = list(dict.fromkeys(k for p in parents for k in p.config.obs_keys))
    return merged | {"obs_keys": tuple(keys)} if parents else {}


def _env_id(task: str) -> str:
    """A suite task's env id ("PushT" -> "robocompose/PushT-v0"); another registered id as is."""
    register_tasks()
    if task in gym.registry:
        return task
    return get_task(task).env_id


def check_observations(predictor: ChunkPredictor, env_id: str, env_kwargs: dict) -> None:
    """Refuse before running when `env_id` does not give the observations the checkpoint(s)
    were trained on (say, a Stack checkpoint on PushT), naming the key and both shapes: the
    rollout would otherwise fail deep in the network with a bare tensor-size error."""
    register_tasks()
    expected = {
        key: (tuple(policy.config.obs_shapes[key]), policy.metadata.get("task"))
        for policy in parents_of(predictor)
        for key in policy.config.obs_keys
    }
    if not expected:
        return
    env = gym.make(env_id, **env_kwargs)
    try:
        space = env.observation_space
    finally:
        env.close()
    got = dict(space.spaces) if isinstance(space, gym.spaces.Dict) else {}
    for key, (shape, trained_on) in expected.items():
        where = f"the checkpoint (trained on {trained_on}) expects observation `{key}`"
        if key not in got:
            raise ValueError(f"{where} of shape {shape}; {env_id} gives only {sorted(got)}.")
        if tuple(got[key].shape) != shape:
            raise ValueError(
                f"{where} of shape {shape}; {env_id} gives shape {tuple(got[key].shape)}. "
                "Evaluate a checkpoint on the task it was trained on."
            )

"""The notebook API: load parents, compose them, evaluate, search the weights.

    from robocompose.composition import load, compose, evaluate, search
    dp, flow = load("checkpoints/PushT_diffusion_unet"), load("checkpoints/PushT_flow_mlp")
    print(evaluate(compose([dp, flow], weights=(0.6, 0.4)), seeds=range(100)).summary())
    result = search([dp, flow], seeds=range(100), out_dir="runs/search")

The CLI verbs `compose` and `search` call these same functions.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from robocompose.composition.merge import merge_parameters
from robocompose.composition.policy import ComposedPolicy, CompositionConfig
from robocompose.composition.search import (
    SearchResult,
    grid_search,
    simplex_grid,
    successive_halving,
)
from robocompose.policies.base import GenerativePolicy
from robocompose.policies.checkpoint import load_policy
from robocompose.policies.evaluation import evaluate_predictor
from robocompose.policies.runner import PolicyPredictor
from robocompose.sim.evaluate import EvalResult

AnyPolicy = GenerativePolicy | ComposedPolicy


def load(path: str | os.PathLike[str]) -> GenerativePolicy:
    return load_policy(path)


def compose(
    parents: Sequence[GenerativePolicy],
    operator: str = "convex",
    weights: Sequence[float] | None = None,
    **config: Any,
) -> AnyPolicy:
    """A composed policy; operator "merge" returns one parameter-merged policy instead."""
    weights = tuple(weights) if weights is not None else (1 / len(parents),) * len(parents)
    if operator == "merge":
        return merge_parameters(parents, weights)
    return ComposedPolicy(parents, CompositionConfig(operator=operator, weights=weights, **config))


def _parents(policy: AnyPolicy) -> list[GenerativePolicy]:
    return policy.parents if isinstance(policy, ComposedPolicy) else [policy]


def task_of(policy: AnyPolicy) -> tuple[str, dict[str, Any]]:
    """The env id the parents were trained on and env kwargs giving every key any parent needs."""
    parents = _parents(policy)
    tasks = {p.metadata.get("task") for p in parents}
    if len(tasks) != 1 or None in tasks:
        raise ValueError(
            f"parents must come from one task; pass `task=`. Got {sorted(map(str, tasks))}."
        )
    keys = list(dict.fromkeys(k for p in parents for k in p.config.obs_keys))
    kwargs = {k: v for k, v in parents[0].metadata.get("env_kwargs", {}).items() if k != "obs_keys"}
    return tasks.pop(), kwargs | {"obs_keys": tuple(keys)}


def evaluate(
    policy: AnyPolicy,
    seeds: Iterable[int],
    *,
    task: str | None = None,
    out: str | os.PathLike[str] | None = None,
    label: str = "policy",
    steps: int | None = None,
    num_envs: int | None = None,
    video_seeds: Iterable[int] = (),
    video_dir: str | os.PathLike[str] | None = None,
    progress: bool = True,
) -> EvalResult:
    """Run `policy` (single, composed or merged) on its task over `seeds` through the harness.

    `steps`: denoising steps of a single or merged policy (None: its own); a composed policy
    takes them from its `CompositionConfig`."""
    env_id, env_kwargs = task_of(policy)
    predictor = policy if isinstance(policy, ComposedPolicy) else PolicyPredictor(policy, steps)
    return evaluate_predictor(
        predictor,
        task or env_id,
        env_kwargs,
        seeds,
        label=label,
        out=out,
        num_envs=num_envs,
        video_seeds=video_seeds,
        video_dir=video_dir,
        progress=progress,
    )


def candidate_label(operator: str, weights: Sequence[float]) -> str:
    return f"{operator}_" + "_".join(f"{w:.3f}" for w in weights)


def search(
    parents: Sequence[GenerativePolicy],
    seeds: Sequence[int],
    *,
    out_dir: str | os.PathLike[str],
    operator: str = "convex",
    method: str = "grid",
    step: float | None = None,
    first_slice: int = 25,
    num_envs: int | None = None,
    progress: bool = True,
    **config: Any,
) -> SearchResult:
    """Search composition weights on one seed list; every episode lands in out_dir (resumable)."""
    if method not in ("grid", "halving"):
        raise ValueError(f"`method` must be 'grid' or 'halving'. Got {method!r}.")
    step = step or (0.1 if len(parents) == 2 else 0.25)
    candidates = simplex_grid(len(parents), step)
    folder = Path(out_dir) / "episodes"

    def run(weights: tuple[float, ...], subset: Sequence[int]) -> list[dict]:
        label = candidate_label(operator, weights)
        policy = compose(parents, operator, weights, **config)
        result = evaluate(
            policy,
            subset,
            out=folder / f"{label}.jsonl",
            label=label,
            num_envs=num_envs,
            progress=False,
        )
        return result.records

    seeds = list(seeds)
    if method == "grid":
        return grid_search(run, candidates, seeds, progress)
    return successive_halving(run, candidates, seeds, first_slice=first_slice, progress=progress)

"""The notebook API: load parents, compose them, evaluate, search the weights.

    from robocompose.composition import load, compose, evaluate, search
    dp, flow = load("checkpoints/PushT_diffusion_unet"), load("checkpoints/PushT_flow_mlp")
    print(evaluate(compose([dp, flow], weights=(0.6, 0.4)), seeds=range(100)).summary())
    result = search([dp, flow], seeds=range(100), out_dir="runs/search")

The CLI verbs `compose` and `search` call these same functions.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
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
from robocompose.evaluation import check_one_task, evaluate, load_checkpoint, task_of
from robocompose.policies.base import GenerativePolicy

__all__ = ["candidate_label", "compose", "evaluate", "load", "search", "task_of"]

AnyPolicy = GenerativePolicy | ComposedPolicy


def load(path: str | os.PathLike[str]) -> GenerativePolicy:
    return load_checkpoint(path)


def compose(
    parents: Sequence[GenerativePolicy],
    operator: str = "convex",
    weights: Sequence[float] | None = None,
    **config: Any,
) -> AnyPolicy:
    """A composed policy; operator "merge" returns one parameter-merged policy instead.

    Parents of different tasks are refused first, naming each parent's task: comparing their
    normalisers or architectures would only hide that."""
    check_one_task(parents)
    weights = tuple(weights) if weights is not None else (1 / len(parents),) * len(parents)
    if operator == "merge":
        return merge_parameters(parents, weights)
    return ComposedPolicy(parents, CompositionConfig(operator=operator, weights=weights, **config))


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

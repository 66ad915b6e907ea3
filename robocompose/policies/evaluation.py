"""Evaluate a trained checkpoint on the task it was trained for, through the sim harness."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import gymnasium as gym

from robocompose.policies.checkpoint import load_policy
from robocompose.policies.runner import ChunkPredictor, PolicyPredictor, PolicyRunner
from robocompose.sim.evaluate import EvalResult, evaluate
from robocompose.sim.tasks import register_tasks


def evaluate_checkpoint(
    checkpoint: str | os.PathLike[str],
    seeds: Iterable[int],
    *,
    out: str | os.PathLike[str] | None = None,
    steps: int | None = None,
    num_envs: int | None = None,
    video_seeds: Iterable[int] = (),
    video_dir: str | os.PathLike[str] | None = None,
    progress: bool = True,
) -> EvalResult:
    """Success (Wilson 95% CI) and score of `checkpoint` over `seeds` on its own task.

    The env id and env kwargs (observation keys) come from the checkpoint's metadata, so the
    policy sees exactly the observations it was trained on.
    """
    policy = load_policy(checkpoint)
    task = policy.metadata.get("task")
    if not task:
        raise ValueError(f"{checkpoint}: metadata has no `task`; cannot pick the env to run.")
    env_kwargs = dict(policy.metadata.get("env_kwargs", {}))
    if "obs_keys" in env_kwargs:
        env_kwargs["obs_keys"] = tuple(env_kwargs["obs_keys"])
    return evaluate_predictor(
        PolicyPredictor(policy, steps),
        task,
        env_kwargs,
        seeds,
        label=Path(checkpoint).name,
        out=out,
        num_envs=num_envs,
        video_seeds=video_seeds,
        video_dir=video_dir,
        progress=progress,
    )


def evaluate_predictor(
    predictor: ChunkPredictor,
    env_id: str,
    env_kwargs: dict,
    seeds: Iterable[int],
    *,
    label: str,
    out: str | os.PathLike[str] | None = None,
    num_envs: int | None = None,
    video_seeds: Iterable[int] = (),
    video_dir: str | os.PathLike[str] | None = None,
    progress: bool = True,
) -> EvalResult:
    """Any chunk predictor (one policy or a composition) on `env_id` through the harness;
    records are named "<env_id>:<label>"."""
    register_tasks()
    check_observations(predictor, env_id, env_kwargs)
    return evaluate(
        env_id,
        PolicyRunner(predictor),
        seeds,
        out=out,
        num_envs=num_envs,
        env_kwargs=env_kwargs,
        video_seeds=video_seeds,
        video_dir=video_dir,
        progress=progress,
        env_id=f"{env_id}:{label}",
        policy_id=predictor.fingerprint(),
    )


def check_observations(predictor: ChunkPredictor, env_id: str, env_kwargs: dict) -> None:
    """Refuse before running when `env_id` does not give the observations the checkpoint(s)
    were trained on (say, a Stack checkpoint on PushT), naming the key and both shapes: the
    rollout would otherwise fail deep in the network with a bare tensor-size error."""
    policies = getattr(predictor, "parents", None) or [getattr(predictor, "policy", None)]
    expected = {
        key: (tuple(policy.config.obs_shapes[key]), policy.metadata.get("task"))
        for policy in policies
        if policy is not None
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

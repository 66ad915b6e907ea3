"""Record a policy's episodes: what it saw, what it did, what it planned, how it ended.

Per episode, under `seed_<seed>/`, on the timeline `step`:

    camera          the env's render                        Image, every step and the last frame
    obs/<key>       each observation key (images as Image)  Scalars / Image, every step
    action          the executed action                     Scalars, every step
    chunk           each predicted chunk as a 3-D path      LineStrips3D, at the step it was made
    executed        the whole executed path, in 3-D         LineStrips3D, at the last step
    success, score  running success (0/1) and best score    Scalars, every step
    outcome         "success" or "failure", score, length   TextLog, at the last step

The rollout is eval's (`robocompose.evaluation.evaluate`): the same env, seeds, per-episode noise
(`PolicyRunner`'s, seeded by the episode seed) and end at the first success, so an episode here
is the episode eval scored for that seed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from robocompose.policies.runner import ChunkPredictor, PolicyRunner
from robocompose.sim.tasks import register_tasks
from robocompose.viz.recording import points3d, rerun


@dataclass
class EpisodeSummary:
    seed: int
    success: bool
    score: float
    length: int
    chunks: int


class ChunkTap:
    """A `ChunkPredictor` that keeps each chunk the wrapped one predicts (same interface)."""

    def __init__(self, predictor: ChunkPredictor) -> None:
        self.predictor = predictor
        self.obs_keys = predictor.obs_keys
        self.n_obs_steps = predictor.n_obs_steps
        self.noise_shape = predictor.noise_shape
        self.chunks = 0
        self.last: np.ndarray | None = None  # (n_action_steps, A) of the last call's first row

    @property
    def device(self) -> torch.device:
        return self.predictor.device

    @property
    def dtype(self) -> torch.dtype:
        return self.predictor.dtype

    def predict_actions(self, obs: dict[str, torch.Tensor], noise: torch.Tensor) -> torch.Tensor:
        chunk = self.predictor.predict_actions(obs, noise)
        self.chunks += 1
        self.last = chunk[0].detach().float().cpu().numpy()
        return chunk

    def fingerprint(self) -> str:
        return self.predictor.fingerprint()


def record_episodes(
    stream: Any,
    predictor: ChunkPredictor,
    env_id: str,
    env_kwargs: Mapping[str, Any],
    seeds: Iterable[int],
) -> list[EpisodeSummary]:
    """Run one episode per seed, logging each to `stream` (see the module docstring)."""
    register_tasks()
    rr = rerun()
    tap = ChunkTap(predictor)
    runner = PolicyRunner(tap)
    env = gym.make(env_id, render_mode="rgb_array", **dict(env_kwargs))
    summaries = []
    try:
        for seed in seeds:
            summaries.append(_episode(rr, stream, env, runner, tap, int(seed)))
    finally:
        env.close()
    return summaries


def _episode(
    rr: Any, stream: Any, env: gym.Env, runner: PolicyRunner, tap: ChunkTap, seed: int
) -> EpisodeSummary:
    root = f"seed_{seed}"
    obs, info = env.reset(seed=seed)
    runner.reset(np.array([True]), seeds=np.array([seed]))
    success, score = bool(info.get("success", False)), info.get("score")
    executed, chunks_before, step, done = [], tap.chunks, 0, False
    while not done:
        stream.set_time("step", sequence=step)
        stream.log(f"{root}/camera", rr.Image(env.render()))
        _log_obs(rr, stream, root, obs)
        action = runner({k: np.asarray(v)[None] for k, v in obs.items()})[0]
        if tap.chunks > chunks_before and tap.last is not None:
            chunks_before = tap.chunks
            stream.log(f"{root}/chunk", rr.LineStrips3D([points3d(tap.last)]))
        stream.log(f"{root}/action", rr.Scalars(np.asarray(action, dtype=np.float64)))
        executed.append(np.asarray(action))
        obs, _, terminated, truncated, info = env.step(action)
        success = success or bool(info.get("success", info.get("is_success", False)))
        if info.get("score") is not None:
            score = max(float(info["score"]), score if score is not None else -np.inf)
        stream.log(f"{root}/success", rr.Scalars(float(success)))
        if score is not None:
            stream.log(f"{root}/score", rr.Scalars(float(score)))
        step += 1
        done = terminated or truncated or success
    stream.set_time("step", sequence=step)
    stream.log(f"{root}/camera", rr.Image(env.render()))
    stream.log(f"{root}/executed", rr.LineStrips3D([points3d(np.stack(executed))]))
    final_score = float(score) if score is not None else 0.0
    text = f"{'success' if success else 'failure'}: score {final_score:.3f}, {step} steps"
    stream.log(f"{root}/outcome", rr.TextLog(text, level="INFO" if success else "WARN"))
    return EpisodeSummary(seed, success, final_score, step, tap.chunks)


def _log_obs(rr: Any, stream: Any, root: str, obs: Mapping[str, Any]) -> None:
    for key, value in obs.items():
        value = np.asarray(value)
        if value.dtype == np.uint8 and value.ndim == 3:
            stream.log(f"{root}/obs/{key}", rr.Image(value))
        else:
            stream.log(f"{root}/obs/{key}", rr.Scalars(value.reshape(-1).astype(np.float64)))

"""Record one chunk's denoising at one state: each parent's path and the composed one.

At the first observation of episode `seed`, from the unit noise that seed draws, every step's
x0_hat (the chunk predicted at that noise level) is logged in env units as a 3-D path, on the
timeline `denoising_step`:

    denoising/<parent name>/x0_hat   LineStrips3D   the parent alone, Euler on its own grid
    denoising/composed/x0_hat        LineStrips3D   the composition, its sampler on its grid
    denoising/<name>/sigma           Scalars        the noise level of that step

A single checkpoint records its own path only. Euler in sigma space is DDIM for the diffusion
parents and the flow's Euler step (`robocompose.policies.denoiser`), so a parent's path is its
native sampler's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from robocompose.composition.samplers import sample_euler
from robocompose.policies.base import GenerativePolicy
from robocompose.policies.denoiser import DenoiserOutput
from robocompose.sim.tasks import register_tasks
from robocompose.viz.recording import points3d, rerun

Path = list[tuple[float, np.ndarray]]  # (sigma, x0_hat (H, A) in env units) per step


def first_observation(
    env_id: str, env_kwargs: dict[str, Any], seed: int, keys: Sequence[str], n_obs_steps: int
) -> dict[str, torch.Tensor]:
    """Episode `seed`'s first observation as a history of `n_obs_steps` (the first frame
    repeated, as the runner pads): {key: (1, n_obs_steps, ...)}."""
    register_tasks()
    env = gym.make(env_id, **env_kwargs)
    try:
        obs, _ = env.reset(seed=seed)
    finally:
        env.close()
    return {
        k: torch.as_tensor(np.repeat(np.asarray(obs[k])[None, None], n_obs_steps, axis=1))
        for k in keys
    }


def _tapped(
    denoise: Callable[[torch.Tensor, float], DenoiserOutput],
    path: Path,
    unnormalize: Callable[[torch.Tensor], torch.Tensor],
) -> Callable[[torch.Tensor, float], DenoiserOutput]:
    def call(x: torch.Tensor, sigma: float) -> DenoiserOutput:
        out = denoise(x, sigma)
        path.append((float(sigma), unnormalize(out.x0_hat)[0].detach().float().cpu().numpy()))
        return out

    return call


@torch.no_grad()
def policy_path(
    policy: GenerativePolicy, obs: dict[str, torch.Tensor], noise: torch.Tensor, steps: int
) -> Path:
    """One policy's x0_hat per Euler step on its own grid, from `noise` (1, H, A)."""
    view = {k: obs[k][:, -policy.config.n_obs_steps :] for k in policy.config.obs_keys}
    denoiser = policy.denoiser(view)
    sigmas = denoiser.sigmas(steps)
    path: Path = []
    noise = noise[:, : policy.config.horizon].to(policy.dtype)
    sample_euler(_tapped(denoiser, path, policy.action_normalizer.unnormalize), noise, sigmas)
    return path


@torch.no_grad()
def composed_path(composed: Any, obs: dict[str, torch.Tensor], noise: torch.Tensor) -> Path:
    """The composition's x0_hat per step of its own sampler and grid (parent 0's units)."""
    denoiser = composed.denoiser(obs)
    path: Path = []
    unnormalize = composed.parents[0].action_normalizer.unnormalize
    composed.run_sampler(
        _tapped(denoiser, path, unnormalize), noise.to(composed.dtype), composed.sigmas(denoiser)
    )
    return path


def record_paths(stream: Any, paths: dict[str, Path]) -> None:
    """Each named path on the `denoising_step` timeline."""
    rr = rerun()
    for name, path in paths.items():
        for step, (sigma, x0_hat) in enumerate(path):
            stream.set_time("denoising_step", sequence=step)
            stream.log(f"denoising/{name}/x0_hat", rr.LineStrips3D([points3d(x0_hat)]))
            stream.log(f"denoising/{name}/sigma", rr.Scalars(min(sigma, 1e6)))

"""Samplers in sigma space, on any denoiser `(x, sigma) -> DenoiserOutput`.

Every step is written in DDIM form (x0_hat = D, eps_hat, x' = x0_hat + sigma' * eps_hat), which is
Euler on the probability-flow ODE dx/dsigma = eps_hat (Karras et al. 2022, Eq. 4 with s(t) = 1),
and stays finite when the grid starts at sigma = inf (see `robocompose.policies.denoiser`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from robocompose.policies.denoiser import DenoiserOutput, initial_noise_to_x

DenoiseFn = Callable[[torch.Tensor, float], DenoiserOutput]


def _check_sigmas(sigmas: Sequence[float]) -> None:
    if len(sigmas) < 2 or sigmas[-1] != 0.0:
        raise ValueError(f"`sigmas` must have >= 2 entries and end at 0. Got {list(sigmas)}.")
    if any(a <= b for a, b in zip(sigmas[:-1], sigmas[1:], strict=True)):
        raise ValueError(f"`sigmas` must be strictly decreasing. Got {list(sigmas)}.")


@torch.no_grad()
def sample_euler(denoise: DenoiseFn, noise: torch.Tensor, sigmas: Sequence[float]) -> torch.Tensor:
    """Deterministic Euler (= DDIM with eta 0) from unit `noise` (B, H, A) down `sigmas` to 0."""
    _check_sigmas(sigmas)
    x = initial_noise_to_x(noise, sigmas[0])
    for sigma, sigma_next in zip(sigmas[:-1], sigmas[1:], strict=True):
        out = denoise(x, sigma)
        x = out.x0_hat if sigma_next == 0.0 else out.x0_hat + sigma_next * out.eps_hat
    return x

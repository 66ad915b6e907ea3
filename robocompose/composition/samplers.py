"""Samplers in sigma space, on any denoiser `(x, sigma) -> DenoiserOutput`.

Every step is written in DDIM form (x0_hat = D, eps_hat, x' = x0_hat + sigma' * eps_hat), which is
Euler on the probability-flow ODE dx/dsigma = eps_hat (Karras et al. 2022, Eq. 4 with s(t) = 1),
and stays finite when the grid starts at sigma = inf (see `robocompose.policies.denoiser`).

Every sampler is `sampler(denoise, noise, sigmas, *, generator, **kwargs)`: the deterministic
ones ignore `generator`, so a caller passes one whatever sampler it runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from robocompose.policies.denoiser import DenoiserOutput, initial_noise_to_x

TARGET_ACCEPT = 0.57  # MALA's optimal acceptance rate (Roberts & Rosenthal 1998)

DenoiseFn = Callable[[torch.Tensor, float], DenoiserOutput]
# One generator for the batch, or one per batch row: per-row generators make each row's draws
# independent of which other rows share its batch (an episode's noise must not depend on that).
# Generators are CPU ones: draws are made on the CPU in the sample's dtype and then moved to its
# device, so one seed gives the same sample on a CPU, a GPU or MPS.
Rng = torch.Generator | Sequence[torch.Generator] | None


def _draw(sample, shape: Sequence[int], rng: Rng, like: torch.Tensor) -> torch.Tensor:
    if rng is None or isinstance(rng, torch.Generator):
        draw = sample(tuple(shape), generator=rng, dtype=like.dtype)
    else:
        draw = torch.stack([sample(tuple(shape[1:]), generator=g, dtype=like.dtype) for g in rng])
    return draw.to(like.device)


def randn(shape: Sequence[int], rng: Rng, like: torch.Tensor) -> torch.Tensor:
    """Unit normal draws of `shape` in `like`'s dtype and on its device."""
    return _draw(torch.randn, shape, rng, like)


def rand(shape: Sequence[int], rng: Rng, like: torch.Tensor) -> torch.Tensor:
    """Uniform [0, 1) draws of `shape` in `like`'s dtype and on its device."""
    return _draw(torch.rand, shape, rng, like)


class RowGenerators(Sequence[torch.Generator]):
    """`row_generators(noise)`, made on first use: a deterministic sampler never asks for them,
    so it never reads the noise's values (a tensor on `meta` has none)."""

    def __init__(self, noise: torch.Tensor) -> None:
        self._noise = noise
        self._made: list[torch.Generator] | None = None

    def _generators(self) -> list[torch.Generator]:
        if self._made is None:
            self._made = row_generators(self._noise)
        return self._made

    def __len__(self) -> int:
        return len(self._generators())

    def __getitem__(self, i: int) -> torch.Generator:  # type: ignore[override]
        return self._generators()[i]


def row_generators(noise: torch.Tensor) -> list[torch.Generator]:
    """One CPU generator per batch row, seeded from that row's noise values (summed on the CPU,
    so noise on a GPU seeds the same draws as on the CPU)."""
    seeds = (noise.detach().cpu().flatten(1).double().abs().sum(1) * 1e6).long() % (2**62)
    return [torch.Generator().manual_seed(int(s)) for s in seeds]


def _check_sigmas(sigmas: Sequence[float]) -> None:
    if len(sigmas) < 2 or sigmas[-1] != 0.0:
        raise ValueError(f"`sigmas` must have >= 2 entries and end at 0. Got {list(sigmas)}.")
    if any(a <= b for a, b in zip(sigmas[:-1], sigmas[1:], strict=True)):
        raise ValueError(f"`sigmas` must be strictly decreasing. Got {list(sigmas)}.")


@torch.no_grad()
def sample_euler(
    denoise: DenoiseFn, noise: torch.Tensor, sigmas: Sequence[float], *, generator: Rng = None
) -> torch.Tensor:
    """Deterministic Euler (= DDIM with eta 0) from unit `noise` (B, H, A) down `sigmas` to 0.

    A denoiser with an `euler_step(x, sigma, sigma_next)` takes the step itself (the composed
    one folds it into its operator); where that returns None the step is taken here."""
    _check_sigmas(sigmas)
    x = initial_noise_to_x(noise, sigmas[0])
    own_step = getattr(denoise, "euler_step", None)
    for sigma, sigma_next in zip(sigmas[:-1], sigmas[1:], strict=True):
        stepped = own_step(x, sigma, sigma_next) if own_step is not None else None
        if stepped is not None:
            x = stepped
            continue
        out = denoise(x, sigma)
        x = out.x0_hat if sigma_next == 0.0 else out.x0_hat + sigma_next * out.eps_hat
    return x


@torch.no_grad()
def sample_heun(
    denoise: DenoiseFn, noise: torch.Tensor, sigmas: Sequence[float], *, generator: Rng = None
) -> torch.Tensor:
    """Heun's 2nd-order method (Karras et al. 2022, Algorithm 1 without churn).

    A step from sigma = inf has no trapezoid to take and falls back to Euler; the last step (to
    sigma 0) is Euler too, as in the paper.
    """
    _check_sigmas(sigmas)
    x = initial_noise_to_x(noise, sigmas[0])
    for sigma, sigma_next in zip(sigmas[:-1], sigmas[1:], strict=True):
        out = denoise(x, sigma)
        if sigma_next == 0.0 or math.isinf(sigma):
            x = out.x0_hat if sigma_next == 0.0 else out.x0_hat + sigma_next * out.eps_hat
            continue
        x_euler = x + (sigma_next - sigma) * out.eps_hat
        out_next = denoise(x_euler, sigma_next)
        x = x + (sigma_next - sigma) * 0.5 * (out.eps_hat + out_next.eps_hat)
    return x


def ancestral_step(
    out: DenoiserOutput, sigma: float, sigma_next: float, generator: Rng
) -> torch.Tensor:
    """DDPM-style ancestral step (k-diffusion's `get_ancestral_step`, eta 1): go down to
    sigma_down deterministically, add fresh noise of std sigma_up, sigma_down^2 + sigma_up^2 =
    sigma_next^2. At sigma = inf all of sigma_next is fresh noise."""
    if sigma_next == 0.0:
        return out.x0_hat
    ratio = 0.0 if math.isinf(sigma) else (sigma_next / sigma) ** 2
    sigma_up = sigma_next * math.sqrt(1.0 - ratio)
    sigma_down = math.sqrt(max(sigma_next**2 - sigma_up**2, 0.0))
    z = randn(out.x0_hat.shape, generator, out.x0_hat)
    return out.x0_hat + sigma_down * out.eps_hat + sigma_up * z


@torch.no_grad()
def sample_ancestral(
    denoise: DenoiseFn,
    noise: torch.Tensor,
    sigmas: Sequence[float],
    *,
    generator: Rng = None,
) -> torch.Tensor:
    """Stochastic sampler: Euler-Maruyama on the reverse SDE in its ancestral (DDPM) form."""
    _check_sigmas(sigmas)
    x = initial_noise_to_x(noise, sigmas[0])
    for sigma, sigma_next in zip(sigmas[:-1], sigmas[1:], strict=True):
        x = ancestral_step(denoise(x, sigma), sigma, sigma_next, generator)
    return x


@torch.no_grad()
def sample_annealed_mcmc(
    denoise: DenoiseFn,
    noise: torch.Tensor,
    sigmas: Sequence[float],
    *,
    generator: Rng = None,
    mcmc_steps: int = 10,
    step_scale: float = 0.1,
    method: str = "mala",
) -> torch.Tensor:
    """Euler between noise levels plus MCMC at each level (Du et al. 2023, "Reduce, Reuse,
    Recycle"): the corrector targets the density whose score the composed denoiser gives at that
    level, so a product of experts is sampled, not just the composed ODE's end point.

    "ula" is unadjusted Langevin with step size step_scale * sigma^2 at level sigma. "mala" adds
    a Metropolis test whose log-density difference is the trapezoid line integral of the score
    between the two points (exact for Gaussians, needs no energy model), and adapts its step size
    toward an acceptance rate of 0.57 (carried from level to level): at low sigma a fixed
    sigma^2 step barely moves. The last level before 0 is corrected, then denoised once.
    """
    if method not in ("ula", "mala"):
        raise ValueError(f"`method` must be 'ula' or 'mala'. Got {method!r}.")
    _check_sigmas(sigmas)
    if math.isinf(sigmas[0]):
        raise ValueError("annealed MCMC needs a finite sigma_max (scores vanish at inf).")
    x = initial_noise_to_x(noise, sigmas[0])
    dims = tuple(range(1, x.ndim))
    eps_size: float | None = None
    out = denoise(x, sigmas[0])
    for sigma_next in sigmas[1:]:
        if sigma_next == 0.0:
            return out.x0_hat
        x = out.x0_hat + sigma_next * out.eps_hat
        if method == "ula" or eps_size is None:
            eps_size = step_scale * sigma_next**2
        score = -denoise(x, sigma_next).eps_hat / sigma_next
        for _ in range(mcmc_steps):
            z = randn(x.shape, generator, x)
            proposal = x + eps_size * score + math.sqrt(2 * eps_size) * z
            score_p = -denoise(proposal, sigma_next).eps_hat / sigma_next
            if method == "ula":
                x, score = proposal, score_p
                continue
            log_ratio = (0.5 * (score + score_p) * (proposal - x)).sum(dims)
            forward = ((proposal - x - eps_size * score) ** 2).sum(dims)
            backward = ((x - proposal - eps_size * score_p) ** 2).sum(dims)
            log_accept = log_ratio - (backward - forward) / (4 * eps_size)
            u = rand(log_accept.shape, generator, x)
            accept = (torch.log(u) < log_accept).view(-1, *([1] * (x.ndim - 1)))
            x = torch.where(accept, proposal, x)
            score = torch.where(accept, score_p, score)
            eps_size *= 1.2 if accept.double().mean().item() > TARGET_ACCEPT else 1 / 1.2
        eps_hat = -score * sigma_next  # D at the corrected point, reused for the next move
        out = DenoiserOutput(x - sigma_next * eps_hat, eps_hat)
    return out.x0_hat


SAMPLERS = {
    "euler": sample_euler,
    "heun": sample_heun,
    "ancestral": sample_ancestral,
    "mcmc": sample_annealed_mcmc,
}

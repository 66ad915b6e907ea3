"""The selector: at every chunk, candidate chunks from each parent alone and from the convex
composition, one of them picked per row by a score the parents' own samples give (no reward, no
training).

Candidates are compared on the executed steps, in parent 0's normalised action space (parents of
other horizons align there only, as in the mixture). Candidate 0 of parent i runs on the chunk's
own noise, so the selector's candidates include exactly what parent i alone would have done; the
further candidates draw their noise from per-row generators seeded by the row's noise, so a row's
chunk does not depend on the batch it runs in.

Scores (higher is better), each a (C, B) tensor over C candidates and B rows:
- `agreement`: minus the mean distance to the other candidates (the medoid wins): the chunk
  most of the parents' samples agree with.
- `denoising`: minus the parents' summed denoising error on the candidate at a few noise levels
  (a likelihood proxy along the path; the probe the issue reports did not work on its own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from robocompose.composition.samplers import RowGenerators, randn

if TYPE_CHECKING:
    from robocompose.composition.methods import Composition

DENOISING_SIGMAS = (0.1, 0.5, 1.0)  # where `denoising` probes the parents


def _executed(policy: Composition, i: int, chunk: torch.Tensor) -> torch.Tensor:
    """Parent i's chunk (in env units, its own horizon) -> the executed steps, normalised in
    parent 0's action space."""
    n_exec = policy.executed.stop - policy.executed.start
    begin = policy.executed.start - policy.starts[i]
    steps = chunk[:, begin : begin + n_exec]
    return policy.parents[0].action_normalizer.normalize(steps)


def candidates(
    policy: Composition, obs: dict[str, torch.Tensor], noise: torch.Tensor, per_parent: int
) -> tuple[torch.Tensor, list[str]]:
    """(C, B, n_exec, A) candidates in parent 0's normalised space and their sources:
    `per_parent` native samples of each parent, then one composed sample (the configured
    operator at the configured weights on the configured sampler)."""
    generators = RowGenerators(noise)
    steps = policy.steps
    chunks, sources = [], []
    for i, parent in enumerate(policy.parents):
        view = policy.parent_view(parent, obs)
        horizon = parent.config.horizon
        for j in range(per_parent):
            own = (
                noise[:, :horizon] if j == 0 else randn(noise[:, :horizon].shape, generators, noise)
            )
            with policy.times.sampling(i, noise.shape[0]):
                chunks.append(_executed(policy, i, parent.sample(view, steps, own)))
            sources.append(f"parent{i}")
    denoiser = policy.denoiser(obs)
    composed = policy.run_sampler(denoiser, noise, policy.sigmas(denoiser))
    chunks.append(composed[:, policy.executed])
    sources.append("composition")
    return torch.stack(chunks), sources


def agreement(policy: Composition, obs, chunks: torch.Tensor) -> torch.Tensor:
    """Minus each candidate's mean distance to the others (C, B)."""
    flat = chunks.flatten(2)  # (C, B, n * A)
    distances = torch.cdist(flat.transpose(0, 1), flat.transpose(0, 1)).transpose(0, 1)
    return -distances.sum(-1) / max(chunks.shape[0] - 1, 1)


def denoising(policy: Composition, obs, chunks: torch.Tensor) -> torch.Tensor:
    """Minus the parents' summed denoising error on each candidate (C, B), each candidate
    noised at DENOISING_SIGMAS with fixed per-level noise and denoised by every parent on the
    executed window it covers."""
    c, b = chunks.shape[:2]
    error = torch.zeros(c, b, dtype=chunks.dtype, device=chunks.device)
    generator = torch.Generator().manual_seed(0)
    for i, parent in enumerate(policy.parents):
        view = policy.parent_view(parent, obs)
        cond = parent.encode(view)
        denoiser = parent.denoiser_for(cond.repeat(c, 1))
        begin = policy.executed.start - policy.starts[i]
        x0 = chunks.flatten(0, 1)  # (C * B, n, A) in parent 0's space
        norm0, norm_i = policy.parents[0].action_normalizer, parent.action_normalizer
        x0 = norm_i.normalize(norm0.unnormalize(x0))
        full = torch.zeros(c * b, parent.config.horizon, x0.shape[-1], dtype=x0.dtype)
        window = slice(begin, begin + x0.shape[1])
        for sigma in DENOISING_SIGMAS:
            eps = torch.randn(full.shape, generator=generator, dtype=x0.dtype)
            noisy = full.clone()
            noisy[:, window] = x0
            noisy = noisy + sigma * eps
            out = denoiser(noisy, sigma)
            err = (out.x0_hat[:, window] - x0).pow(2).flatten(1).mean(1)
            error += err.view(c, b)
    return -error


Score = Callable[["Composition", dict, torch.Tensor], torch.Tensor]
SCORES: dict[str, Score] = {"agreement": agreement, "denoising": denoising}

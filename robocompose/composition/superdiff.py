"""SuperDiff (Skreta et al. 2024): AND / OR with per-step weights from Ito density estimates.

Along a trajectory of the reverse SDE, each parent's log-density can be tracked without
divergences (their Theorem 1). For the variance-exploding view used here (forward drift 0,
g^2 dt = d(sigma^2)), an Euler-Maruyama step from sigma to sigma' with h = sigma^2 - sigma'^2,

    dx = h * sum_i kappa_i s_i + sqrt(h) z,      s_i = -eps_i / sigma (parent i's score)

changes log q_i by   d ell_i = <dx, s_i> - (h / 2) |s_i|^2.

- OR (mixture with prior weights w): kappa = softmax_i(ell_i + log w_i).
- AND (K = 2, equal density): kappa_1 solves ell_1 + d ell_1 = ell_2 + d ell_2 for this step's
  z, which gives kappa_1 = 1/2 + (ell_2 - ell_1 - sqrt(h) <z, d>) / (h |d|^2), d = s_1 - s_2.

Weights are per sample (per batch row). The grid must start at a finite sigma.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from robocompose.composition.samplers import Rng, _check_sigmas, randn
from robocompose.policies.denoiser import DenoiserOutput, initial_noise_to_x

ParentsFn = Callable[[torch.Tensor, float], list[DenoiserOutput]]
MODES = ("and", "or")


@torch.no_grad()
def sample_superdiff(
    parent_outputs: ParentsFn,
    noise: torch.Tensor,
    sigmas: Sequence[float],
    *,
    generator: Rng = None,
    mode: str,
    weights: Sequence[float] | None = None,
    return_log_density: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """`parent_outputs(x, sigma)` -> every parent's (x0_hat, eps_hat) at one point; the
    samplers' signature (see `composition.samplers`), with `mode` "and" or "or".

    With `return_log_density`, also the tracked change of each parent's log-density from the
    start to the last nonzero sigma, (K, B)."""
    if mode not in MODES:
        raise ValueError(f"`mode` must be one of {MODES}. Got {mode!r}.")
    _check_sigmas(sigmas)
    if math.isinf(sigmas[0]):
        raise ValueError("SuperDiff needs a finite sigma_max; use a Karras grid.")
    x = initial_noise_to_x(noise, sigmas[0])
    dims = tuple(range(1, x.ndim))
    ell: torch.Tensor | None = None
    for sigma, sigma_next in zip(sigmas[:-1], sigmas[1:], strict=True):
        outs = parent_outputs(x, sigma)
        k = len(outs)
        if ell is None:
            ell = x.new_zeros(k, x.shape[0])
            log_w = torch.log(x.new_tensor(weights or [1.0 / k] * k))
        scores = torch.stack([-o.eps_hat / sigma for o in outs])  # (K, B, H, A)
        z = randn(x.shape, generator, x)
        h = sigma**2 - sigma_next**2
        if mode == "or":
            kappa = torch.softmax(ell + log_w[:, None], dim=0)  # (K, B)
        else:
            if k != 2:
                raise ValueError(f"SuperDiff AND is defined here for 2 parents. Got {k}.")
            d = scores[0] - scores[1]
            d2 = (d * d).sum(dims).clamp_min(1e-12)
            zd = (z * d).sum(dims)
            kappa_1 = 0.5 + (ell[1] - ell[0] - math.sqrt(h) * zd) / (h * d2)
            kappa = torch.stack([kappa_1, 1 - kappa_1])
        shape = (k, -1, *([1] * (x.ndim - 1)))
        if sigma_next == 0.0:
            x0 = (kappa.view(shape) * torch.stack([o.x0_hat for o in outs])).sum(0)
            return (x0, ell) if return_log_density else x0
        dx = h * (kappa.view(shape) * scores).sum(0) + math.sqrt(h) * z
        ell = (
            ell
            + (dx[None] * scores).sum(tuple(d + 1 for d in dims))
            - 0.5 * h * (scores * scores).sum(tuple(d + 1 for d in dims))
        )
        x = x + dx
    return x

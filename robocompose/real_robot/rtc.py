"""Real-time chunking for denoiser policies: inpaint the committed prefix of the next chunk.

While a chunk executes, the next one is sampled; its first k actions will run before it arrives,
so they are already decided ("committed"). Black et al. 2025 ("Real-Time Execution of Action
Chunking Flow Policies") sample the new chunk with guidance toward those actions: full weight on
the committed prefix, a weight decaying to 0 over the rest of the old chunk's overlap, so the new
chunk joins the old one without a jump and is free where the old chunk says nothing.

Here the guidance acts on the denoiser, so it works for any sigma-space sampler and for a single
or a composed policy alike: at every step the prediction x0_hat of position i is pulled toward the
committed action by weight w_i,

    x0' = x0_hat + w * (a_committed - x0_hat),    eps' = (x - x0') / sigma

(eps' keeps the DDIM-form step x_next = x0' + sigma_next * eps' consistent with x0'; at
sigma = inf, where x holds the unit noise, eps_hat is kept). With w = 1 on the prefix the last
step (sigma_next = 0) returns exactly the committed actions there ("hard" mode, replacement
inpainting); "soft" mode adds the decaying tail and may weigh the prefix below 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from robocompose.policies.denoiser import Denoiser, DenoiserOutput

GUIDANCE_MODES = ("hard", "soft")


@dataclass(frozen=True)
class PrefixGuidance:
    """How strongly a new chunk is pulled toward the previous chunk's actions.

    The client sends the m actions of the previous chunk that overlap the new one, of which the
    first k are committed (they run before the new chunk arrives). "hard": all m are replaced.
    "soft": weight `prefix_weight` on the k committed, then Black et al.'s exponentially
    decaying weight over the other m - k, 0 past them."""

    mode: str = "soft"
    prefix_weight: float = 1.0

    def __post_init__(self) -> None:
        if self.mode not in GUIDANCE_MODES:
            raise ValueError(f"`mode` must be one of {GUIDANCE_MODES}. Got {self.mode!r}.")
        if not 0.0 < self.prefix_weight <= 1.0:
            raise ValueError(f"`prefix_weight` must be in (0, 1]. Got {self.prefix_weight}.")

    def weights(self, committed: int, given: int) -> torch.Tensor:
        """w_i for the `given` positions with a target, the first `committed` of them fixed:
        (given,). Soft tail: c_i = (given - i) / (given - committed + 1) for committed <= i,
        w_i = c_i (e^c_i - 1) / (e - 1), which falls from near 1 to near 0."""
        if not 0 <= committed <= given:
            raise ValueError(f"need 0 <= committed <= given. Got {committed}, {given}.")
        if self.mode == "hard":
            return torch.ones(given, dtype=torch.float64)
        w = torch.zeros(given, dtype=torch.float64)
        w[:committed] = self.prefix_weight
        for i in range(committed, given):
            c = (given - i) / (given - committed + 1)
            w[i] = c * math.expm1(c) / math.expm1(1.0)
        return w


class PrefixGuidedDenoiser(Denoiser):
    """`denoiser` with its x0_hat pulled toward `target` at chunk positions offset..offset+L-1.

    `target` (B, L, A) is in the denoiser's (normalised) action space, `weights` (L,) in [0, 1]."""

    def __init__(
        self, denoiser: Denoiser, target: torch.Tensor, weights: torch.Tensor, offset: int = 0
    ) -> None:
        horizon = denoiser.horizon
        if offset < 0 or offset + len(weights) > horizon:
            raise ValueError(
                f"guided positions [{offset}, {offset + len(weights)}) must lie inside the "
                f"chunk [0, {horizon})."
            )
        if target.shape[1] != len(weights) or target.shape[-1] != denoiser.action_dim:
            raise ValueError(
                f"`target` must be (B, {len(weights)}, {denoiser.action_dim}). "
                f"Got {tuple(target.shape)}."
            )
        self.inner = denoiser
        self.horizon, self.action_dim = horizon, denoiser.action_dim
        self.sigma_max, self.sigma_min = denoiser.sigma_max, denoiser.sigma_min
        self.sound_at_inf = denoiser.sound_at_inf
        self.target = target
        self.weights = weights.to(target.dtype).view(1, -1, 1)
        self.window = slice(offset, offset + len(weights))

    def sigmas(self, steps: int) -> list[float]:
        return self.inner.sigmas(steps)

    def __call__(self, x: torch.Tensor, sigma: float) -> DenoiserOutput:
        out = self.inner(x, sigma)
        x0, eps, w = out.x0_hat.clone(), out.eps_hat, self.window
        part = x0[:, w]
        x0[:, w] = part + self.weights.to(part.dtype) * (self.target.to(part) - part)
        if not (math.isinf(sigma) or sigma == 0.0):  # positions outside the window keep theirs
            eps = eps.clone()
            eps[:, w] = (x[:, w] - x0[:, w]) / sigma
        return DenoiserOutput(x0, eps)

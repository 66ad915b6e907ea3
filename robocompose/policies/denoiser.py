"""The one interface composition rests on: a denoiser in the EDM view (Karras et al. 2022).

    x = a0 + sigma * n,  n ~ N(0, I)        D(x; sigma) ~= E[a0 | x]

Every Gaussian-path generative policy becomes such a D after reparametrisation:

| trained as                    | sigma           | model input        | x0_hat                  |
|-------------------------------|-----------------|--------------------|-------------------------|
| DDPM eps-prediction, ab_t     | sqrt((1-ab)/ab) | x / sqrt(1+s^2)    | x - sigma * eps_hat     |
| DDPM sample (x0) prediction   | same            | same               | model output            |
| DDPM v-prediction             | same            | same               | sqrt(ab)x_in-sqrt(1-ab)v |
| flow x_t = (1-t) a0 + t n     | t / (1-t)       | x / (1+s) (= x_t)  | x_t - t * v_hat         |

A denoiser returns the pair (x0_hat, eps_hat) with eps_hat = (x - x0_hat) / sigma. At sigma = inf
(a flow at t = 1, pure noise) x itself is infinite, so the convention is: **at sigma = inf the
caller passes the unit noise n in place of x**. eps_hat stays finite there (a flow's
eps_hat = x_t + (1 - t) v_hat), and the DDIM-form step x' = x0_hat + sigma' * eps_hat needs nothing
else. A discrete-time model asked for a sigma between two trained steps is fed the fractional
timestep found by interpolating in log-sigma (as k-diffusion wraps DDPM models); above its largest
trained sigma it is clamped to its last timestep.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch

from robocompose.policies.networks import BoundBackbone

# (x: (B, H, A), timestep: (B,) float) -> network output (B, H, A), observation already bound.
BoundNet = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class DenoiserOutput(NamedTuple):
    x0_hat: torch.Tensor  # (B, H, A) predicted clean action chunk (normalised space)
    eps_hat: torch.Tensor  # (B, H, A) predicted unit noise


class Affine(NamedTuple):
    """A denoiser adapter in scalars at one sigma: x_in = a x, x0_hat = p x_in + q out,
    eps_hat = r x_in + s out, where `out` is the network's output on x_in."""

    a: float
    p: float
    q: float
    r: float
    s: float


class Denoiser(ABC):
    """D(x; sigma) for one observation batch: (B, H, A) -> DenoiserOutput.

    Attributes: `horizon`, `action_dim`, and `sigma_max` (may be inf) / `sigma_min`, the range
    it was trained on. `sigmas(steps)` is its native sampling grid, decreasing, ending at 0.
    `sound_at_inf`: whether D at sigma = inf (given the unit noise) is a usable estimate.
    """

    horizon: int
    action_dim: int
    sigma_max: float
    sigma_min: float
    sound_at_inf: bool = True

    @abstractmethod
    def __call__(self, x: torch.Tensor, sigma: float) -> DenoiserOutput: ...

    @abstractmethod
    def sigmas(self, steps: int) -> list[float]: ...

    def prepare(self, sigmas: Sequence[float]) -> None:
        """Told the grid before sampling on it: whatever depends on sigma alone can be
        computed for every level at once. Calls at other sigmas must still work. Nothing to
        do by default."""
        return None


class NetworkDenoiser(Denoiser):
    """An adapter around a trained network: input scaling and timestep in, conversion out.

    The two halves are separate so that K parents' networks can run as one stacked network
    between them (`robocompose.composition.fused`), whatever family each adapter is."""

    net: BoundNet
    # sigma -> the network's conditioning there (see `prepare`)
    prepared: dict[float, torch.Tensor] | None = None

    def net_timestep(self, sigma: float) -> float:
        """The timestep the network is fed at noise level sigma (what `net_input` gives; a
        family overrides this to skip the call)."""
        probe = torch.zeros(1, self.horizon, self.action_dim, dtype=torch.float64)
        return float(self.net_input(probe, sigma)[1][0])

    @abstractmethod
    def net_input(self, x: torch.Tensor, sigma: float) -> tuple[torch.Tensor, torch.Tensor]:
        """(network input x_in (B, H, A), timestep (B,) = `net_timestep(sigma)`) for x at
        noise level sigma."""

    @abstractmethod
    def from_net_output(
        self, x_in: torch.Tensor, sigma: float, out: torch.Tensor
    ) -> DenoiserOutput: ...

    def affine(self, sigma: float) -> Affine | None:
        """The adapter at sigma as an `Affine`, when it is one (the built-in families): a
        composition then folds every parent's adapter and the operator into a few ops on the
        stacked output. None: not known, the adapter is called."""
        return None

    def prepare(self, sigmas: Sequence[float]) -> None:
        """A backbone's conditioning at every level of the grid, in one call."""
        if not isinstance(self.net, BoundBackbone):
            return
        levels = evaluated_levels(sigmas)
        cond = self.net.cond
        timesteps = [self.net_timestep(s) for s in levels]
        stacked = self.net.conditioning(
            torch.tensor(timesteps, dtype=cond.dtype, device=cond.device)
        )
        self.prepared = dict(zip(levels, stacked, strict=True))

    def __call__(self, x: torch.Tensor, sigma: float) -> DenoiserOutput:
        x_in, timestep = self.net_input(x, sigma)
        conditioning = self.prepared.get(sigma) if self.prepared else None
        if conditioning is None:
            return self.from_net_output(x_in, sigma, self.net(x_in, timestep))
        assert isinstance(self.net, BoundBackbone)
        return self.from_net_output(x_in, sigma, self.net.conditioned(x_in, conditioning))


def evaluated_levels(sigmas: Sequence[float]) -> list[float]:
    """The distinct noise levels a sampler evaluates on a grid: all but sigma 0, where the
    last step returns x0_hat."""
    return [s for s in dict.fromkeys(sigmas) if s != 0.0]


def initial_noise_to_x(noise: torch.Tensor, sigma_max: float) -> torch.Tensor:
    """The sampler's starting x for unit noise n at sigma_max.

    x = sqrt(1 + sigma_max^2) n: the scale of a0 + sigma n for data of unit scale, and what
    DDIM's x_T ~ N(0, I) is in these coordinates. At sigma_max = inf, x = n by convention.
    """
    if math.isinf(sigma_max):
        return noise
    return noise * math.sqrt(1.0 + sigma_max**2)

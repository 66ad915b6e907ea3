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
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch

# (x: (B, H, A), timestep: (B,) float) -> network output (B, H, A), observation already bound.
BoundNet = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class DenoiserOutput(NamedTuple):
    x0_hat: torch.Tensor  # (B, H, A) predicted clean action chunk (normalised space)
    eps_hat: torch.Tensor  # (B, H, A) predicted unit noise


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


class NetworkDenoiser(Denoiser):
    """An adapter around a trained network: input scaling and timestep in, conversion out.

    The two halves are separate so that K parents' networks can run as one stacked network
    between them (`robocompose.composition.fused`), whatever family each adapter is."""

    net: BoundNet

    @abstractmethod
    def net_input(self, x: torch.Tensor, sigma: float) -> tuple[torch.Tensor, torch.Tensor]:
        """(network input x_in (B, H, A), timestep (B,)) for x at noise level sigma."""

    @abstractmethod
    def from_net_output(
        self, x_in: torch.Tensor, sigma: float, out: torch.Tensor
    ) -> DenoiserOutput: ...

    def __call__(self, x: torch.Tensor, sigma: float) -> DenoiserOutput:
        x_in, timestep = self.net_input(x, sigma)
        return self.from_net_output(x_in, sigma, self.net(x_in, timestep))


def initial_noise_to_x(noise: torch.Tensor, sigma_max: float) -> torch.Tensor:
    """The sampler's starting x for unit noise n at sigma_max.

    x = sqrt(1 + sigma_max^2) n: the scale of a0 + sigma n for data of unit scale, and what
    DDIM's x_T ~ N(0, I) is in these coordinates. At sigma_max = inf, x = n by convention.
    """
    if math.isinf(sigma_max):
        return noise
    return noise * math.sqrt(1.0 + sigma_max**2)


class DiscreteDiffusionDenoiser(NetworkDenoiser):
    """A DDPM-family network (eps / sample / v prediction) trained on discrete timesteps."""

    def __init__(
        self,
        net: BoundNet,
        alphas_cumprod: torch.Tensor,
        prediction_type: str,
        horizon: int,
        action_dim: int,
    ) -> None:
        if prediction_type not in ("epsilon", "sample", "v_prediction"):
            raise ValueError(
                "`prediction_type` must be one of epsilon, sample, v_prediction. "
                f"Got {prediction_type!r}."
            )
        ab = alphas_cumprod.double().cpu().numpy()
        self.net = net
        self.prediction_type = prediction_type
        self.horizon, self.action_dim = horizon, action_dim
        self.alphas_cumprod = ab
        self.sigma_table = np.sqrt((1.0 - ab) / ab)  # increasing in t
        self.log_sigma_table = np.log(self.sigma_table)
        self.sigma_min, self.sigma_max = float(self.sigma_table[0]), float(self.sigma_table[-1])
        # eps-prediction's x0 = (x_in - sqrt(1 - ab) eps) / sqrt(ab) amplifies an eps error by
        # 1/sqrt(ab) ~ 2000 at the top step of a 100-step cosine schedule (zero terminal SNR, Lin
        # et al. 2023); v- and x0-prediction stay well-conditioned there.
        self.sound_at_inf = prediction_type != "epsilon"

    def timestep(self, sigma: float) -> float:
        """Fractional timestep for `sigma`, interpolated in log-sigma; clamped to the table."""
        if math.isinf(sigma):
            return float(len(self.sigma_table) - 1)
        grid = np.arange(len(self.sigma_table), dtype=np.float64)
        return float(np.interp(math.log(sigma), self.log_sigma_table, grid))

    def sigmas(self, steps: int) -> list[float]:
        """DDIM's "leading" spacing (diffusers' default): t = k * (T // steps), then sigma 0."""
        stride = len(self.sigma_table) // steps
        timesteps = np.arange(steps)[::-1] * stride
        return [float(self.sigma_table[t]) for t in timesteps] + [0.0]

    def net_input(self, x: torch.Tensor, sigma: float) -> tuple[torch.Tensor, torch.Tensor]:
        # at sigma = inf x holds the unit noise, which is already the VP-scaled input
        x_in = x if math.isinf(sigma) else x / math.sqrt(1.0 + sigma**2)
        t = self.timestep(sigma)
        return x_in, torch.full((x.shape[0],), t, dtype=x.dtype, device=x.device)

    def from_net_output(
        self, x_in: torch.Tensor, sigma: float, out: torch.Tensor
    ) -> DenoiserOutput:
        ab = 1.0 / (1.0 + (self.sigma_max if math.isinf(sigma) else sigma) ** 2)
        if self.prediction_type == "epsilon":
            eps_hat = out
            x0_hat = (x_in - math.sqrt(1.0 - ab) * eps_hat) / math.sqrt(ab)
        elif self.prediction_type == "v_prediction":
            x0_hat = math.sqrt(ab) * x_in - math.sqrt(1.0 - ab) * out
            eps_hat = math.sqrt(1.0 - ab) * x_in + math.sqrt(ab) * out
        else:
            x0_hat = out
            eps_hat = (x_in - math.sqrt(ab) * x0_hat) / math.sqrt(1.0 - ab)
        return DenoiserOutput(x0_hat, eps_hat)


class FlowDenoiser(NetworkDenoiser):
    """A rectified-flow network: x_t = (1 - t) a0 + t n, v_hat ~ n - a0, t in [0, 1].

    The network is fed `t * time_scale` so its time embedding sees the same range as a DDPM's.
    """

    sigma_min = 0.0
    sigma_max = math.inf

    def __init__(self, net: BoundNet, horizon: int, action_dim: int, time_scale: float) -> None:
        self.net = net
        self.horizon, self.action_dim = horizon, action_dim
        self.time_scale = time_scale

    def sigmas(self, steps: int) -> list[float]:
        """Uniform in t from 1 to 0 (the flow's own Euler grid), as sigma = t / (1 - t)."""
        ts = np.linspace(1.0, 0.0, steps + 1)
        return [math.inf if t >= 1.0 else float(t / (1.0 - t)) for t in ts]

    @staticmethod
    def time(sigma: float) -> float:
        return 1.0 if math.isinf(sigma) else sigma / (1.0 + sigma)

    def net_input(self, x: torch.Tensor, sigma: float) -> tuple[torch.Tensor, torch.Tensor]:
        x_t = x if math.isinf(sigma) else x / (1.0 + sigma)  # at inf x holds x_1, the noise
        tt = self.time(sigma) * self.time_scale
        return x_t, torch.full((x.shape[0],), tt, dtype=x.dtype, device=x.device)

    def from_net_output(
        self, x_in: torch.Tensor, sigma: float, out: torch.Tensor
    ) -> DenoiserOutput:
        t = self.time(sigma)
        return DenoiserOutput(x_in - t * out, x_in + (1.0 - t) * out)

"""Flow-matching policy: rectified flow x_t = (1 - t) a0 + t n, velocity target n - a0, Euler."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from robocompose.policies.base import GenerativePolicy, register_family
from robocompose.policies.config import PolicyConfig
from robocompose.policies.denoiser import Affine, BoundNet, DenoiserOutput, NetworkDenoiser


@dataclass
class FlowConfig(PolicyConfig):
    """Flow's settings: the network sees t * flow_time_scale, the same range as a DDPM
    timestep, so one backbone (and its time embedding) serves both families."""

    family: str = "flow"
    flow_time_scale: float = 100.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.flow_time_scale > 0:
            raise ValueError(f"`flow_time_scale` must be > 0. Got {self.flow_time_scale}.")


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

    def net_timestep(self, sigma: float) -> float:
        return self.time(sigma) * self.time_scale

    def net_input(self, x: torch.Tensor, sigma: float) -> tuple[torch.Tensor, torch.Tensor]:
        x_t = x if math.isinf(sigma) else x / (1.0 + sigma)  # at inf x holds x_1, the noise
        tt = self.net_timestep(sigma)
        return x_t, torch.full((x.shape[0],), tt, dtype=x.dtype, device=x.device)

    def affine(self, sigma: float) -> Affine:
        t = self.time(sigma)
        return Affine(1.0 if math.isinf(sigma) else 1.0 / (1.0 + sigma), 1.0, -t, 1.0, 1.0 - t)

    def from_net_output(
        self, x_in: torch.Tensor, sigma: float, out: torch.Tensor
    ) -> DenoiserOutput:
        t = self.time(sigma)
        return DenoiserOutput(x_in - t * out, x_in + (1.0 - t) * out)


@register_family("flow", config=FlowConfig)
class FlowPolicy(GenerativePolicy):
    config: FlowConfig

    def loss(self, obs: dict[str, torch.Tensor], actions: torch.Tensor) -> torch.Tensor:
        a0 = self.action_normalizer.normalize(actions)
        noise = torch.randn_like(a0)
        t = torch.rand(a0.shape[0], dtype=a0.dtype, device=a0.device)
        x_t = (1 - t[:, None, None]) * a0 + t[:, None, None] * noise
        pred = self.net(x_t, t * self.config.flow_time_scale, self.encode(obs))
        return F.mse_loss(pred, noise - a0)

    def sample_normalized(
        self, cond: torch.Tensor, steps: int, noise: torch.Tensor
    ) -> torch.Tensor:
        x = noise
        ts = torch.linspace(1.0, 0.0, steps + 1, dtype=x.dtype).tolist()
        scale = self.config.flow_time_scale
        for t, t_next in zip(ts[:-1], ts[1:], strict=True):
            t_batch = torch.full((x.shape[0],), t * scale, dtype=x.dtype, device=x.device)
            x = x + (t_next - t) * self.net(x, t_batch, cond)
        return x

    def denoiser_for(self, cond: torch.Tensor) -> FlowDenoiser:
        return FlowDenoiser(
            self.bound_net(cond),
            self.config.horizon,
            self.config.action_dim,
            self.config.flow_time_scale,
        )

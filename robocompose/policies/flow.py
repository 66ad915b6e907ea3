"""Flow-matching policy: rectified flow x_t = (1 - t) a0 + t n, velocity target n - a0, Euler."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from robocompose.policies.base import GenerativePolicy
from robocompose.policies.denoiser import FlowDenoiser


class FlowPolicy(GenerativePolicy):
    def loss(self, obs: dict[str, torch.Tensor], actions: torch.Tensor) -> torch.Tensor:
        a0 = self.action_normalizer.normalize(actions)
        noise = torch.randn_like(a0)
        t = torch.rand(a0.shape[0], device=a0.device)
        x_t = (1 - t[:, None, None]) * a0 + t[:, None, None] * noise
        pred = self.net(x_t, t * self.config.flow_time_scale, self.encode(obs))
        return F.mse_loss(pred, noise - a0)

    def sample_normalized(
        self, cond: torch.Tensor, steps: int, noise: torch.Tensor
    ) -> torch.Tensor:
        x = noise
        ts = torch.linspace(1.0, 0.0, steps + 1).tolist()
        for t, t_next in zip(ts[:-1], ts[1:], strict=True):
            t_batch = torch.full((x.shape[0],), t * self.config.flow_time_scale, device=x.device)
            x = x + (t_next - t) * self.net(x, t_batch, cond)
        return x

    def denoiser_for(self, cond: torch.Tensor) -> FlowDenoiser:
        return FlowDenoiser(
            self.bound_net(cond),
            self.config.horizon,
            self.config.action_dim,
            self.config.flow_time_scale,
        )

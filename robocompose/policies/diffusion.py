"""Diffusion Policy (Chi et al. 2023): DDPM training, DDIM sampling, via diffusers' schedulers.

clip_sample is off (Diffusion Policy turns it on): clipping x0_hat inside the scheduler would make
DDIM differ from Euler in sigma space, and composition relies on that identity.
"""

from __future__ import annotations

import torch
from diffusers import DDIMScheduler, DDPMScheduler
from torch.nn import functional as F

from robocompose.policies.base import GenerativePolicy
from robocompose.policies.config import PolicyConfig
from robocompose.policies.denoiser import DiscreteDiffusionDenoiser
from robocompose.policies.normalizer import AffineNormalizer


class DiffusionPolicy(GenerativePolicy):
    def __init__(self, config: PolicyConfig, normalizers: dict[str, AffineNormalizer]) -> None:
        super().__init__(config, normalizers)
        self.noise_scheduler = DDPMScheduler(
            num_train_timesteps=config.num_train_timesteps,
            beta_schedule=config.beta_schedule,
            prediction_type=config.prediction_type,
            clip_sample=False,
        )

    def loss(self, obs: dict[str, torch.Tensor], actions: torch.Tensor) -> torch.Tensor:
        a0 = self.action_normalizer.normalize(actions)
        noise = torch.randn_like(a0)
        t = torch.randint(0, self.config.num_train_timesteps, (a0.shape[0],), device=a0.device)
        noisy = self.noise_scheduler.add_noise(a0, noise, t)
        pred = self.net(noisy, t.float(), self.encode(obs))
        if self.config.prediction_type == "epsilon":
            target = noise
        elif self.config.prediction_type == "sample":
            target = a0
        else:
            target = self.noise_scheduler.get_velocity(a0, noise, t)
        return F.mse_loss(pred, target)

    def ddim_scheduler(self) -> DDIMScheduler:
        """A fresh DDIM scheduler (diffusers' schedulers are stateful) on the training schedule."""
        return DDIMScheduler.from_config(self.noise_scheduler.config)

    def sample_normalized(
        self, cond: torch.Tensor, steps: int, noise: torch.Tensor
    ) -> torch.Tensor:
        x = noise
        scheduler = self.ddim_scheduler()
        scheduler.set_timesteps(steps)
        for t in scheduler.timesteps:
            t_batch = torch.full((x.shape[0],), float(t), device=x.device)
            x = scheduler.step(self.net(x, t_batch, cond), t, x).prev_sample
        return x

    def denoiser_for(self, cond: torch.Tensor) -> DiscreteDiffusionDenoiser:
        return DiscreteDiffusionDenoiser(
            self.bound_net(cond),
            self.noise_scheduler.alphas_cumprod,
            self.config.prediction_type,
            self.config.horizon,
            self.config.action_dim,
        )

"""Diffusion Policy (Chi et al. 2023): DDPM training, DDIM sampling, via diffusers' schedulers.

clip_sample is off (Diffusion Policy turns it on): clipping x0_hat inside the scheduler would make
DDIM differ from Euler in sigma space, and composition relies on that identity.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
import torch
from diffusers import DDIMScheduler, DDPMScheduler
from torch.nn import functional as F

from robocompose.choices import check_choices, one_of
from robocompose.policies.base import GenerativePolicy, register_family
from robocompose.policies.config import PREDICTION_TYPES, PolicyConfig
from robocompose.policies.denoiser import Affine, BoundNet, DenoiserOutput, NetworkDenoiser
from robocompose.policies.normalizer import AffineNormalizer


@dataclass
class DiffusionConfig(PolicyConfig):
    """Diffusion's settings: diffusers' DDPMScheduler in training, DDIM on it for sampling."""

    family: str = "diffusion"
    num_train_timesteps: int = 100
    beta_schedule: str = "squaredcos_cap_v2"
    prediction_type: str = one_of(PREDICTION_TYPES, "epsilon")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choices(self)
        if self.num_inference_steps > self.num_train_timesteps:
            raise ValueError(
                f"`num_inference_steps` must be <= num_train_timesteps. "
                f"Got {self.num_inference_steps} > {self.num_train_timesteps}."
            )


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
        if prediction_type not in PREDICTION_TYPES:
            raise ValueError(
                f"`prediction_type` must be one of {PREDICTION_TYPES}. Got {prediction_type!r}."
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

    def net_timestep(self, sigma: float) -> float:
        return self.timestep(sigma)

    def net_input(self, x: torch.Tensor, sigma: float) -> tuple[torch.Tensor, torch.Tensor]:
        # at sigma = inf x holds the unit noise, which is already the VP-scaled input
        x_in = x if math.isinf(sigma) else x / math.sqrt(1.0 + sigma**2)
        t = self.timestep(sigma)
        return x_in, torch.full((x.shape[0],), t, dtype=x.dtype, device=x.device)

    def affine(self, sigma: float) -> Affine:
        a = 1.0 if math.isinf(sigma) else 1.0 / math.sqrt(1.0 + sigma**2)
        ab = 1.0 / (1.0 + (self.sigma_max if math.isinf(sigma) else sigma) ** 2)
        signal, noise = math.sqrt(ab), math.sqrt(1.0 - ab)
        if self.prediction_type == "epsilon":
            return Affine(a, 1.0 / signal, -noise / signal, 0.0, 1.0)
        if self.prediction_type == "v_prediction":
            return Affine(a, signal, -noise, noise, signal)
        return Affine(a, 0.0, 1.0, 1.0 / noise, -signal / noise)

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


@register_family("diffusion", config=DiffusionConfig)
class DiffusionPolicy(GenerativePolicy):
    config: DiffusionConfig

    def __init__(self, config: DiffusionConfig, normalizers: dict[str, AffineNormalizer]) -> None:
        super().__init__(config, normalizers)
        self.noise_scheduler = DDPMScheduler(
            num_train_timesteps=config.num_train_timesteps,
            beta_schedule=config.beta_schedule,
            prediction_type=config.prediction_type,
            clip_sample=False,
        )
        self._ddim = DDIMScheduler.from_config(self.noise_scheduler.config)

    def loss(self, obs: dict[str, torch.Tensor], actions: torch.Tensor) -> torch.Tensor:
        a0 = self.action_normalizer.normalize(actions)
        noise = torch.randn_like(a0)
        t = torch.randint(0, self.config.num_train_timesteps, (a0.shape[0],), device=a0.device)
        noisy = self.noise_scheduler.add_noise(a0, noise, t)
        pred = self.net(noisy, t.to(a0.dtype), self.encode(obs))
        if self.config.prediction_type == "epsilon":
            target = noise
        elif self.config.prediction_type == "sample":
            target = a0
        else:
            target = self.noise_scheduler.get_velocity(a0, noise, t)
        return F.mse_loss(pred, target)

    def ddim_scheduler(self, steps: int, dtype: torch.dtype) -> DDIMScheduler:
        """A fresh DDIM scheduler (diffusers' schedulers are stateful) on the training schedule,
        with `steps` timesteps and its alphas in `dtype`.

        A copy of one built with the policy: diffusers builds its tables in float32, which in
        a float64 policy is done once, not in every sampling call. The alphas stay on the CPU;
        `step` takes them as 0-d tensors, which join a tensor on any device."""
        scheduler = copy.copy(self._ddim)
        scheduler.set_timesteps(steps)
        scheduler.alphas_cumprod = scheduler.alphas_cumprod.to(dtype)
        scheduler.final_alpha_cumprod = scheduler.final_alpha_cumprod.to(dtype)
        return scheduler

    def sample_normalized(
        self, cond: torch.Tensor, steps: int, noise: torch.Tensor
    ) -> torch.Tensor:
        x = noise
        scheduler = self.ddim_scheduler(steps, x.dtype)
        for t in scheduler.timesteps:
            t_batch = torch.full((x.shape[0],), float(t), dtype=x.dtype, device=x.device)
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

"""Adapters are exact: a model sampled through its Denoiser on its own grid equals its native
sampler (diffusers' DDIM, or the flow's Euler in t), and D is the Gaussian's closed form."""

from __future__ import annotations

import math

import pytest
import torch
from diffusers import DDIMScheduler, DDPMScheduler

from robocompose.composition.samplers import sample_euler
from robocompose.policies.diffusion import DiscreteDiffusionDenoiser
from robocompose.policies.flow import FlowDenoiser

H, A, B = 16, 2, 4


class ToyNet(torch.nn.Module):
    """A small nonlinear network of (x, t): enough to make any mismatch in the maths visible."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(H * A + 1, 64), torch.nn.Tanh(), torch.nn.Linear(64, H * A)
        )

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        inp = torch.cat([x.reshape(len(x), -1), (t[:, None] / 100.0)], dim=1)
        return self.mlp(inp).reshape(x.shape)


def _schedulers(prediction_type: str) -> tuple[DDPMScheduler, DDIMScheduler]:
    ddpm = DDPMScheduler(
        num_train_timesteps=100,
        beta_schedule="squaredcos_cap_v2",
        prediction_type=prediction_type,
        clip_sample=False,
    )
    return ddpm, DDIMScheduler.from_config(ddpm.config)


@pytest.mark.parametrize("prediction_type", ["epsilon", "sample", "v_prediction"])
@pytest.mark.parametrize("steps", [10, 4])
def test_ddim_equals_euler_through_the_denoiser(prediction_type: str, steps: int) -> None:
    net = ToyNet().double()
    ddpm, ddim = _schedulers(prediction_type)
    noise = torch.randn(B, H, A, generator=torch.Generator().manual_seed(1), dtype=torch.float64)

    ddim.set_timesteps(steps)
    x = noise.clone()
    with torch.no_grad():
        for t in ddim.timesteps:
            x = ddim.step(net(x, torch.full((B,), float(t), dtype=x.dtype)), t, x).prev_sample

    denoiser = DiscreteDiffusionDenoiser(net, ddpm.alphas_cumprod, prediction_type, H, A)
    ours = sample_euler(denoiser, noise, denoiser.sigmas(steps))
    torch.testing.assert_close(ours, x, atol=1e-4, rtol=0)


def test_flow_euler_equals_euler_through_the_denoiser() -> None:
    net = ToyNet().double()
    noise = torch.randn(B, H, A, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    steps, scale = 10, 100.0
    x = noise.clone()
    ts = torch.linspace(1.0, 0.0, steps + 1).tolist()
    with torch.no_grad():
        for t, t_next in zip(ts[:-1], ts[1:], strict=True):
            x = x + (t_next - t) * net(x, torch.full((B,), t * scale, dtype=x.dtype))
    denoiser = FlowDenoiser(net, H, A, time_scale=scale)
    ours = sample_euler(denoiser, noise, denoiser.sigmas(steps))
    torch.testing.assert_close(ours, x, atol=1e-4, rtol=0)


def test_fractional_timestep_interpolates_in_log_sigma() -> None:
    ddpm, _ = _schedulers("epsilon")
    seen = []
    denoiser = DiscreteDiffusionDenoiser(
        lambda x, t: seen.append(t[0].item()) or torch.zeros_like(x),
        ddpm.alphas_cumprod,
        "epsilon",
        H,
        A,
    )
    s37, s38 = denoiser.sigma_table[37], denoiser.sigma_table[38]
    for sigma, want in [(s37, 37.0), (math.sqrt(s37 * s38), 37.5), (1e9, 99.0), (1e-9, 0.0)]:
        denoiser(torch.zeros(1, H, A), sigma)
        assert seen[-1] == pytest.approx(want, abs=1e-6)


@pytest.mark.parametrize("sigma", [0.05, 0.7, 3.0])
def test_gaussian_denoiser_round_trip(sigma: float) -> None:
    """An eps-network that is exact for a N(mu, s^2) target gives D = mu + s^2/(s^2+sigma^2)(x-mu),
    and a flow network exact for it gives the same D: the two footings agree."""
    mu, s = 0.3, 0.5
    ddpm, _ = _schedulers("epsilon")
    ab_table = ddpm.alphas_cumprod.double()

    def exact_d(x: torch.Tensor, sig: float) -> torch.Tensor:
        return mu + s**2 / (s**2 + sig**2) * (x - mu)

    def eps_net(x_in: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        x = x_in * math.sqrt(1 + sigma**2)  # the network sees the VP-scaled input
        return (x - exact_d(x, sigma)) / sigma

    def flow_net(x_t: torch.Tensor, tt: torch.Tensor) -> torch.Tensor:
        t = tt[0].item() / 100.0
        sig = t / (1 - t)
        x = x_t / (1 - t)
        x0 = exact_d(x, sig)
        return (x_t - x0) / t  # v = (x_t - x0_hat) / t from x_t = (1 - t) x0 + t n

    x = torch.linspace(-2, 2, H * A, dtype=torch.float64).reshape(1, H, A)
    eps = DiscreteDiffusionDenoiser(eps_net, ab_table, "epsilon", H, A)(x, sigma)
    flow = FlowDenoiser(flow_net, H, A, time_scale=100.0)(x, sigma)
    torch.testing.assert_close(eps.x0_hat, exact_d(x, sigma))
    torch.testing.assert_close(flow.x0_hat, exact_d(x, sigma))
    torch.testing.assert_close(flow.eps_hat, (x - exact_d(x, sigma)) / sigma)

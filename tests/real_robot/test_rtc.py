"""Real-time-chunking guidance checked on exact Gaussian denoisers.

Each chunk entry of N(mu, var) has the exact denoiser D(x; sigma) = mu + var/(var+sigma^2) (x-mu),
independent of every other entry. So with guidance on some positions the others must come out
exactly as without it, and the guided positions must end at (hard) or move toward (soft) the
committed actions.
"""

from __future__ import annotations

import math

import pytest
import torch

from robocompose.composition.composed_denoiser import ComposedDenoiser, karras_sigmas
from robocompose.composition.operators import Convex
from robocompose.composition.samplers import sample_ancestral, sample_euler, sample_heun
from robocompose.policies.denoiser import Denoiser, DenoiserOutput
from robocompose.real_robot.rtc import PrefixGuidance, PrefixGuidedDenoiser

H, A = 12, 3
SIGMAS = karras_sigmas(20, 0.002, 80.0)


class EntryGaussian(Denoiser):
    """Exact D of independent N(mu[h, a], var) entries."""

    def __init__(self, mu: torch.Tensor, var: float) -> None:
        self.mu, self.var = mu, var
        self.horizon, self.action_dim = mu.shape
        self.sigma_min, self.sigma_max = 0.002, 80.0

    def sigmas(self, steps: int) -> list[float]:
        return karras_sigmas(steps, 0.002, 80.0)

    def __call__(self, x: torch.Tensor, sigma: float) -> DenoiserOutput:
        x0 = self.mu + self.var / (self.var + sigma**2) * (x - self.mu)
        return DenoiserOutput(x0, (x - x0) / sigma)


@pytest.fixture
def setup() -> tuple[EntryGaussian, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    mu = torch.randn(H, A, generator=g, dtype=torch.float64)
    noise = torch.randn(2, H, A, generator=g, dtype=torch.float64)
    target = mu[:5] + 3.0  # far from anything the Gaussian would sample
    return EntryGaussian(mu, 0.04), noise, target.expand(2, -1, -1)


@pytest.mark.parametrize("sampler", [sample_euler, sample_heun])
def test_hard_prefix_is_exactly_the_committed_actions_and_the_rest_is_untouched(setup, sampler):
    gauss, noise, target = setup
    offset = 2  # the chunk's current step, as a policy with n_obs_steps = 3 has it
    guided = PrefixGuidedDenoiser(gauss, target, PrefixGuidance("hard").weights(5, 5), offset)
    free = sampler(gauss, noise, SIGMAS)
    out = sampler(guided, noise, SIGMAS)
    torch.testing.assert_close(out[:, offset : offset + 5], target, rtol=0, atol=1e-12)
    torch.testing.assert_close(out[:, :offset], free[:, :offset], rtol=0, atol=0)
    torch.testing.assert_close(out[:, offset + 5 :], free[:, offset + 5 :], rtol=0, atol=0)


def test_soft_guidance_moves_toward_the_old_chunk_with_decaying_weight(setup):
    gauss, noise, target = setup
    committed, given = 2, 5
    weights = PrefixGuidance("soft", prefix_weight=0.5).weights(committed, given)
    guided = PrefixGuidedDenoiser(gauss, target, weights, 0)
    free = sample_euler(gauss, noise, SIGMAS)
    out = sample_euler(guided, noise, SIGMAS)
    gap_free = (free[:, :given] - target).abs().mean((0, 2))
    gap = (out[:, :given] - target).abs().mean((0, 2))
    assert torch.all(gap < gap_free)
    # the pull weakens along the tail: the fraction of the gap closed falls position by position
    closed = 1 - gap / gap_free
    assert torch.all(closed[committed:].diff() < 0)
    assert closed[0] > 0.4  # weight 0.5 applied at every step, the last one included
    torch.testing.assert_close(out[:, given:], free[:, given:], rtol=0, atol=0)


def test_guidance_wraps_a_composed_denoiser():
    g = torch.Generator().manual_seed(1)
    mus = [torch.randn(H, A, generator=g, dtype=torch.float64) for _ in range(2)]
    parents = [EntryGaussian(mu, 0.09) for mu in mus]
    composed = ComposedDenoiser(parents, Convex([0.3, 0.7]))
    noise = torch.randn(1, H, A, generator=g, dtype=torch.float64)
    target = torch.full((1, 4, A), -2.0, dtype=torch.float64)
    guided = PrefixGuidedDenoiser(composed, target, PrefixGuidance("hard").weights(4, 4), 1)
    free = sample_euler(composed, noise, SIGMAS)
    out = sample_euler(guided, noise, SIGMAS)
    torch.testing.assert_close(out[:, 1:5], target, rtol=0, atol=1e-12)
    torch.testing.assert_close(out[:, 5:], free[:, 5:], rtol=0, atol=0)
    torch.testing.assert_close(out[:, :1], free[:, :1], rtol=0, atol=0)


def test_stochastic_sampler_keeps_the_prefix(setup):
    gauss, noise, target = setup
    guided = PrefixGuidedDenoiser(gauss, target, PrefixGuidance("hard").weights(5, 5))
    out = sample_ancestral(guided, noise, SIGMAS, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(out[:, :5], target, rtol=0, atol=1e-12)


def test_weights():
    assert PrefixGuidance("hard").weights(1, 4).tolist() == [1.0] * 4
    soft = PrefixGuidance("soft", prefix_weight=0.8).weights(2, 6)
    assert soft[:2].tolist() == [0.8, 0.8]
    assert torch.all(soft[2:].diff() < 0) and 0 < soft[-1] < soft[2] < 1
    c = 4 / 5  # first tail position: (given - i) / (given - committed + 1)
    assert soft[2].item() == pytest.approx(c * math.expm1(c) / math.expm1(1.0))
    assert PrefixGuidance().weights(0, 0).numel() == 0


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="`mode`"):
        PrefixGuidance("medium")
    with pytest.raises(ValueError, match="`prefix_weight`"):
        PrefixGuidance(prefix_weight=0.0)
    gauss = EntryGaussian(torch.zeros(H, A), 1.0)
    with pytest.raises(ValueError, match="inside the chunk"):
        PrefixGuidedDenoiser(gauss, torch.zeros(1, 4, A), torch.ones(4), offset=H - 2)
    with pytest.raises(ValueError, match="`target`"):
        PrefixGuidedDenoiser(gauss, torch.zeros(1, 4, A + 1), torch.ones(4))

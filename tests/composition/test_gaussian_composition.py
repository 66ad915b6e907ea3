"""Composition checked against closed forms on Gaussian parents.

A Gaussian N(mu, v) has the exact denoiser D(x; sigma) = mu + v / (v + sigma^2) (x - mu). A plain
ODE sampler on the convex combination of scores does NOT sample the product p1^w1 p2^w2: it follows
the composed probability-flow ODE, which for Gaussians is linear and can be integrated exactly.
The MCMC-corrected sampler does approach the product.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from diffusers import DDPMScheduler

from robocompose.composition.composed_denoiser import ComposedDenoiser, karras_sigmas
from robocompose.composition.operators import Convex, Schedule, WeightedSum
from robocompose.composition.samplers import (
    sample_ancestral,
    sample_annealed_mcmc,
    sample_euler,
    sample_heun,
)
from robocompose.policies.denoiser import Denoiser, DenoiserOutput
from robocompose.policies.diffusion import DiscreteDiffusionDenoiser
from robocompose.policies.flow import FlowDenoiser

SIGMA_MAX = 80.0


class GaussianDenoiser(Denoiser):
    """Exact D of N(mu, var) per entry of a (B, H, A) chunk."""

    def __init__(self, mu: float, var: float, horizon: int = 1, action_dim: int = 1) -> None:
        self.mu, self.var = mu, var
        self.horizon, self.action_dim = horizon, action_dim
        self.sigma_min, self.sigma_max = 0.002, SIGMA_MAX

    def sigmas(self, steps: int) -> list[float]:
        return karras_sigmas(steps, 0.002, SIGMA_MAX)

    def __call__(self, x: torch.Tensor, sigma: float) -> DenoiserOutput:
        if math.isinf(sigma):  # x is the unit noise: D -> mu, eps -> n
            return DenoiserOutput(torch.full_like(x, self.mu), x)
        x0 = self.mu + self.var / (self.var + sigma**2) * (x - self.mu)
        return DenoiserOutput(x0, (x - x0) / sigma)


def exact_composed_ode(
    mus: list[float], variances: list[float], weights: list[float], sigma_max: float
) -> tuple[float, float]:
    """Mean and variance at sigma = 0 of dx/dsigma = sum_i w_i sigma (x - mu_i) / (v_i + sigma^2),
    started from N(0, 1 + sigma_max^2) (the sampler's start), integrated by RK4 in float64."""

    def rhs(sigma: float, state: np.ndarray) -> np.ndarray:
        m, var = state
        a = sum(w * sigma / (v + sigma**2) for w, v in zip(weights, variances, strict=True))
        b = sum(
            w * mu * sigma / (v + sigma**2)
            for w, mu, v in zip(weights, mus, variances, strict=True)
        )
        return np.array([a * m - b, 2 * a * var])

    # integrate in u = log(sigma) from sigma_max to 1e-6, then the remaining drift is negligible
    state, n = np.array([0.0, 1.0 + sigma_max**2]), 20000
    us = np.linspace(math.log(sigma_max), math.log(1e-6), n + 1)

    def f(u: float, s: np.ndarray) -> np.ndarray:
        return rhs(math.exp(u), s) * math.exp(u)

    for u, u_next in zip(us[:-1], us[1:], strict=True):
        h = u_next - u
        k1 = f(u, state)
        k2 = f(u + h / 2, state + h / 2 * k1)
        k3 = f(u + h / 2, state + h / 2 * k2)
        k4 = f(u + h, state + h * k3)
        state = state + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return float(state[0]), float(state[1])


def _affine_response(sampler, denoiser, sigmas) -> tuple[float, float]:
    """A deterministic sampler on Gaussian parents is affine in its noise: x = alpha n + beta."""
    zero = sampler(denoiser, torch.zeros(1, 1, 1, dtype=torch.float64), sigmas)
    one = sampler(denoiser, torch.ones(1, 1, 1, dtype=torch.float64), sigmas)
    beta = zero.item()
    return beta, (one.item() - beta) ** 2


MUS, VARS, W = [-1.0, 1.0], [0.25, 1.0], [0.5, 0.5]


def test_composed_ode_is_not_the_product_and_matches_the_issue_numbers() -> None:
    mean, var = exact_composed_ode(MUS, VARS, W, SIGMA_MAX)
    assert mean == pytest.approx(-0.226, abs=2e-3)
    assert var == pytest.approx(0.50, abs=5e-3)


@pytest.mark.parametrize("sampler,steps", [(sample_euler, 2000), (sample_heun, 200)])
def test_deterministic_sampler_matches_exact_composed_ode(sampler, steps: int) -> None:
    parents = [GaussianDenoiser(m, v) for m, v in zip(MUS, VARS, strict=True)]
    composed = ComposedDenoiser(parents, Convex(W))
    sigmas = karras_sigmas(steps, 1e-4, SIGMA_MAX)
    mean, var = _affine_response(sampler, composed, sigmas)
    want_mean, want_var = exact_composed_ode(MUS, VARS, W, SIGMA_MAX)
    assert mean == pytest.approx(want_mean, abs=2e-3)
    assert var == pytest.approx(want_var, rel=1e-2)


@pytest.mark.parametrize("method", ["mala", "ula"])
def test_mcmc_corrected_sampler_approaches_the_product(method: str) -> None:
    parents = [GaussianDenoiser(m, v) for m, v in zip(MUS, VARS, strict=True)]
    composed = ComposedDenoiser(parents, Convex(W))
    precision = sum(w / v for w, v in zip(W, VARS, strict=True))
    product_mean = sum(w * m / v for w, m, v in zip(W, MUS, VARS, strict=True)) / precision
    g = torch.Generator().manual_seed(0)
    noise = torch.randn(4000, 1, 1, generator=g, dtype=torch.float64)
    x = sample_annealed_mcmc(
        composed,
        noise,
        karras_sigmas(30, 0.01, 20.0),
        generator=g,
        mcmc_steps=20,
        step_scale=0.2,
        method=method,
    )
    assert product_mean == pytest.approx(-0.6) and 1 / precision == pytest.approx(0.4)
    if method == "mala":
        assert x.mean().item() == pytest.approx(product_mean, abs=0.04)
        assert x.var().item() == pytest.approx(1 / precision, rel=0.1)
    else:  # a fixed-step ULA is biased, but must move well toward the product
        ode_mean, _ = exact_composed_ode(MUS, VARS, W, 20.0)
        assert abs(x.mean().item() - product_mean) < abs(ode_mean - product_mean) / 2


def test_ancestral_sampler_samples_a_single_gaussian() -> None:
    """The plug-in ancestral step drops Var(a0 | x) per step, a first-order error: fine grid."""
    g = torch.Generator().manual_seed(1)
    noise = torch.randn(4000, 1, 1, generator=g, dtype=torch.float64)
    parent = GaussianDenoiser(0.5, 0.3)
    x = sample_ancestral(parent, noise, karras_sigmas(500, 0.002, SIGMA_MAX), generator=g)
    assert x.mean().item() == pytest.approx(0.5, abs=0.04)
    assert x.var().item() == pytest.approx(0.3, rel=0.1)


def test_weighted_sum_of_one_parent_with_weight_one_is_that_parent() -> None:
    a, b = GaussianDenoiser(0.2, 0.5), GaussianDenoiser(-3.0, 0.1)
    x = torch.linspace(-3, 3, 7, dtype=torch.float64).reshape(7, 1, 1)
    out = ComposedDenoiser([a, b], WeightedSum([1.0, 0.0]))(x, 0.7)
    torch.testing.assert_close(out.x0_hat, a(x, 0.7).x0_hat)


def test_schedule_uses_a_above_and_b_below_the_switch() -> None:
    a, b = GaussianDenoiser(-1.0, 0.25), GaussianDenoiser(1.0, 1.0)
    switch = 1.0
    sigmas = karras_sigmas(40, 0.002, SIGMA_MAX)
    composed = ComposedDenoiser([a, b], Schedule(high=[1, 0], low=[0, 1], sigma_switch=switch))
    noise = torch.randn(16, 1, 1, generator=torch.Generator().manual_seed(2), dtype=torch.float64)

    def by_hand(x: torch.Tensor, sigma: float) -> DenoiserOutput:
        return (a if sigma > switch else b)(x, sigma)

    torch.testing.assert_close(
        sample_euler(composed, noise, sigmas), sample_euler(by_hand, noise, sigmas)
    )
    only_a = sample_euler(a, noise, sigmas)
    assert not torch.allclose(only_a, sample_euler(composed, noise, sigmas))


def _exact_eps_net(mu: float, var: float, sigma_of_t):
    """An eps-prediction network that is exact for N(mu, var) (input: VP-scaled x at step t)."""

    def net(x_in: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        sigma = sigma_of_t(t[0].item())
        x = x_in * math.sqrt(1 + sigma**2)
        x0 = mu + var / (var + sigma**2) * (x - mu)
        return (x - x0) / sigma

    return net


def _cosine_ddpm():
    """alpha_bar of a 100-step cosine DDPM and its fractional t -> sigma (log-sigma interp)."""
    ab = DDPMScheduler(num_train_timesteps=100, beta_schedule="squaredcos_cap_v2").alphas_cumprod
    log_table = np.log(torch.sqrt((1 - ab.double()) / ab.double()).numpy())

    def sigma_of_t(t: float) -> float:
        return float(np.exp(np.interp(t, np.arange(100), log_table)))

    return ab.double(), sigma_of_t


def _exact_flow_net(mu: float, var: float, scale: float):
    def net(x_t: torch.Tensor, tt: torch.Tensor) -> torch.Tensor:
        t = tt[0].item() / scale
        if t >= 1.0:
            return x_t - mu  # v = n - a0 with E[a0 | pure noise] = mu
        sigma, x = t / (1 - t), x_t / (1 - t)
        x0 = mu + var / (var + sigma**2) * (x - mu)
        return (x_t - x0) / t

    return net


@pytest.mark.parametrize("weight", [0.0, 0.3, 0.8, 1.0])
def test_diffusion_and_flow_parents_of_one_distribution_compose_to_it(weight: float) -> None:
    """Heterogeneous footing: a DDPM eps-model (100 discrete steps) and a rectified flow of the
    same N(mu, var), composed with any weight on the flow's grid, sample N(mu, var)."""
    mu, var = 0.4, 0.2
    ab, sigma_of_t = _cosine_ddpm()
    diffusion = DiscreteDiffusionDenoiser(_exact_eps_net(mu, var, sigma_of_t), ab, "epsilon", 1, 1)
    flow = FlowDenoiser(_exact_flow_net(mu, var, 100.0), 1, 1, time_scale=100.0)
    composed = ComposedDenoiser([flow, diffusion], Convex([1 - weight, weight]))
    noise = torch.randn(4000, 1, 1, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    x = sample_heun(composed, noise, flow.sigmas(60))
    assert x.mean().item() == pytest.approx(mu, abs=0.03)
    assert x.var().item() == pytest.approx(var, rel=0.1)


def test_a_flow_first_does_not_drag_an_imperfect_ddpm_to_sigma_inf() -> None:
    """A learned eps-model is off by a little; asked at sigma = inf (a flow's first grid point)
    its x0 estimate would be off ~2000x that. Either parent order takes the DDPM's own grid,
    which starts at a finite sigma, and samples near the target. A v-prediction model is sound
    at sigma = inf, so with it the flow's full grid is taken in either order."""
    mu, var = 0.4, 0.2
    ab, sigma_of_t = _cosine_ddpm()
    exact = _exact_eps_net(mu, var, sigma_of_t)

    def off_by_a_little(x_in: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return exact(x_in, t) + 0.02

    diffusion = DiscreteDiffusionDenoiser(off_by_a_little, ab, "epsilon", 1, 1)
    flow = FlowDenoiser(_exact_flow_net(mu, var, 100.0), 1, 1, time_scale=100.0)
    flow_first = ComposedDenoiser([flow, diffusion], Convex([0.5, 0.5]))
    diffusion_first = ComposedDenoiser([diffusion, flow], Convex([0.5, 0.5]))
    assert flow_first.sigmas(10) == diffusion_first.sigmas(10) == diffusion.sigmas(10)
    assert math.isfinite(flow_first.sigmas(10)[0])
    v_model = DiscreteDiffusionDenoiser(off_by_a_little, ab, "v_prediction", 1, 1)
    for parents in ([flow, v_model], [v_model, flow]):
        assert ComposedDenoiser(parents, Convex([0.5, 0.5])).sigmas(10) == flow.sigmas(10)
    noise = torch.randn(4000, 1, 1, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    x = sample_euler(flow_first, noise, flow_first.sigmas(10))
    torch.testing.assert_close(x, sample_euler(diffusion_first, noise, flow_first.sigmas(10)))
    assert x.mean().item() == pytest.approx(mu, abs=0.1)
    assert x.var().item() == pytest.approx(var, rel=0.3)
    at_inf = sample_euler(flow_first, noise, flow.sigmas(10))
    assert abs(at_inf.mean().item() - mu) > 0.5  # what the flow's grid (from inf) gives


def _log_normal(x: torch.Tensor, mu: float, var: float) -> torch.Tensor:
    return -0.5 * (x - mu) ** 2 / var - 0.5 * math.log(2 * math.pi * var)


def test_superdiff_or_samples_the_mixture() -> None:
    from robocompose.composition.superdiff import sample_superdiff

    a, b = GaussianDenoiser(-2.0, 0.1), GaussianDenoiser(2.0, 0.1)
    g = torch.Generator().manual_seed(4)
    noise = torch.randn(2000, 1, 1, generator=g, dtype=torch.float64)
    x = sample_superdiff(
        lambda x, s: [a(x, s), b(x, s)],
        noise,
        karras_sigmas(200, 0.002, 20.0),
        generator=g,
        mode="or",
        weights=[0.3, 0.7],
    )
    right = (x > 0).double().mean().item()
    assert right == pytest.approx(0.7, abs=0.04)
    assert x[x > 0].mean().item() == pytest.approx(2.0, abs=0.05)
    assert x[x > 0].var().item() == pytest.approx(0.1, rel=0.15)


def test_superdiff_and_lands_where_the_densities_agree() -> None:
    from robocompose.composition.superdiff import sample_superdiff

    a, b = GaussianDenoiser(MUS[0], VARS[0]), GaussianDenoiser(MUS[1], VARS[1])
    g = torch.Generator().manual_seed(5)
    noise = torch.randn(2000, 1, 1, generator=g, dtype=torch.float64)
    sigmas = karras_sigmas(200, 0.002, 20.0)
    x_and = sample_superdiff(
        lambda x, s: [a(x, s), b(x, s)], noise, sigmas, generator=g, mode="and"
    )
    x_ode = sample_euler(ComposedDenoiser([a, b], Convex(W)), noise, sigmas)
    gap_and = (_log_normal(x_and, MUS[0], VARS[0]) - _log_normal(x_and, MUS[1], VARS[1])).abs()
    gap_ode = (_log_normal(x_ode, MUS[0], VARS[0]) - _log_normal(x_ode, MUS[1], VARS[1])).abs()
    assert gap_and.median() < 0.5 * gap_ode.median()


def test_ito_density_estimate_tracks_the_true_log_density() -> None:
    """Skreta et al. Theorem 1 in the VE view: the tracked d ell equals the change of
    log N(x; mu, var + sigma^2) along the sampled path (to the last nonzero sigma)."""
    from robocompose.composition.superdiff import sample_superdiff

    mu, var = 0.5, 0.3
    parent = GaussianDenoiser(mu, var)
    sigmas = karras_sigmas(400, 0.05, 10.0)
    g = torch.Generator().manual_seed(6)
    noise = torch.randn(500, 1, 1, generator=g, dtype=torch.float64)
    x_start = noise * math.sqrt(1 + sigmas[0] ** 2)
    trace = []

    def parents(x: torch.Tensor, sigma: float) -> list[DenoiserOutput]:
        trace.append((x, sigma))
        out = parent(x, sigma)
        return [out, out]

    _, ell = sample_superdiff(
        parents, noise, sigmas, generator=g, mode="or", return_log_density=True
    )
    x_last, sigma_last = trace[-1]
    true = _log_normal(x_last, mu, var + sigma_last**2) - _log_normal(
        x_start, mu, var + sigmas[0] ** 2
    )
    err = (ell[0] - true.flatten()).abs()
    assert err.median() < 0.05 * true.abs().median() + 0.05

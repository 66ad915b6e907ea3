"""Composed policies: mixture proportions, horizon overlap, refusals, merge, search logic."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from robocompose.composition.composed_denoiser import ComposedDenoiser, karras_sigmas
from robocompose.composition.composed_policy import ComposedPolicy, CompositionConfig
from robocompose.composition.merge import merge_parameters
from robocompose.composition.methods import get_method, method_of
from robocompose.composition.operators import Convex
from robocompose.composition.weight_search import (
    Composed,
    grid_search,
    racing,
    simplex_grid,
    successive_halving,
)
from robocompose.policies.base import build_policy
from robocompose.policies.config import PolicyConfig
from robocompose.policies.normalizer import AffineNormalizer
from tests.composition.test_gaussian_composition import GaussianDenoiser


def tiny_policy(
    seed: int,
    family: str = "flow",
    horizon: int = 16,
    action_dim: int = 2,
    action_scale: float = 1.0,
    n_obs_steps: int = 2,
    hidden: int = 32,
):
    torch.manual_seed(seed)
    config = PolicyConfig(
        family=family,
        backbone="mlp",
        horizon=horizon,
        n_obs_steps=n_obs_steps,
        n_action_steps=4,
        action_dim=action_dim,
        obs_shapes={"state": (3,)},
        backbone_kwargs={"hidden": hidden, "depth": 1},
    )
    normalizers = {
        "action": AffineNormalizer(
            np.full(action_dim, action_scale, np.float32), np.zeros(action_dim, np.float32)
        ),
        "state": AffineNormalizer.identity(3),
    }
    return build_policy(config, normalizers).eval()


def _obs(batch: int, steps: int = 2) -> dict[str, torch.Tensor]:
    return {"state": torch.randn(batch, steps, 3, generator=torch.Generator().manual_seed(5))}


def test_mixture_draws_parents_in_proportion() -> None:
    a, b = tiny_policy(0), tiny_policy(1)
    composed = ComposedPolicy([a, b], CompositionConfig(operator="mixture", weights=(0.3, 0.7)))
    n = 3000
    noise = torch.randn(n, *composed.noise_shape, generator=torch.Generator().manual_seed(0))
    obs = _obs(n)
    with torch.no_grad():
        mixed = composed.predict_actions(obs, noise)
        only_a = a.sample(obs, 10, noise[:, :16])[:, composed.executed]
    from_a = torch.isclose(mixed, only_a, atol=1e-5).all(dim=(1, 2)).double().mean().item()
    assert from_a == pytest.approx(0.3, abs=0.03)


def test_horizon_overlap_combines_and_takes_the_tail_from_the_longer_parent() -> None:
    long, short = GaussianDenoiser(-1.0, 0.3, horizon=16), GaussianDenoiser(2.0, 0.5, horizon=8)
    composed = ComposedDenoiser([long, short], Convex([0.5, 0.5]), starts=[0, 0])
    x = torch.randn(4, 16, 1, dtype=torch.float64)
    out = composed(x, 0.8)
    a, b = long(x, 0.8), short(x[:, :8], 0.8)
    torch.testing.assert_close(out.x0_hat[:, :8], 0.5 * a.x0_hat[:, :8] + 0.5 * b.x0_hat)
    torch.testing.assert_close(out.x0_hat[:, 8:], a.x0_hat[:, 8:])
    with pytest.raises(ValueError, match="put the longest-horizon parent first"):
        ComposedDenoiser([short, long], Convex([0.5, 0.5]))


def test_composed_policy_aligns_parents_with_different_horizons() -> None:
    a, b = tiny_policy(0, horizon=16), tiny_policy(1, family="diffusion", horizon=8)
    composed = ComposedPolicy([a, b], CompositionConfig(weights=(0.5, 0.5)))
    noise = torch.randn(3, *composed.noise_shape)
    assert composed.predict_actions(_obs(3), noise).shape == (3, 4, 2)


def test_refuses_mismatched_action_dims_and_normalisers() -> None:
    with pytest.raises(ValueError, match="one action dimension"):
        ComposedPolicy([tiny_policy(0), tiny_policy(1, action_dim=3)], CompositionConfig())
    with pytest.raises(ValueError, match="one action dimension"):
        ComposedDenoiser(
            [GaussianDenoiser(0, 1, action_dim=2), GaussianDenoiser(0, 1)], Convex([0.5, 0.5])
        )
    scaled = tiny_policy(1, action_scale=2.0)
    with pytest.raises(ValueError, match="normaliser differs.*allow_normalizer_mismatch"):
        ComposedPolicy([tiny_policy(0), scaled], CompositionConfig())
    opted_in = ComposedPolicy(
        [tiny_policy(0), scaled], CompositionConfig(allow_normalizer_mismatch=True)
    )
    assert opted_in.predict_actions(_obs(2), torch.randn(2, 16, 2)).isfinite().all()
    with pytest.raises(ValueError, match="one entry per parent"):
        ComposedPolicy([tiny_policy(0), tiny_policy(1)], CompositionConfig(weights=(1.0,)))


def test_weights_off_the_simplex_are_refused_and_named() -> None:
    with pytest.raises(ValueError, match=r"`weights` of convex must lie on the simplex"):
        Convex([0.7, 0.7])
    with pytest.raises(ValueError, match="`weights` of convex must lie on the simplex"):
        method_of(CompositionConfig(operator="convex", weights=(0.7, 0.7)))
    with pytest.raises(ValueError, match="`operator` must be one of .*'superdiff_or'"):
        method_of(CompositionConfig(operator="sum"))


def test_merge_interpolates_parameters_and_refuses_other_architectures() -> None:
    a, b = tiny_policy(0), tiny_policy(1)
    merged = merge_parameters([a, b], [0.25, 0.75])
    name, pa = next(iter(a.state_dict().items()))
    torch.testing.assert_close(merged.state_dict()[name], 0.25 * pa + 0.75 * b.state_dict()[name])
    with pytest.raises(ValueError, match="one architecture.*family"):
        merge_parameters([a, tiny_policy(2, family="diffusion")], [0.5, 0.5])


def test_parallel_and_serial_parents_agree() -> None:
    a, b = tiny_policy(0), tiny_policy(1, family="diffusion")
    noise = torch.randn(4, 16, 2, generator=torch.Generator().manual_seed(1))
    outs = [
        ComposedPolicy([a, b], CompositionConfig(weights=(0.3, 0.7), parallel=p)).predict_actions(
            _obs(4), noise
        )
        for p in (True, False)
    ]
    torch.testing.assert_close(outs[0], outs[1])


def test_fingerprint_names_parents_and_weights_not_threading() -> None:
    a, b = tiny_policy(0), tiny_policy(1, family="diffusion")

    def fingerprint(parents, weights=(0.3, 0.7), parallel=True) -> str:
        config = CompositionConfig(weights=weights, parallel=parallel)
        return ComposedPolicy(parents, config).fingerprint()

    assert fingerprint([a, b]) == fingerprint([a, b], parallel=False)
    assert fingerprint([a, b]) != fingerprint([a, b], weights=(0.4, 0.6))
    assert fingerprint([a, b]) != fingerprint([a, tiny_policy(2, family="diffusion")])


def test_fingerprint_covers_the_resolved_sigma_grid(monkeypatch) -> None:
    """Logs must not resume across a change in how the grid is resolved, even when no setting
    changed: the grid the sampler runs on is the one the fingerprint hashes."""
    a, b = tiny_policy(0), tiny_policy(1, family="diffusion")
    composed = ComposedPolicy([a, b], CompositionConfig(weights=(0.5, 0.5)))
    used = []
    run_sampler = composed.run_sampler

    def spy(denoise, noise, sigmas):
        used.append(sigmas)
        return run_sampler(denoise, noise, sigmas)

    monkeypatch.setattr(composed, "run_sampler", spy)
    with torch.no_grad():
        composed.predict_actions(_obs(2), torch.randn(2, *composed.noise_shape))
    assert used == [composed.resolved_sigmas()]
    before = composed.fingerprint()
    monkeypatch.setattr(ComposedDenoiser, "sigmas", lambda self, steps: [9.0, 1.0, 0.0])
    assert composed.resolved_sigmas() == [9.0, 1.0, 0.0]
    assert composed.fingerprint() != before
    mixture = ComposedPolicy([a, b], CompositionConfig(operator="mixture", weights=(0.5, 0.5)))
    assert mixture.resolved_sigmas() is None  # each parent samples on its own grid


def test_grid_can_be_one_parents_own_and_is_refused_where_a_parent_cannot_start() -> None:
    flow, ddpm = tiny_policy(0), tiny_policy(1, family="diffusion")  # epsilon prediction

    def composed(grid: str) -> ComposedPolicy:
        return ComposedPolicy([flow, ddpm], CompositionConfig(weights=(0.5, 0.5), grid=grid))

    steps = composed("reference").steps
    own = ddpm.denoiser_for(None).sigmas(steps)
    assert composed("parent1").resolved_sigmas() == own
    assert composed("parent1").fingerprint() != composed("karras").fingerprint()
    assert math.isinf(flow.denoiser_for(None).sigmas(steps)[0])
    with pytest.raises(ValueError, match=r"parent0: that grid starts at sigma = inf, where parent"):
        composed("parent0").resolved_sigmas()
    with pytest.raises(ValueError, match=r"`grid` 'parent2' names a parent that is not there"):
        composed("parent2")
    with pytest.raises(ValueError, match=r"`grid` must be 'reference', 'karras' or 'parent<i>'"):
        composed("parent")


def test_simplex_grid() -> None:
    assert len(simplex_grid(2, 0.1)) == 11
    assert len(simplex_grid(3, 0.25)) == 15
    assert all(abs(sum(w) - 1) < 1e-9 for w in simplex_grid(3, 0.1))


def _convex(grid: list) -> list[Composed]:
    return [Composed("convex", w) for w in grid]


def _bernoulli_evaluator(p_of: dict):
    """Episodes of a candidate with true success p (`p_of`: by its weights): seed-determined,
    so candidates are paired."""

    def run(key, seeds):
        p = p_of[key.weights]
        return [
            {"seed": s, "success": np.random.default_rng(s).uniform() < p, "score": p}
            for s in seeds
        ]

    return run


def test_successive_halving_finds_the_best_for_fewer_episodes() -> None:
    grid = simplex_grid(2, 0.1)
    p_of = {w: 0.3 + 0.5 * (1 - abs(w[0] - 0.7) / 0.7) for w in grid}  # peak at w = 0.7
    seeds = list(range(400))
    full = grid_search(_bernoulli_evaluator(p_of), _convex(grid), seeds, progress=False)
    fast = successive_halving(
        _bernoulli_evaluator(p_of), _convex(grid), seeds, first_slice=25, progress=False
    )
    assert abs(full.chosen[0] - 0.7) < 0.11 and abs(fast.chosen[0] - 0.7) < 0.11
    # a bit more than a third: candidates tied at a cut stay a round longer
    assert fast.episodes_spent < 0.4 * full.episodes_spent
    assert "**chosen**" in fast.table()


def test_racing_finds_the_best_of_three_parents_for_fewer_episodes_than_the_grid() -> None:
    grid = simplex_grid(3, 0.1)
    peak = (0.5, 0.3, 0.2)
    p_of = {w: 0.2 + 0.7 * max(0.0, 1 - 2 * math.dist(w, peak)) for w in grid}
    seeds = list(range(400))
    full = grid_search(_bernoulli_evaluator(p_of), _convex(grid), seeds, progress=False)
    raced = racing(_bernoulli_evaluator(p_of), _convex(grid), seeds, first_slice=10, progress=False)
    assert full.chosen == raced.chosen == peak
    assert raced.episodes_spent < 0.5 * full.episodes_spent
    winner = next(c for c in raced.candidates if c.weights == peak)
    assert winner.episodes == len(seeds)  # the winner ends on every seed, as in the grid
    rounds = raced.extra["rounds"]
    assert [r["seeds"] for r in rounds] == [10 * (i + 1) for i in range(len(rounds))]
    alive = [r["alive"] for r in rounds]
    assert alive == sorted(alive, reverse=True) and alive[-1] == 1 and alive[0] < len(grid)


def test_racing_keeps_candidates_the_episodes_cannot_tell_apart() -> None:
    """Two arms of equal success on the same seeds never separate: both run every seed."""
    grid = _convex(simplex_grid(2, 0.5))
    p_of = {(0.0, 1.0): 0.6, (0.5, 0.5): 0.6, (1.0, 0.0): 0.1}
    seeds = list(range(200))
    raced = racing(_bernoulli_evaluator(p_of), grid, seeds, first_slice=20, progress=False)
    episodes = {c.weights: c.episodes for c in raced.candidates}
    assert episodes[(0.0, 1.0)] == episodes[(0.5, 0.5)] == 200
    assert episodes[(1.0, 0.0)] < 200 and raced.chosen in ((0.0, 1.0), (0.5, 0.5))
    # content with a choice within 5 points of the best, the race drops one of the tied arms
    tolerant = racing(
        _bernoulli_evaluator(p_of), grid, seeds, first_slice=20, tolerance=0.05, progress=False
    )
    assert tolerant.chosen in ((0.0, 1.0), (0.5, 0.5))
    assert tolerant.episodes_spent < raced.episodes_spent
    assert tolerant.extra["rounds"][-1]["alive"] == 1


@pytest.mark.parametrize(
    "first_slice, z, tolerance, got",
    [
        (0, 1.96, 0.0, "0, 1.96, 0.0"),
        (10, 0.0, 0.0, "10, 0.0, 0.0"),
        (10, 1.96, -0.1, "10, 1.96, -0.1"),
    ],
)
def test_racing_refuses_bad_settings(first_slice: int, z: float, tolerance: float, got: str):
    with pytest.raises(ValueError, match=f"0 <= tolerance < 1. Got {got}"):
        racing(_bernoulli_evaluator({}), _convex([(0.5, 0.5)]), [0], first_slice, z, tolerance)


def test_karras_grid_ends_at_zero_and_decreases() -> None:
    sigmas = karras_sigmas(10, 0.002, 80.0)
    assert sigmas[0] == pytest.approx(80.0) and sigmas[-1] == 0.0 and len(sigmas) == 11
    assert all(a > b for a, b in zip(sigmas[:-1], sigmas[1:], strict=True))


def test_superdiff_gets_more_denoising_steps_by_default() -> None:
    def steps(operator: str, steps: int | None = None) -> int:
        return get_method(operator).denoising_steps(CompositionConfig(operator, steps=steps))

    assert steps("convex") == 10
    assert steps("superdiff_or") == 40
    assert steps("superdiff_and", steps=12) == 12


@pytest.mark.parametrize(
    "families, scale_b",
    [(("flow", "flow"), 1.0), (("diffusion", "diffusion"), 1.0), (("diffusion", "flow"), 2.0)],
)
@pytest.mark.parametrize("operator", ["convex", "superdiff_or"])
def test_fused_parents_equal_parents_run_one_by_one(families, scale_b: float, operator) -> None:
    """Stacked into one network, each parent keeps its own adapter (and action map)."""
    a = tiny_policy(0, family=families[0])
    b = tiny_policy(1, family=families[1], action_scale=scale_b)
    for p in (*a.parameters(), *b.parameters()):  # move off the init: LayerNorm affines too
        p.data.add_(0.1 * torch.randn_like(p))
    noise = torch.randn(3, 16, 2, generator=torch.Generator().manual_seed(2))
    outs = {}
    for fuse in (True, False):
        config = CompositionConfig(
            operator=operator,
            weights=(0.3, 0.7),
            fuse=fuse,
            allow_normalizer_mismatch=scale_b != 1.0,
        )
        policy = ComposedPolicy([a, b], config)
        assert (policy.fused is not None) == fuse
        outs[fuse] = policy.predict_actions(_obs(3), noise)
    torch.testing.assert_close(outs[True], outs[False], atol=1e-5, rtol=1e-5)


def test_parents_of_different_architectures_are_not_fused() -> None:
    a, b = tiny_policy(0), tiny_policy(1, hidden=16)
    assert ComposedPolicy([a, b], CompositionConfig()).fused is None


@pytest.mark.parametrize("field", ["weights", "low_weights"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_weights_are_refused_and_named(field: str, bad: float) -> None:
    with pytest.raises(ValueError, match=rf"`{field}` must be finite numbers. Got \[{bad}, 1.0\]"):
        fields = {"weights": (0.5, 0.5), "low_weights": (0.5, 0.5)} | {field: (bad, 1.0)}
        CompositionConfig(operator="schedule", **fields)

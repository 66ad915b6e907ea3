"""The selector: its candidates include each parent alone on the chunk's own noise, it picks
by the score per row, a row's chunk does not depend on the batch it runs in, and its scores
measure what they say."""

from __future__ import annotations

import math

import pytest
import torch

from robocompose.composition.composed_policy import ComposedPolicy, CompositionConfig
from robocompose.composition.selector import (
    SCORES,
    agreement,
    candidates,
    coherence,
    contrast,
    likelihood,
    ode_log_density,
    weak_samples,
)
from robocompose.policies.checkpoint import save_policy
from tests.composition.test_composed_policy import _obs, tiny_policy


def _pair():
    flow, ddpm = tiny_policy(0), tiny_policy(1, family="diffusion")
    for p in (*flow.parameters(), *ddpm.parameters()):
        p.data.add_(0.3 * torch.randn_like(p))
    return flow, ddpm


def _selector(rows: int, seed: int, per_parent: int):
    """A selector over a perturbed pair, `rows` observations, their noise and candidates."""
    flow, ddpm = _pair()
    policy = ComposedPolicy([flow, ddpm], CompositionConfig(operator="selector"))
    obs = _obs(rows)
    noise = torch.randn(rows, 16, 2, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        found = candidates(policy, obs, noise, per_parent=per_parent)
    return flow, policy, obs, noise, found


def test_candidates_hold_each_parent_alone_and_the_medoid_is_executed() -> None:
    flow, policy, obs, noise, found = _selector(3, seed=4, per_parent=2)
    with torch.no_grad():
        native = flow.sample(obs, 10, noise)
        actions = policy.predict_actions(obs, noise)
    assert found.sources == ["parent0", "parent0", "parent1", "parent1", "composition"]
    assert found.executed.shape == (5, 3, 4, 2)
    assert found.full.shape == (5, 3, 16, 2)
    torch.testing.assert_close(found.full[:, :, policy.executed], found.executed)
    unnormalize = flow.action_normalizer.unnormalize
    torch.testing.assert_close(unnormalize(found.full[0]), native)
    scores = agreement(policy, obs, found)
    picked = found.executed[scores.argmax(0), torch.arange(3)]
    torch.testing.assert_close(actions, unnormalize(picked))
    # the medoid: no other candidate is closer to the rest
    assert torch.all(scores.max(0).values >= scores[0])
    with torch.no_grad():
        for score in SCORES.values():
            assert score(policy, obs, found, found.full[0]).shape == (5, 3)
    with torch.no_grad():  # one row alone gets the same chunk as in the batch of three
        alone = policy.predict_actions({k: v[1:2] for k, v in obs.items()}, noise[1:2])
    torch.testing.assert_close(alone, actions[1:2])


def test_ode_log_density_ranks_as_the_exact_density_of_a_gaussian() -> None:
    """Data N(0, s^2 I): D(x, sigma) = x s^2 / (s^2 + sigma^2) exactly. On the coarse grid the
    estimate is an increasing affine function of the exact log-density (Euler's error scales
    it), so it ranks chunks as the density does."""
    s2, dim = 0.25, 8
    x = 0.5 * torch.randn(500, dim, generator=torch.Generator().manual_seed(0))
    estimate = ode_log_density(lambda x, sigma: x * s2 / (s2 + sigma**2), x)
    exact = -0.5 * x.pow(2).sum(1) / s2 - 0.5 * dim * math.log(2 * math.pi * s2)
    slope, intercept = torch.linalg.lstsq(
        torch.stack([exact, torch.ones_like(exact)], 1), estimate[:, None]
    ).solution[:, 0]
    assert slope > 0
    residual = estimate - (slope * exact + intercept)
    assert residual.abs().max() < 0.01 * estimate.std()


def test_likelihood_prefers_a_parents_own_chunk_to_a_far_one() -> None:
    _, policy, obs, _, found = _selector(2, seed=1, per_parent=1)
    found.full = torch.stack([found.full[0], found.full[0] + 4.0])  # own vs pushed far away
    found.executed = found.full[:, :, policy.executed]
    values = likelihood(policy, obs, found)
    assert torch.all(values[0] > values[1])


def test_coherence_is_highest_for_the_chunk_that_keeps_to_the_plan() -> None:
    _, policy, obs, _, found = _selector(2, seed=2, per_parent=2)
    shift = policy.executed.stop - policy.executed.start
    previous = torch.randn(2, 16, 2)
    found.full[3, :, : 16 - shift] = previous[:, shift:]  # candidate 3 keeps to the plan
    values = coherence(policy, obs, found, previous)
    assert torch.all(values.argmax(0) == 3)
    assert torch.all(values[3] == 0)
    assert torch.all(coherence(policy, obs, found, None) == 0)


def test_whole_chunk_scores_refuse_parents_of_other_horizons() -> None:
    _, policy, obs, _, found = _selector(1, seed=3, per_parent=1)
    found.full = None
    with pytest.raises(ValueError, match="horizon"):
        likelihood(policy, obs, found)


def test_contrast_pushes_away_from_the_weaker_checkpoints_samples(tmp_path) -> None:
    """Forward contrast: agreement plus the mean distance to the weaker checkpoints' samples,
    which are drawn per row (a row's rating does not depend on its batch) and differ from the
    candidates' draws; a candidate moved onto the weak samples loses its rating."""
    flow, ddpm = _pair()
    weak = [save_policy(tiny_policy(seed), tmp_path / f"weak{seed}") for seed in (7, 8)]
    config = CompositionConfig(
        operator="selector", selector_score="contrast", selector_contrast=[str(w) for w in weak]
    )
    policy = ComposedPolicy([flow, ddpm], config)
    obs, noise = _obs(3), torch.randn(3, 16, 2, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        found = candidates(policy, obs, noise, per_parent=2)
        negatives = weak_samples(policy, obs, noise, 2)
        values = contrast(policy, obs, found)
        row = candidates(policy, {k: v[1:2] for k, v in obs.items()}, noise[1:2], per_parent=2)
        alone = contrast(policy, {k: v[1:2] for k, v in obs.items()}, row)
    assert negatives.shape == (4, 3, 4, 2)
    assert not any(torch.equal(n, c) for n in negatives for c in found.executed)
    torch.testing.assert_close(alone[:, 0], values[:, 1])
    mean_distance = (found.executed[:, None] - negatives[None]).flatten(3).norm(dim=3).mean(1)
    torch.testing.assert_close(values, agreement(policy, obs, found) + mean_distance)
    found.executed[0] = negatives.mean(0)  # candidate 0 now sits among the weak samples
    assert torch.all(contrast(policy, obs, found)[0] < values[0])


def test_contrast_needs_a_fitting_weaker_checkpoint_of_each_parent(tmp_path) -> None:
    flow, ddpm = _pair()
    other = save_policy(tiny_policy(3, horizon=8), tmp_path / "short")
    fits = save_policy(tiny_policy(4), tmp_path / "fits")
    with pytest.raises(ValueError, match="weaker checkpoint of each parent"):
        ComposedPolicy(
            [flow, ddpm], CompositionConfig(operator="selector", selector_score="contrast")
        )
    config = CompositionConfig(
        operator="selector", selector_score="contrast", selector_contrast=[str(fits), str(other)]
    )
    with pytest.raises(ValueError, match=r"selector_contrast\[1\] .* its horizon is 8"):
        ComposedPolicy([flow, ddpm], config)

"""The selector: its candidates include each parent alone on the chunk's own noise, it picks
by the score per row, and a row's chunk does not depend on the batch it runs in."""

from __future__ import annotations

import torch

from robocompose.composition.composed_policy import ComposedPolicy, CompositionConfig
from robocompose.composition.selector import agreement, candidates, denoising
from tests.composition.test_composed_policy import _obs, tiny_policy


def _pair():
    flow, ddpm = tiny_policy(0), tiny_policy(1, family="diffusion")
    for p in (*flow.parameters(), *ddpm.parameters()):
        p.data.add_(0.3 * torch.randn_like(p))
    return flow, ddpm


def test_candidates_hold_each_parent_alone_and_the_medoid_is_executed() -> None:
    flow, ddpm = _pair()
    policy = ComposedPolicy([flow, ddpm], CompositionConfig(operator="selector"))
    obs, noise = _obs(3), torch.randn(3, 16, 2, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        chunks, sources = candidates(policy, obs, noise, per_parent=2)
        native = flow.sample(obs, 10, noise)[:, policy.executed]
        actions = policy.predict_actions(obs, noise)
    assert sources == ["parent0", "parent0", "parent1", "parent1", "composition"]
    assert chunks.shape == (5, 3, 4, 2)
    unnormalize = flow.action_normalizer.unnormalize
    torch.testing.assert_close(unnormalize(chunks[0]), native)
    scores = agreement(policy, obs, chunks)
    picked = chunks[scores.argmax(0), torch.arange(3)]
    torch.testing.assert_close(actions, unnormalize(picked))
    # the medoid: no other candidate is closer to the rest
    assert torch.all(scores.max(0).values >= scores[0])
    with torch.no_grad():
        assert denoising(policy, obs, chunks).shape == (5, 3)
    with torch.no_grad():  # one row alone gets the same chunk as in the batch of three
        alone = policy.predict_actions({k: v[1:2] for k, v in obs.items()}, noise[1:2])
    torch.testing.assert_close(alone, actions[1:2])

"""Stacked (fused) networks and prepared conditioning give the actions of the plain paths."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robocompose.composition.composed_policy import ComposedPolicy, CompositionConfig
from robocompose.composition.fused import (
    StackedDenoiser,
    StackedMlpDenoiser,
    StackedUnet,
    fusable,
    stack_networks,
)
from robocompose.composition.samplers import sample_euler, sample_heun
from robocompose.policies.base import build_policy
from robocompose.policies.config import PolicyConfig
from robocompose.policies.normalizer import AffineNormalizer

UNET = {"down_dims": (8, 16, 32), "n_groups": 4, "time_embed_dim": 16}
MLP = {"hidden": 32, "depth": 2}


def policy(seed: int, family: str, backbone: str = "unet", **kwargs):
    """A tiny policy with every weight moved off its initialisation (norm affines too)."""
    torch.manual_seed(seed)
    config = PolicyConfig(
        family=family,
        backbone=backbone,
        horizon=8,
        n_obs_steps=2,
        n_action_steps=4,
        action_dim=2,
        obs_shapes={"state": (3,)},
        backbone_kwargs=kwargs or (UNET if backbone == "unet" else MLP),
    )
    normalizers = {
        "action": AffineNormalizer(np.ones(2, np.float32), np.zeros(2, np.float32)),
        "state": AffineNormalizer.identity(3),
    }
    built = build_policy(config, normalizers).eval()
    for p in built.parameters():
        p.data.add_(0.1 * torch.randn_like(p))
    return built


def _obs(batch: int) -> dict[str, torch.Tensor]:
    return {"state": torch.randn(batch, 2, 3, generator=torch.Generator().manual_seed(5))}


@pytest.mark.parametrize("backbone", ["unet", "mlp"])
def test_stacked_network_is_each_parent_network(backbone: str) -> None:
    parents = [policy(0, "diffusion", backbone), policy(1, "flow", backbone)]
    stacked = stack_networks([p.net for p in parents])
    assert isinstance(stacked, StackedUnet if backbone == "unet" else StackedMlpDenoiser)
    x = torch.randn(2, 3, 8, 2)
    t = torch.tensor([[3.0, 40.5, 99.0], [0.0, 17.0, 60.0]])
    conds = torch.randn(2, 3, parents[0].net.global_cond_dim)
    with torch.no_grad():
        out = stacked(x, t, conds)
        for k, p in enumerate(parents):
            torch.testing.assert_close(out[k], p.net(x[k], t[k], conds[k]), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("families", [("diffusion", "flow"), ("flow", "flow")])
@pytest.mark.parametrize("sampler", ["euler", "heun"])
def test_fused_unets_equal_unets_run_one_by_one(families, sampler: str) -> None:
    a, b = policy(0, families[0]), policy(1, families[1])
    assert fusable([a, b]) and not fusable([a, policy(2, "flow", "mlp")])
    assert not fusable([a, policy(3, "flow", down_dims=(8, 16), n_groups=4, time_embed_dim=16)])
    noise = torch.randn(3, 8, 2, generator=torch.Generator().manual_seed(2))
    outs = {}
    for fuse in (True, False):
        config = CompositionConfig(weights=(0.3, 0.7), fuse=fuse, sampler=sampler)
        composed = ComposedPolicy([a, b], config)
        assert isinstance(composed.fused, StackedUnet) == fuse
        outs[fuse] = composed.predict_actions(_obs(3), noise)
    torch.testing.assert_close(outs[True], outs[False], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backbone", ["unet", "mlp"])
@pytest.mark.parametrize("family", ["diffusion", "flow"])
def test_prepared_conditioning_gives_the_unprepared_samples(backbone: str, family: str) -> None:
    """Prepared for one grid, a denoiser still answers off it (Heun's extra evaluations on a
    finer grid), and every answer is the plain network's."""
    parent = policy(0, family, backbone)
    noise = torch.randn(3, 8, 2, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        plain = parent.denoiser(_obs(3))
        sigmas = plain.sigmas(6)
        expected = sample_euler(plain, noise, sigmas)
        prepared = parent.denoiser(_obs(3))
        prepared.prepare(sigmas)
        assert sorted(prepared.prepared) == sorted(s for s in sigmas if s != 0.0)
        torch.testing.assert_close(sample_euler(prepared, noise, sigmas), expected)
        finer = plain.sigmas(10)
        torch.testing.assert_close(
            sample_heun(prepared, noise, finer), sample_heun(plain, noise, finer)
        )


@pytest.mark.parametrize("backbone", ["unet", "mlp"])
def test_one_parent_stacked_denoiser_equals_its_own(backbone: str) -> None:
    parent = policy(0, "diffusion", backbone)
    noise = torch.randn(2, 8, 2, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        cond = parent.encode(_obs(2))
        own = parent.denoiser_for(cond)
        stacked = StackedDenoiser(own, stack_networks([parent.net]), cond)
        sigmas = own.sigmas(6)
        plain = sample_euler(stacked, noise, sigmas)
        stacked.prepare(sigmas)
        torch.testing.assert_close(sample_euler(stacked, noise, sigmas), plain)
        torch.testing.assert_close(plain, sample_euler(own, noise, sigmas), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("parallel", [False, True])
def test_parents_of_two_architectures_run_as_one_stack_each(parallel: bool) -> None:
    """A UNet and an MLP: two groups of one (the stacked forms are the faster ones), serial or
    on the thread pool, with the actions of each parent's own network."""
    parents = [policy(0, "diffusion"), policy(1, "flow", "mlp"), policy(2, "flow")]
    noise = torch.randn(3, 8, 2, generator=torch.Generator().manual_seed(6))
    outs = {}
    for fuse in (True, False):
        config = CompositionConfig(weights=(0.3, 0.3, 0.4), fuse=fuse, parallel=parallel)
        composed = ComposedPolicy(parents, config)
        assert composed.fused is None
        if fuse:
            groups = [(group, type(net)) for group, net in composed.stacks]
            assert groups == [([0, 2], StackedUnet), ([1], StackedMlpDenoiser)]
        outs[fuse] = composed.predict_actions(_obs(3), noise)
    torch.testing.assert_close(outs[True], outs[False], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "family, prediction",
    [
        ("diffusion", "epsilon"),
        ("diffusion", "v_prediction"),
        ("diffusion", "sample"),
        ("flow", ""),
    ],
)
def test_affine_adapter_is_the_adapter(family: str, prediction: str) -> None:
    """What a composition folds (`NetworkDenoiser.affine`) is what the adapter computes."""
    parent = policy(0, family, "mlp")
    if prediction:
        parent.config.prediction_type = prediction
    denoiser = parent.denoiser(_obs(2))
    x, out = torch.randn(2, 8, 2), torch.randn(2, 8, 2)
    for sigma in (float("inf"), 30.0, 1.3, 0.01):
        fold = denoiser.affine(sigma)
        x_in, _ = denoiser.net_input(x, sigma)
        torch.testing.assert_close(x_in, fold.a * x)
        expected = denoiser.from_net_output(x_in, sigma, out)
        torch.testing.assert_close(expected.x0_hat, fold.p * x_in + fold.q * out)
        torch.testing.assert_close(expected.eps_hat, fold.r * x_in + fold.s * out)

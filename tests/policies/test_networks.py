"""Backbones and observation encoders: shapes, continuity in t, conditioning, gradients, errors."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from robocompose.policies.encoders import (  # noqa: E402
    ImageEncoder,
    LowDimEncoder,
    ObservationEncoder,
    SpatialSoftmax,
)
from robocompose.policies.networks import (  # noqa: E402
    BACKBONES,
    ConditionalUnet1D,
    MlpDenoiserNet,
    SinusoidalEmbedding,
    count_parameters,
    make_backbone,
)

A, C = 2, 10
SMALL = {
    "unet": dict(action_dim=A, global_cond_dim=C, down_dims=(16, 32, 64), time_embed_dim=32),
    "mlp": dict(action_dim=A, horizon=16, global_cond_dim=C, hidden=64, depth=2),
}


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def small(name: str, **overrides):
    return make_backbone(name, **{**SMALL[name], **overrides}).eval()


def inputs(batch: int = 3, horizon: int = 16):
    return torch.randn(batch, horizon, A), torch.rand(batch) * 100, torch.randn(batch, C)


# -- sinusoidal embedding --------------------------------------------------------------------
def test_embedding_shape_and_odd_dim():
    assert SinusoidalEmbedding(16)(torch.tensor([0.0, 3.5])).shape == (2, 16)
    assert SinusoidalEmbedding(17)(torch.tensor([0.0, 3.5])).shape == (2, 17)


def test_embedding_is_continuous_between_integer_steps():
    emb = SinusoidalEmbedding(128)
    e37, e375, e38 = emb(torch.tensor([37.0, 37.5, 38.0]))
    # Per channel sin/cos(w t) with w <= 1: |f(t) - (f(t-1/2) + f(t+1/2)) / 2| <= 1 - cos(w / 2).
    assert (e375 - (e37 + e38) / 2).abs().max() <= 1 - math.cos(0.5) + 1e-5
    # The midpoint is closer to both neighbours than they are to each other.
    gap = (e37 - e38).norm()
    assert (e375 - e37).norm() < gap and (e375 - e38).norm() < gap


# -- backbones ---------------------------------------------------------------------------------
@pytest.mark.parametrize("horizon", [4, 8, 16, 32])
def test_unet_output_shape_over_horizons(horizon):
    x, t, cond = inputs(horizon=horizon)
    assert small("unet")(x, t, cond).shape == x.shape


@pytest.mark.parametrize("horizon", [1, 8, 16])
def test_mlp_output_shape_over_horizons(horizon):
    x, t, cond = inputs(horizon=horizon)
    assert small("mlp", horizon=horizon)(x, t, cond).shape == x.shape


def test_unet_rejects_horizon_not_divisible():
    net = small("unet")
    with pytest.raises(ValueError, match="horizon=10"):
        net(*inputs(horizon=10))
    with pytest.raises(ValueError, match="horizon=6"):
        ConditionalUnet1D(A, C, down_dims=(16, 32, 64), horizon=6)


def test_mlp_rejects_other_horizon():
    with pytest.raises(ValueError, match="horizon=8"):
        small("mlp")(*inputs(horizon=8))


@pytest.mark.parametrize("name", sorted(BACKBONES))
def test_backbone_conformance(name):
    """Eval determinism, scalar timestep, time and FiLM conditioning matter, config rebuilds."""
    net = small(name)
    x, t, cond = inputs()
    out = net(x, t, cond)
    assert torch.equal(out, net(x, t, cond))
    assert torch.allclose(net(x, torch.tensor(37.4), cond), net(x, torch.full((3,), 37.4), cond))
    assert not torch.allclose(out, net(x, t, cond + 1.0), atol=1e-4)
    assert not torch.allclose(out, net(x, t + 50.0, cond), atol=1e-4)
    rebuilt = make_backbone(name, **net.config)
    rebuilt.load_state_dict(net.state_dict())
    assert torch.equal(rebuilt.eval()(x, t, cond), out)


@pytest.mark.parametrize("name", sorted(BACKBONES))
def test_backbone_fractional_timestep_is_between_neighbours(name):
    net = small(name)
    x, _, cond = inputs(batch=1)
    o37, o375, o38 = (net(x, torch.tensor([s]), cond) for s in (37.0, 37.5, 38.0))
    gap = (o37 - o38).norm()
    assert (o375 - o37).norm() < gap and (o375 - o38).norm() < gap


@pytest.mark.parametrize("name", sorted(BACKBONES))
def test_backbone_gradient_reaches_every_parameter(name):
    net = small(name).train()
    x, t, cond = inputs()
    net(x, t, cond).pow(2).mean().backward()
    missing = [n for n, p in net.named_parameters() if p.grad is None]
    assert not missing


@pytest.mark.parametrize("name", sorted(BACKBONES))
def test_backbone_rejects_bad_cond(name):
    x, t, _ = inputs()
    with pytest.raises(ValueError, match="global_cond"):
        small(name)(x, t, torch.randn(3, C + 1))


def test_unet_default_size():
    assert 0.5e6 <= count_parameters(ConditionalUnet1D(2, 40)) <= 8e6
    assert count_parameters(MlpDenoiserNet(2, 16, 40)) <= 2e6


def test_make_backbone_unknown_name_lists_choices():
    with pytest.raises(ValueError, match=r"\['mlp', 'unet'\].*'unet'"):
        make_backbone("unte")


# -- encoders ----------------------------------------------------------------------------------
def test_low_dim_encoder():
    x = torch.randn(4, 2, 5, dtype=torch.float64)
    flat = LowDimEncoder(5, 2)
    assert flat.out_dim == 10 and torch.equal(flat(x), x.flatten(1))  # keeps float64
    mlp = LowDimEncoder(5, 2, out_dim=32)
    assert mlp.out_dim == 32 and mlp(x).shape == (4, 32)


def test_spatial_softmax_keypoints_in_unit_square():
    ss = SpatialSoftmax(8, 5)
    kp = ss(torch.randn(3, 8, 7, 11) * 20)
    assert kp.shape == (3, 5, 2) and kp.abs().max() <= 1.0
    # A single hot pixel at the top-right corner puts every keypoint there.
    with torch.no_grad():
        ss.logits.weight.fill_(1.0)
        ss.logits.bias.zero_()
    feats = torch.zeros(1, 8, 7, 11)
    feats[:, :, 0, -1] = 100.0
    assert torch.allclose(ss(feats), torch.tensor([1.0, -1.0]).expand(1, 5, 2), atol=1e-4)


def test_image_encoder_shapes_crop_and_modes():
    enc = ImageEncoder(
        image_size=32, n_obs_steps=2, channels=(8, 16), num_keypoints=4, feature_dim=12
    )
    images = torch.randint(0, 256, (3, 2, 32, 32, 3), dtype=torch.uint8)
    assert enc.out_dim == 24 and enc(images).shape == (3, 24)
    assert enc.crop(images).shape == (3, 2, 29, 29, 3)
    enc.eval()
    assert torch.equal(enc(images), enc(images))
    assert torch.equal(enc(images), enc(images.float()))
    assert torch.equal(enc.crop(images), images[:, :, 1:30, 1:30])
    enc.train()
    crop = enc.crop(images)  # one window per sample, shared by its frames
    for b in range(3):
        hits = [
            (i, j)
            for i in range(4)
            for j in range(4)
            if torch.equal(crop[b], images[b, :, i : i + 29, j : j + 29])
        ]
        assert hits


def test_image_encoder_gradients():
    enc = ImageEncoder(image_size=16, n_obs_steps=1, channels=(8,), num_keypoints=4)
    enc(torch.rand(2, 1, 16, 16, 3) * 255).sum().backward()
    assert all(p.grad is not None for p in enc.parameters())


def test_observation_encoder_concatenates_in_sorted_order():
    enc = ObservationEncoder(
        {"state": (5,), "image": (16, 16, 3)},
        n_obs_steps=2,
        image_feature_dim=8,
        image_kwargs=dict(channels=(8,)),
    )
    assert enc.keys == ["image", "state"] and enc.out_dim == 16 + 10
    obs = {
        "state": torch.randn(3, 2, 5),
        "image": torch.rand(3, 2, 16, 16, 3) * 255,
        "unused": torch.zeros(1),
    }
    out = enc.eval()(obs)
    assert out.shape == (3, 26) and torch.equal(out[:, 16:], obs["state"].flatten(1))


def test_observation_encoder_errors_name_the_key():
    enc = ObservationEncoder({"agent_pos": (2,)}, n_obs_steps=2)
    with pytest.raises(ValueError, match="missing key 'agent_pos'"):
        enc({"state": torch.zeros(1, 2, 2)})
    with pytest.raises(ValueError, match=r"obs\['agent_pos'\] must have shape \(B, 2, 2\)"):
        enc({"agent_pos": torch.zeros(4, 2, 3)})
    with pytest.raises(ValueError, match="'depth'"):
        ObservationEncoder({"depth": (8, 8)}, n_obs_steps=1)

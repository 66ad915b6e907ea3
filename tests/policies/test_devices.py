"""A policy samples on its own device and in its own dtype: float64 end to end with no float32
op, the same computation as float32, on `meta` without a bare CPU tensor, and through the runner
with the noise of its episode seed."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from robocompose.policies.base import build_policy
from robocompose.policies.config import PolicyConfig
from robocompose.policies.normalizer import AffineNormalizer
from robocompose.policies.runner import PolicyPredictor, PolicyRunner

IMAGE = (8, 8, 3)


class FloatDtypes(TorchDispatchMode):
    """Records, per dtype, the aten ops that returned a floating-point tensor of that dtype.

    Views and gathers are left out: they compute nothing, so a float32 value they pass on was
    made by a recorded op or is one of the caller's float32 observations (a composition slices
    and gathers each parent's rows before the parent casts them as it normalises)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: dict[torch.dtype, set[str]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.is_view or func is torch.ops.aten.index.Tensor:
            return out
        for value in tree_flatten(out)[0]:
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                self.ops.setdefault(value.dtype, set()).add(str(func))
        return out


def run_in_float64_only(fn) -> torch.Tensor:
    """`fn()`'s result, after checking that every floating-point op it ran returned float64."""
    with FloatDtypes() as seen, torch.no_grad():
        out = fn()
    others = {str(dtype): sorted(ops) for dtype, ops in seen.ops.items() if dtype != torch.float64}
    assert not others, f"ops outside float64: {others}"
    assert out.dtype == torch.float64
    return out


def tiny_policy(
    family: str,
    backbone: str,
    seed: int = 0,
    image: bool = False,
    action_scale: float = 0.5,
    **family_settings,
):
    """A small policy moved off its initialisation, so every layer matters to its output."""
    torch.manual_seed(seed)
    shapes = {"state": [3]} | ({"image": list(IMAGE)} if image else {})
    if backbone == "mlp":
        net = {"hidden": 16, "depth": 2, "time_embed_dim": 16, "cond_hidden": 16}
    else:
        net = {"down_dims": [8, 16], "n_groups": 4, "time_embed_dim": 16}
    config = PolicyConfig.from_dict(
        dict(
            family=family,
            backbone=backbone,
            obs_keys=sorted(shapes),
            horizon=8,
            n_obs_steps=2,
            n_action_steps=4,
            num_inference_steps=5,
            action_dim=2,
            obs_shapes=shapes,
            backbone_kwargs=net,
            image_feature_dim=8,
            **family_settings,
        )
    )
    normalizers = {
        "action": AffineNormalizer(
            np.array([action_scale, 2.0], np.float32), np.array([0.1, -0.3], np.float32)
        ),
        "state": AffineNormalizer(
            np.array([1.5, 0.5, 1.0], np.float32), np.array([0.0, 0.2, -0.1], np.float32)
        ),
    }
    policy = build_policy(config, normalizers).eval()
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return policy


def observations(batch: int, image: bool = False, seed: int = 5) -> dict[str, torch.Tensor]:
    """What the runner sends: float32 states and uint8 images, (B, 2, ...)."""
    g = torch.Generator().manual_seed(seed)
    obs = {"state": torch.randn(batch, 2, 3, generator=g)}
    if image:
        obs["image"] = torch.randint(0, 256, (batch, 2, *IMAGE), generator=g, dtype=torch.uint8)
    return obs


def unit_noise(batch: int, shape: tuple[int, ...], seed: int = 1) -> torch.Tensor:
    return torch.randn(batch, *shape, generator=torch.Generator().manual_seed(seed))


SINGLES = {
    "flow_mlp": dict(family="flow", backbone="mlp"),
    "diffusion_unet_image": dict(family="diffusion", backbone="unet", image=True),
    "diffusion_mlp_v": dict(family="diffusion", backbone="mlp", prediction_type="v_prediction"),
}


@pytest.mark.parametrize("name", SINGLES)
def test_float64_policy_samples_without_a_float32_op(name: str) -> None:
    policy = tiny_policy(**SINGLES[name]).to(torch.float64)
    predictor = PolicyPredictor(policy)
    assert (predictor.device, predictor.dtype) == (torch.device("cpu"), torch.float64)
    obs = observations(3, image="image" in name)
    noise = unit_noise(3, predictor.noise_shape).double()
    actions = run_in_float64_only(lambda: predictor.predict_actions(obs, noise))
    assert actions.shape == (3, 4, 2)
    assert obs["state"].dtype == torch.float32  # the caller's tensors are left as they were


@pytest.mark.parametrize("name", ["flow_mlp", "diffusion_unet_image"])
def test_float64_is_the_float32_computation(name: str) -> None:
    """The same noise through the float32 and the float64 policy: equal up to float32 rounding,
    so the float64 path computes the same thing (schedule, time grid, normalisers, encoder)."""
    policy = tiny_policy(**SINGLES[name])
    obs = observations(3, image="image" in name)
    noise = unit_noise(3, policy.chunk_shape(1)[1:])
    with torch.no_grad():
        single = PolicyPredictor(policy).predict_actions(obs, noise)
        double = PolicyPredictor(copy.deepcopy(policy).double()).predict_actions(obs, noise)
    assert double.dtype == torch.float64
    torch.testing.assert_close(double.float(), single, atol=1e-4, rtol=0)
    assert not torch.equal(double.float(), single)  # float64 did run: it rounds differently


def test_timestep_embedding_is_computed_in_the_dtype_it_is_moved_to() -> None:
    """A float64 model's frequencies are float64 values, not float32 ones cast up."""
    policy = tiny_policy("flow", "mlp").to(torch.float64)
    freqs = policy.net.time_embed.freqs
    exact = torch.exp(
        -np.log(10_000.0) * torch.arange(8, dtype=torch.float64) / 8
    )  # time_embed_dim 16
    assert freqs.dtype == torch.float64
    torch.testing.assert_close(freqs, exact, atol=0, rtol=0)
    assert not torch.equal(freqs, exact.float().double())


@pytest.mark.parametrize("name", SINGLES)
def test_a_policy_on_meta_samples_without_touching_the_cpu(name: str) -> None:
    """On `meta` any op mixing in a CPU tensor (not a 0-d scalar) raises: a bare CPU tensor made
    while sampling fails here."""
    policy = tiny_policy(**SINGLES[name]).to("meta")
    predictor = PolicyPredictor(policy)
    obs = {k: v.to("meta") for k, v in observations(2, image="image" in name).items()}
    actions = predictor.predict_actions(obs, unit_noise(2, predictor.noise_shape).to("meta"))
    assert actions.device.type == "meta" and actions.shape == (2, 4, 2)
    drawn = policy.sample(obs)  # noise drawn on the CPU generator, then moved
    assert drawn.device.type == "meta"


def test_observations_and_noise_on_the_cpu_are_moved_to_the_policy() -> None:
    policy = tiny_policy("flow", "mlp").to("meta")
    actions = PolicyPredictor(policy).predict_actions(observations(2), unit_noise(2, (8, 2)))
    assert actions.device.type == "meta"


def test_runner_sends_float64_noise_of_the_episode_seed_and_returns_float64_actions() -> None:
    """The runner draws each episode's noise in float32 on the CPU and casts it: a float64
    policy then acts as the float32 one up to rounding."""
    policy = tiny_policy("flow", "mlp")
    obs = {"state": np.random.default_rng(0).normal(size=(3, 3)).astype(np.float32)}
    runs = {}
    for dtype in (torch.float32, torch.float64):
        runner = PolicyRunner(PolicyPredictor(copy.deepcopy(policy).to(dtype)))
        runner.reset(np.ones(3, bool), seeds=np.array([7, 8, 9]))
        runs[dtype] = np.stack([runner(obs) for _ in range(4)])
    assert runs[torch.float64].dtype == np.float64 and runs[torch.float32].dtype == np.float32
    np.testing.assert_allclose(runs[torch.float64], runs[torch.float32], atol=1e-4)
    assert not np.array_equal(runs[torch.float64], runs[torch.float32])


@pytest.mark.parametrize("dtype,atol", [(torch.bfloat16, 0.1), (torch.float16, 0.01)])
def test_runner_returns_half_precision_actions_as_float32(dtype: torch.dtype, atol: float) -> None:
    """numpy has no bfloat16: the runner hands the envs at least float32."""
    policy = tiny_policy("flow", "mlp")
    obs = {"state": np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)}
    runs = {}
    for run_dtype in (torch.float32, dtype):
        runner = PolicyRunner(PolicyPredictor(copy.deepcopy(policy).to(run_dtype)))
        runner.reset(np.ones(2, bool), seeds=np.array([7, 8]))
        runs[run_dtype] = np.stack([runner(obs) for _ in range(4)])
    assert runs[dtype].dtype == np.float32
    np.testing.assert_allclose(runs[dtype], runs[torch.float32], atol=atol)

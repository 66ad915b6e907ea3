"""Composition runs where its parents are, in their dtype: every operator, sampler, SuperDiff,
the mixture, the fused MLP path and a parameter merge in float64 with no float32 op; parents
moved with `.to()` (to float64, to `meta`) compose; CUDA gives the CPU's actions."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from robocompose.composition.composed_policy import ComposedPolicy, CompositionConfig
from robocompose.composition.merge import merge_parameters
from robocompose.composition.samplers import sample_ancestral, sample_annealed_mcmc
from robocompose.composition.superdiff import sample_superdiff
from robocompose.policies.runner import PolicyPredictor, PolicyRunner
from tests.policies.test_devices import (
    observations,
    run_in_float64_only,
    tiny_policy,
    unit_noise,
)

# (operator, weights, extra config); parents are a flow MLP and a diffusion MLP or UNet
OPERATOR_CASES = {
    "convex": ("convex", (0.6, 0.4), {}),
    "weighted_sum": ("weighted_sum", (0.7, 0.6), {}),
    "guided": ("guided", (0.0, 0.3), {}),
    "schedule": ("schedule", (1.0, 0.0), {"low_weights": (0.2, 0.8)}),
    "mixture": ("mixture", (0.5, 0.5), {}),
    "superdiff_and": ("superdiff_and", (0.5, 0.5), {"steps": 6}),
    "superdiff_or": ("superdiff_or", (0.5, 0.5), {"steps": 6}),
    "heun": ("convex", (0.6, 0.4), {"sampler": "heun"}),
    "ancestral": ("convex", (0.6, 0.4), {"sampler": "ancestral"}),
    "mcmc_mala": (
        "convex",
        (0.6, 0.4),
        {"sampler": "mcmc", "steps": 3, "sampler_kwargs": {"mcmc_steps": 4}},
    ),
    "mcmc_ula": (
        "convex",
        (0.6, 0.4),
        {"sampler": "mcmc", "steps": 3, "sampler_kwargs": {"method": "ula", "mcmc_steps": 4}},
    ),
}
# The fused MLP pair runs every case; the pair run one by one (fuse=False) the cases whose code
# differs from the others'; a UNet parent once (the single-policy tests cover its own path).
UNFUSED = ("convex", "mixture", "superdiff_or", "ancestral")
CASES = [
    *(("diffusion_mlp", c, True) for c in OPERATOR_CASES),
    *(("diffusion_mlp", c, False) for c in UNFUSED),
    ("diffusion_unet", "convex", True),
]


def parents(second: str = "diffusion_mlp", mismatch: bool = False) -> list:
    """A flow MLP and a second parent: a diffusion MLP of the same shape (the fused path), a
    diffusion UNet (parents run one by one), or a flow MLP (mergeable). `mismatch`: the second
    parent's action normaliser differs, so composition maps between the two action spaces."""
    family, backbone = second.split("_")
    scale = 0.8 if mismatch else 0.5
    second_parent = tiny_policy(family, backbone, seed=1, action_scale=scale)
    return [tiny_policy("flow", "mlp", seed=0), second_parent]


def compose(policies: list, case: str, **overrides) -> ComposedPolicy:
    operator, weights, extra = OPERATOR_CASES[case]
    settings = {"steps": 5} | extra | overrides
    config = CompositionConfig(operator=operator, weights=weights, **settings)
    return ComposedPolicy(policies, config)


def inputs(composed: ComposedPolicy, batch: int = 3) -> tuple[dict, torch.Tensor]:
    """Observations as the envs give them (float32, CPU) and noise in the composition's dtype."""
    return observations(batch), unit_noise(batch, composed.noise_shape).to(composed.dtype)


def sample(composed: ComposedPolicy, batch: int = 3) -> torch.Tensor:
    return composed.predict_actions(*inputs(composed, batch))


def sample_in_float64_only(composed: ComposedPolicy) -> torch.Tensor:
    obs, noise = inputs(composed)
    return run_in_float64_only(lambda: composed.predict_actions(obs, noise))


@pytest.mark.parametrize("second,case,fuse", CASES)
def test_float64_composition_runs_without_a_float32_op(second: str, case: str, fuse: bool) -> None:
    composed = compose([p.to(torch.float64) for p in parents(second)], case, fuse=fuse)
    assert composed.dtype == torch.float64
    fused = fuse and second == "diffusion_mlp" and case != "mixture"
    assert (composed.fused is not None) == fused
    actions = sample_in_float64_only(composed)
    assert actions.shape == (3, 4, 2) and actions.isfinite().all()


@pytest.mark.parametrize("fuse", [True, False])
def test_float64_action_maps_between_parents_run_without_a_float32_op(fuse: bool) -> None:
    policies = [p.to(torch.float64) for p in parents(mismatch=True)]
    composed = compose(policies, "convex", allow_normalizer_mismatch=True, fuse=fuse)
    assert composed.maps[1] is not None and composed.maps[1].scale.dtype == torch.float64
    sample_in_float64_only(composed)


def test_float64_parameter_merge_runs_without_a_float32_op() -> None:
    a, b = (p.to(torch.float64) for p in parents("flow_mlp"))
    merged = merge_parameters([a, b], (0.3, 0.7))
    assert merged.dtype == torch.float64
    predictor = PolicyPredictor(merged)
    obs, noise = observations(3), unit_noise(3, predictor.noise_shape).double()
    run_in_float64_only(lambda: predictor.predict_actions(obs, noise))


@pytest.mark.parametrize("case", ["convex", "weighted_sum", "heun"])
def test_float64_composition_is_the_float32_computation(case: str) -> None:
    """Composed in float32 then moved with `composed.to(float64)`: the fused network and the
    action maps follow, and the actions are the float32 ones up to rounding."""
    composed = compose(parents(mismatch=True), case, allow_normalizer_mismatch=True)
    single = sample(composed)
    fused32 = composed.fused
    assert composed.to(torch.float64) is composed
    assert composed.fused is not fused32 and composed.fused.cond_in.weight.dtype == torch.float64
    double = sample(composed)
    assert double.dtype == torch.float64
    torch.testing.assert_close(double.float(), single, atol=1e-4, rtol=0)
    assert not torch.equal(double.float(), single)


def test_parents_on_different_devices_or_dtypes_are_refused_naming_both() -> None:
    a, b = parents()
    with pytest.raises(ValueError, match=r"parent 0 is on cpu in torch.float32, parent 1 on meta"):
        compose([a, copy.deepcopy(b).to("meta")], "convex")
    with pytest.raises(ValueError, match=r"parent 1 on cpu in torch.float64"):
        merge_parameters([a, copy.deepcopy(a).double()], (0.5, 0.5))
    composed = compose([a, b], "convex")
    b.double()  # moved behind the composition's back
    with pytest.raises(ValueError, match=r"torch.float32, parent 1 on cpu in torch.float64"):
        sample(composed)


# On `meta` every op that mixes in a CPU tensor raises, so these runs show that composition
# makes no tensor off its parents' device. What reads tensor values cannot run there.
META_SKIPS = {
    "mixture": "picks each row's parent from its noise values (.cpu(), torch.nonzero)",
    "mcmc_mala": "adapts its step size from the acceptance rate (.item())",
    "superdiff_and": "seeds per-row generators from noise values (row_generators); see below",
    "superdiff_or": "seeds per-row generators from noise values (row_generators); see below",
    "ancestral": "seeds per-row generators from noise values (row_generators); see below",
    "mcmc_ula": "seeds per-row generators from noise values (row_generators); see below",
}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, marks=pytest.mark.skip(reason=META_SKIPS[c])) if c in META_SKIPS else c
        for c in OPERATOR_CASES
    ],
)
@pytest.mark.parametrize("second", ["diffusion_mlp", "diffusion_unet"])
def test_parents_moved_to_meta_compose(case: str, second: str) -> None:
    composed = compose(parents(second), case).to("meta")
    assert composed.device.type == "meta"
    if composed.fused is not None:
        assert composed.fused.cond_in.weight.device.type == "meta"
    actions = sample(composed)  # observations and noise come from the CPU, as the runner's do
    assert actions.device.type == "meta" and actions.shape == (3, 4, 2)


@pytest.mark.parametrize("mode", ["and", "or"])
def test_superdiff_and_stochastic_samplers_draw_onto_meta(mode: str) -> None:
    """The stochastic paths on `meta` with per-row CPU generators given by hand (what
    `row_generators` would seed from the noise values): draws are moved to the device."""
    composed = compose(parents(), "convex").to("meta")
    denoiser = composed.denoiser({k: v.to("meta") for k, v in observations(2).items()})
    noise = unit_noise(2, composed.noise_shape).to("meta")
    rows = [torch.Generator().manual_seed(i) for i in range(2)]
    sigmas = [8.0, 2.0, 0.5, 0.0]
    outs = [
        sample_superdiff(
            denoiser.parent_outputs, noise, sigmas, generator=rows, mode=mode, weights=(0.5, 0.5)
        ),
        sample_ancestral(denoiser, noise, sigmas, generator=rows),
        sample_annealed_mcmc(denoiser, noise, sigmas, generator=rows, mcmc_steps=2, method="ula"),
    ]
    assert all(out.device.type == "meta" and out.shape == (2, 8, 2) for out in outs)


def test_merge_of_parents_on_meta_stays_there() -> None:
    merged = merge_parameters([p.to("meta") for p in parents("flow_mlp")], (0.5, 0.5))
    assert merged.device.type == "meta"
    actions = PolicyPredictor(merged).predict_actions(observations(2), unit_noise(2, (8, 2)))
    assert actions.device.type == "meta"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("case", ["convex", "ancestral", "superdiff_or", "mixture"])
def test_composition_on_cuda_gives_the_cpu_actions(case: str) -> None:
    composed = compose(parents(), case)
    on_cpu = sample(composed)
    on_cuda = sample(composed.to("cuda"))
    assert on_cuda.device.type == "cuda"
    torch.testing.assert_close(on_cuda.cpu(), on_cpu, atol=1e-4, rtol=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_runner_on_cuda_acts_as_on_the_cpu() -> None:
    """The runner's episode noise comes from CPU generators, so the seeds give the same actions."""
    composed = compose(parents(), "ancestral")
    obs = {"state": np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)}
    actions = {}
    for device in ("cpu", "cuda"):
        runner = PolicyRunner(composed.to(device))
        runner.reset(np.ones(2, bool), seeds=np.array([3, 4]))
        actions[device] = np.stack([runner(obs) for _ in range(5)])
    np.testing.assert_allclose(actions["cuda"], actions["cpu"], atol=1e-4)

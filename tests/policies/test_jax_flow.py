"""The JAX flow policy against the torch one: same weights, same Denoiser; composition with torch
parents (the analytic Gaussian cases and real networks); one compile per shape; a real run."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

pytest.importorskip("jax", reason="the `jax` extra (jax, flax, optax) runs the JAX policy")
pytest.importorskip("flax", reason="the `jax` extra (jax, flax, optax) runs the JAX policy")
pytest.importorskip("optax", reason="the `jax` extra (jax, flax, optax) trains the JAX policy")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from robocompose.composition.composed_denoiser import ComposedDenoiser, karras_sigmas  # noqa: E402
from robocompose.composition.composed_policy import ComposedPolicy  # noqa: E402
from robocompose.composition.config import CompositionConfig  # noqa: E402
from robocompose.composition.operators import Convex, WeightedSum  # noqa: E402
from robocompose.composition.samplers import sample_heun  # noqa: E402
from robocompose.policies.base import build_policy  # noqa: E402
from robocompose.policies.config import PolicyConfig  # noqa: E402
from robocompose.policies.flow import FlowDenoiser  # noqa: E402
from robocompose.policies.jax_bridge import (  # noqa: E402
    JaxBoundNet,
    shares_memory,
    to_jax,
    to_torch,
)
from robocompose.policies.jax_flow import JaxFlowPolicy  # noqa: E402
from robocompose.policies.normalizer import AffineNormalizer  # noqa: E402
from tests.composition.test_gaussian_composition import (  # noqa: E402
    MUS,
    SIGMA_MAX,
    VARS,
    GaussianDenoiser,
    W,
    _exact_flow_net,
    exact_composed_ode,
)

SMALL = {"hidden": 64, "depth": 2, "time_embed_dim": 32, "cond_hidden": 48}
STATE_DIM, ACTION_DIM = 5, 3
SIGMAS = [math.inf, 40.0, 3.0, 1.0, 0.25, 0.01]


def _config(family: str, **extra) -> PolicyConfig:
    return PolicyConfig.from_dict(
        {
            "family": family,
            "backbone": "mlp",
            "backbone_kwargs": SMALL,
            "action_dim": ACTION_DIM,
            "obs_shapes": {"state": [STATE_DIM]},
            **extra,
        }
    )


def _normalizers() -> dict[str, AffineNormalizer]:
    rng = np.random.default_rng(0)
    return {
        "state": AffineNormalizer(
            rng.uniform(0.5, 2, STATE_DIM).astype(np.float32),
            rng.uniform(-1, 1, STATE_DIM).astype(np.float32),
        ),
        "action": AffineNormalizer(
            rng.uniform(0.5, 2, ACTION_DIM).astype(np.float32),
            rng.uniform(-1, 1, ACTION_DIM).astype(np.float32),
        ),
    }


def _torch_flow(seed: int = 0):
    """A torch flow MLP with every weight perturbed (LayerNorms too), so each name counts."""
    torch.manual_seed(seed)
    policy = build_policy(_config("flow"), _normalizers()).eval()
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return policy


def _jax_twin(torch_policy) -> JaxFlowPolicy:
    config = _config("flow_jax", **{"flow_time_scale": torch_policy.config.flow_time_scale})
    policy = build_policy(config, torch_policy.normalizers)
    policy.load_state_dict(torch_policy.state_dict())
    return policy.eval()


def _obs(batch: int, seed: int = 1) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"state": torch.randn(batch, 2, STATE_DIM, generator=g)}


def test_jax_checkpoint_names_and_shapes_are_torchs() -> None:
    torch_policy = _torch_flow()
    jax_policy = build_policy(_config("flow_jax"), _normalizers())
    own = {k: tuple(v.shape) for k, v in jax_policy.state_dict().items()}
    assert own == {k: tuple(v.shape) for k, v in torch_policy.state_dict().items()}


@pytest.mark.parametrize("sigma", SIGMAS)
def test_same_weights_give_the_same_denoiser_output(sigma: float) -> None:
    torch_policy = _torch_flow()
    jax_policy = _jax_twin(torch_policy)
    obs = _obs(4)
    torch.testing.assert_close(jax_policy.encode(obs), torch_policy.encode(obs), atol=1e-5, rtol=0)
    cond = torch_policy.encode(obs)
    x = torch.randn(4, 16, ACTION_DIM, generator=torch.Generator().manual_seed(2))
    want = torch_policy.denoiser_for(cond)(x, sigma)
    got = jax_policy.denoiser_for(cond)(x, sigma)
    torch.testing.assert_close(got.x0_hat, want.x0_hat, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got.eps_hat, want.eps_hat, atol=1e-5, rtol=1e-5)


def test_same_weights_give_the_same_native_samples_and_loss() -> None:
    torch_policy = _torch_flow()
    jax_policy = _jax_twin(torch_policy)
    obs = _obs(3)
    noise = torch.randn(3, 16, ACTION_DIM, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(
        jax_policy.sample(obs, 10, noise), torch_policy.sample(obs, 10, noise), atol=1e-5, rtol=1e-5
    )
    actions = torch.randn(3, 16, ACTION_DIM)
    torch.manual_seed(4)
    want = torch_policy.loss(obs, actions)
    torch.manual_seed(4)
    torch.testing.assert_close(jax_policy.loss(obs, actions), want.detach(), atol=1e-5, rtol=1e-5)


def _jax_gaussian_flow_fn(mu: float, var: float, scale: float):
    """The exact velocity of N(mu, var) per entry, computed in JAX (`_exact_flow_net`'s)."""

    @jax.jit
    def fn(params, x_t, tt, cond):
        t = tt[:, None, None] / scale
        at_one = x_t - mu
        safe = jnp.where(t >= 1.0, 0.5, t)
        sigma, x = safe / (1 - safe), x_t / (1 - safe)
        x0 = mu + var / (var + sigma**2) * (x - mu)
        return jnp.where(t >= 1.0, at_one, (x_t - x0) / safe)

    return fn


def _jax_gaussian_flow(mu: float, var: float) -> FlowDenoiser:
    bound = JaxBoundNet(_jax_gaussian_flow_fn(mu, var, 100.0), {}, jnp.zeros((1, 1)))
    return FlowDenoiser(bound, 1, 1, time_scale=100.0)


def test_a_jax_gaussian_composes_with_a_torch_gaussian_to_the_closed_form() -> None:
    """A JAX flow of N(mu_0, v_0) (through the DLPack crossing) and a torch N(mu_1, v_1),
    composed convexly: the composed ODE's exact mean and variance, and what the same
    composition of two torch parents gives."""
    jax_parent = _jax_gaussian_flow(MUS[0], VARS[0])
    torch_twin = FlowDenoiser(_exact_flow_net(MUS[0], VARS[0], 100.0), 1, 1, time_scale=100.0)
    other = GaussianDenoiser(MUS[1], VARS[1])
    sigmas = karras_sigmas(200, 1e-4, SIGMA_MAX)
    noise = torch.tensor([0.0, 1.0]).reshape(2, 1, 1)  # the sampler is affine in its noise
    mixed = sample_heun(ComposedDenoiser([jax_parent, other], Convex(W)), noise, sigmas)
    all_torch = sample_heun(ComposedDenoiser([torch_twin, other], Convex(W)), noise, sigmas)
    torch.testing.assert_close(mixed, all_torch, atol=1e-5, rtol=1e-5)
    mean, var = mixed[0].item(), (mixed[1].item() - mixed[0].item()) ** 2
    want_mean, want_var = exact_composed_ode(MUS, VARS, W, SIGMA_MAX)
    assert mean == pytest.approx(want_mean, abs=2e-3)
    assert var == pytest.approx(want_var, rel=1e-2)


CASES = [(Convex(W), s) for s in (math.inf, 5.0, 0.7, 0.05)]
CASES += [(WeightedSum([1.0, 1.0]), s) for s in (5.0, 0.7, 0.05)]  # a product: finite sigma


@pytest.mark.parametrize("operator,sigma", CASES)
def test_composed_jax_and_torch_gaussians_give_the_closed_form_score(operator, sigma) -> None:
    """Per noise level the composed score is sum_i w_i score_i, each Gaussian's in closed
    form: eps = sum_i w_i (x - mu_i) sigma / (v_i + sigma^2) (a product of experts when the
    weights are (1, 1))."""
    composed = ComposedDenoiser(
        [_jax_gaussian_flow(MUS[0], VARS[0]), GaussianDenoiser(MUS[1], VARS[1])], operator
    )
    x = torch.linspace(-2.0, 2.0, 9).reshape(9, 1, 1)
    eps = composed(x, sigma).eps_hat
    if math.isinf(sigma):  # x holds the unit noise; each parent's eps is that noise
        want = sum(operator.weights) * x
    else:
        want = sum(
            w * (x - mu) * sigma / (v + sigma**2)
            for w, mu, v in zip(operator.weights, MUS, VARS, strict=True)
        )
    torch.testing.assert_close(eps, want, atol=1e-5, rtol=1e-5)


def _diffusion_parent():
    torch.manual_seed(5)
    config = _config("diffusion", prediction_type="v_prediction")
    return build_policy(config, _normalizers()).eval()


@pytest.mark.parametrize("preset", [("convex", (0.4, 0.6)), ("weighted_sum", (1.0, 1.0))])
def test_a_jax_parent_composes_with_a_torch_parent_as_its_torch_twin_does(preset) -> None:
    """Composition takes the JAX policy as any parent (no fused stack: its net is not a torch
    backbone) and gives what the all-torch composition of the same weights gives."""
    operator, weights = preset
    diffusion, torch_flow = _diffusion_parent(), _torch_flow()
    jax_flow = _jax_twin(torch_flow)
    config = CompositionConfig(operator=operator, weights=weights, steps=10)
    mixed = ComposedPolicy([diffusion, jax_flow], config)
    all_torch = ComposedPolicy([diffusion, torch_flow], config)
    assert mixed.stacks is None and all_torch.stacks is not None
    obs = _obs(2, seed=6)
    noise = torch.randn(2, 16, ACTION_DIM, generator=torch.Generator().manual_seed(7))
    torch.testing.assert_close(
        mixed.predict_actions(obs, noise),
        all_torch.predict_actions(obs, noise),
        atol=1e-5,
        rtol=1e-5,
    )


def test_jit_compiles_once_per_shape() -> None:
    """XLA compilations counted by JAX's own monitoring events: repeated calls of one batch
    size compile nothing new, a new batch size compiles its network once."""
    compiles = []

    def listen(event: str, duration: float, **kwargs) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(event)

    policy = build_policy(_config("flow_jax"), _normalizers())
    obs1, obs3 = _obs(1), _obs(3)
    x1 = torch.randn(1, 16, ACTION_DIM)
    x3 = torch.randn(3, 16, ACTION_DIM)
    noise1 = torch.randn(1, 16, ACTION_DIM)
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        denoiser = policy.denoiser(obs1)  # encode: one compile
        denoiser(x1, math.inf)  # the network: one compile
        assert len(compiles) == 2
        for _ in range(3):
            for sigma in SIGMAS:
                policy.denoiser(obs1)(x1, sigma)
        assert len(compiles) == 2
        big = policy.denoiser(obs3)
        for sigma in SIGMAS:
            big(x3, sigma)
        assert len(compiles) == 4  # encode and network, once each for batch 3
        policy.sample(obs1, 10, noise1)
        policy.sample(obs1, 10, noise1)
        assert len(compiles) == 5  # the jitted sampler, once for (batch 1, 10 steps)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)


def test_crossings_share_the_buffer_both_ways() -> None:
    x = torch.randn(4, 16, ACTION_DIM)
    assert shares_memory(x, to_jax(x))
    array = jnp.arange(12.0).reshape(3, 4)
    assert shares_memory(to_torch(array), array)
    off_boundary = torch.randn(65)[1:]  # 4 bytes past an aligned start: JAX copies it
    crossed = to_jax(off_boundary)
    assert not shares_memory(off_boundary, crossed)
    np.testing.assert_array_equal(np.asarray(crossed), off_boundary.numpy())


def test_image_keys_backbones_and_devices_are_refused() -> None:
    with pytest.raises(ValueError, match=r"low-dim observations only.*'image'"):
        PolicyConfig.from_dict(
            {"family": "flow_jax", "obs_keys": ["image"], "obs_shapes": {"image": [8, 8, 3]}}
        )
    with pytest.raises(ValueError, match="MLP backbone only"):
        PolicyConfig.from_dict({"family": "flow_jax", "backbone": "unet"})
    with pytest.raises(ValueError, match=r"`backbone_kwargs` \['down_dims'\]"):
        PolicyConfig.from_dict({"family": "flow_jax", "backbone_kwargs": {"down_dims": [8]}})
    policy = build_policy(_config("flow_jax"), _normalizers())
    with pytest.raises(ValueError, match="JAX's CPU backend.*cuda"):
        policy.to("cuda")
    with pytest.raises(ValueError, match=r"obs\['state'\] must have shape \(B, 2, 5\)"):
        policy.encode({"state": torch.zeros(1, 2, 4)})


def test_a_short_run_writes_a_checkpoint_that_loads_and_resumes_exactly(tmp_path) -> None:
    from robocompose.policies.checkpoint import load_policy
    from robocompose.policies.train import TrainConfig, train
    from robocompose.sim.collect import collect

    dataset = tmp_path / "pusht.hdf5"
    collect("PushT", 1, dataset, progress=False)
    policy = PolicyConfig.from_dict({"family": "flow_jax", "backbone_kwargs": SMALL})
    small = dict(dataset=str(dataset), policy=policy, steps=4, batch_size=8, warmup_steps=1)
    straight = train(TrainConfig(out=str(tmp_path / "a"), **small), progress=False)
    resumed = TrainConfig(out=str(tmp_path / "b"), checkpoint_every=2, **small)
    train(resumed, progress=False, stop_at_step=2)
    assert load_policy(tmp_path / "b").metadata["step"] == 2
    train(resumed, progress=False)
    a, b = load_policy(straight), load_policy(tmp_path / "b")
    assert isinstance(a, JaxFlowPolicy) and a.metadata["step"] == 4
    assert a.metadata["task"] == "robocompose/PushT-v0"
    for name, tensor in a.state_dict().items():
        torch.testing.assert_close(tensor, b.state_dict()[name], atol=0, rtol=0)
    assert a.fingerprint() == b.fingerprint()
    obs = {"state": torch.zeros(1, 2, *a.config.obs_shapes["state"])}
    assert torch.isfinite(a.sample(obs)).all()

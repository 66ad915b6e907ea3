"""A policy family is one module: a family defined here, registered by the decorator, trains,
saves, loads and composes with a built-in family, with nothing else to edit."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from robocompose.cli import load_verb_config
from robocompose.composition.api import compose
from robocompose.composition.samplers import sample_euler
from robocompose.config import ConfigError, group_options
from robocompose.policies.base import GenerativePolicy, register_family
from robocompose.policies.checkpoint import load_policy, save_policy
from robocompose.policies.config import FLAT_CONFIG_DEFAULTS, PolicyConfig
from robocompose.policies.denoiser import BoundNet, DenoiserOutput, NetworkDenoiser
from robocompose.policies.registry import family_names, get_family
from robocompose.policies.train import TrainConfig, train
from robocompose.policies.train_state import STATE_JSON
from robocompose.shipped import shipped_path
from robocompose.sim.collect import collect

SIGMA_MIN = 0.02


@dataclass
class VarianceExplodingConfig(PolicyConfig):
    """x = a0 + sigma n with sigma log-uniform in [SIGMA_MIN, sigma_max]; x0 is predicted."""

    family: str = "toy_ve"
    sigma_max: float = 20.0


def _timestep(sigma: float | torch.Tensor, sigma_max: float) -> float | torch.Tensor:
    """log sigma mapped onto [0, 100], the range the backbones' time embedding expects."""
    log = torch.log if isinstance(sigma, torch.Tensor) else math.log
    return 100.0 * (log(sigma) - math.log(SIGMA_MIN)) / (math.log(sigma_max) - math.log(SIGMA_MIN))


def _grid(steps: int, sigma_max: float) -> list[float]:
    return [float(s) for s in np.geomspace(sigma_max, SIGMA_MIN, steps)] + [0.0]


class VarianceExplodingDenoiser(NetworkDenoiser):
    def __init__(self, net: BoundNet, horizon: int, action_dim: int, sigma_max: float) -> None:
        self.net, self.horizon, self.action_dim = net, horizon, action_dim
        self.sigma_min, self.sigma_max = SIGMA_MIN, sigma_max

    def sigmas(self, steps: int) -> list[float]:
        return _grid(steps, self.sigma_max)

    def net_input(self, x: torch.Tensor, sigma: float) -> tuple[torch.Tensor, torch.Tensor]:
        # at sigma = inf x holds the unit noise: the scaled input's limit; time clamps to the top
        x_in = x if math.isinf(sigma) else x / math.sqrt(1.0 + sigma**2)
        t = _timestep(min(sigma, self.sigma_max), self.sigma_max)
        return x_in, torch.full((x.shape[0],), t, dtype=x.dtype, device=x.device)

    def from_net_output(
        self, x_in: torch.Tensor, sigma: float, out: torch.Tensor
    ) -> DenoiserOutput:
        if math.isinf(sigma):
            return DenoiserOutput(out, x_in)
        return DenoiserOutput(out, (x_in * math.sqrt(1.0 + sigma**2) - out) / sigma)


@register_family("toy_ve", config=VarianceExplodingConfig)
class VarianceExplodingPolicy(GenerativePolicy):
    config: VarianceExplodingConfig

    def loss(self, obs: dict[str, torch.Tensor], actions: torch.Tensor) -> torch.Tensor:
        a0 = self.action_normalizer.normalize(actions)
        sigma_max = self.config.sigma_max
        u = torch.rand(a0.shape[0], dtype=a0.dtype, device=a0.device)
        sigma = torch.exp(math.log(SIGMA_MIN) + u * (math.log(sigma_max) - math.log(SIGMA_MIN)))
        s = sigma[:, None, None]
        x_in = (a0 + s * torch.randn_like(a0)) / torch.sqrt(1.0 + s**2)
        return F.mse_loss(self.net(x_in, _timestep(sigma, sigma_max), self.encode(obs)), a0)

    def sample_normalized(
        self, cond: torch.Tensor, steps: int, noise: torch.Tensor
    ) -> torch.Tensor:
        sigmas = _grid(steps, self.config.sigma_max)
        x = noise * math.sqrt(1.0 + sigmas[0] ** 2)
        for sigma, sigma_next in zip(sigmas[:-1], sigmas[1:], strict=True):
            t = torch.full((x.shape[0],), _timestep(sigma, self.config.sigma_max))
            x0 = self.net(x / math.sqrt(1.0 + sigma**2), t.to(x), cond)
            x = x0 + sigma_next * (x - x0) / sigma
        return x

    def denoiser_for(self, cond: torch.Tensor) -> VarianceExplodingDenoiser:
        c = self.config
        return VarianceExplodingDenoiser(self.bound_net(cond), c.horizon, c.action_dim, c.sigma_max)


SMALL = {"backbone": "mlp", "backbone_kwargs": {"hidden": 32, "depth": 1}}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "pusht.hdf5"
    collect("PushT", 1, path, progress=False)
    return path


def _train_config(dataset: Path, out: Path, policy: PolicyConfig, steps: int) -> TrainConfig:
    return TrainConfig(
        dataset=str(dataset), out=str(out), policy=policy, steps=steps, batch_size=8, warmup_steps=1
    )


@pytest.fixture(scope="module")
def trained(dataset: Path, tmp_path_factory) -> tuple[Path, Path]:
    """The toy family and a flow policy, each trained a few steps on one tiny demo file."""
    root = tmp_path_factory.mktemp("registry")
    runs = {"toy": VarianceExplodingConfig(sigma_max=15.0, **SMALL)}
    runs["flow"] = PolicyConfig.from_dict({"family": "flow", **SMALL})
    for name, policy in runs.items():
        train(_train_config(dataset, root / name, policy, steps=4), progress=False)
    return root / "toy", root / "flow"


def test_a_family_defined_outside_the_package_trains_saves_and_loads(trained) -> None:
    toy_folder, _ = trained
    assert "toy_ve" in family_names()
    toy = load_policy(toy_folder)
    assert isinstance(toy, VarianceExplodingPolicy)
    assert isinstance(toy.config, VarianceExplodingConfig) and toy.config.sigma_max == 15.0
    assert toy.metadata["step"] == 4
    obs = {"state": torch.randn(3, 2, 6, generator=torch.Generator().manual_seed(0))}
    noise = torch.randn(toy.chunk_shape(3), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        native = toy.sample_normalized(toy.encode(obs), 6, noise)
        denoiser = toy.denoiser(obs)
        through_adapter = sample_euler(denoiser, noise, denoiser.sigmas(6))
    torch.testing.assert_close(through_adapter, native, atol=1e-5, rtol=0)


def test_the_family_composes_with_a_builtin_family(trained) -> None:
    toy, flow = (load_policy(folder) for folder in trained)
    obs = {"state": torch.randn(2, 2, 6, generator=torch.Generator().manual_seed(0))}
    noise = torch.randn(toy.chunk_shape(2), generator=torch.Generator().manual_seed(1))
    only_toy = compose([toy, flow], weights=(1.0, 0.0), steps=4)
    grid = only_toy.sigmas(only_toy.denoiser(obs))
    assert grid[0] == 15.0  # at (1, 0) the toy alone is weighed: its own grid, from its sigma_max
    with torch.no_grad():
        alone = sample_euler(toy.denoiser(obs), noise, grid)
        torch.testing.assert_close(only_toy.sample_normalized(obs, noise), alone, atol=1e-5, rtol=0)
        both = compose([toy, flow], weights=(0.5, 0.5), steps=4)
        assert math.isinf(both.sigmas(both.denoiser(obs))[0])  # the flow's: the toy takes inf
        halves = both.sample_normalized(obs, noise)
    assert halves.isfinite().all() and not torch.allclose(halves, alone, atol=1e-3)


def test_registration_refuses_what_would_be_ambiguous() -> None:
    with pytest.raises(ValueError, match=r"'flow' is already registered by .*FlowPolicy"):
        register_family("flow", config=get_family("flow").config)(VarianceExplodingPolicy)
    with pytest.raises(ValueError, match=r"must default `family` to 'toy_other'"):
        register_family("toy_other", config=VarianceExplodingConfig)
    with pytest.raises(TypeError, match=r"`config` must be a PolicyConfig subclass"):
        register_family("toy_other", config=dict)


def test_unknown_family_lists_the_registered_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown policy family 'flw'. Registered: .*flow"):
        PolicyConfig.from_dict({"family": "flw"})
    with pytest.raises(ConfigError, match=r"unknown policy family 'flw'.*diffusion, flow"):
        load_verb_config("train", ["dataset=d", "out=o", "policy.family=flw"])


@pytest.mark.parametrize(
    "overrides, family, setting",
    [
        (["policy=flow_mlp", "policy.flow_time_scale=50"], "flow", ("flow_time_scale", 50.0)),
        (
            ["policy.family=diffusion", "policy.prediction_type=v_prediction"],
            "diffusion",
            ("prediction_type", "v_prediction"),
        ),
        (["policy.family=flow", "policy.backbone=mlp"], "flow", ("flow_time_scale", 100.0)),
    ],
)
def test_family_settings_from_the_command_line(overrides, family, setting) -> None:
    config = load_verb_config("train", ["dataset=d", "out=o", *overrides]).policy
    assert isinstance(config, get_family(family).config)
    assert getattr(config, setting[0]) == setting[1]


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["policy=flow_mlp", "policy.prediction_type=sample"], r"no field 'prediction_type'.*Flow"),
        (["policy=flow_mlp", "policy.flow_time_scale=0"], r"`flow_time_scale` must be > 0"),
        (["policy.prediction_type=x0"], r"`prediction_type` must be one of .*Got 'x0'"),
    ],
)
def test_family_settings_are_checked_by_their_family(overrides, message) -> None:
    with pytest.raises(ConfigError, match=message):
        load_verb_config("train", ["dataset=d", "out=o", *overrides])


def test_a_checkpoint_written_flat_loads_as_its_family_and_keeps_its_fingerprint(
    tmp_path,
) -> None:
    shipped = shipped_path("PushT", "diffusion_unet_v")
    flat = json.loads((shipped / "config.json").read_text())["policy"]
    assert "flow_time_scale" in flat  # written when every config held every family's settings
    policy = load_policy(shipped)
    assert type(policy.config) is get_family("diffusion").config
    assert policy.config.prediction_type == "v_prediction"
    resaved = save_policy(policy, tmp_path / "resaved", policy.metadata)
    assert "flow_time_scale" not in json.loads((resaved / "config.json").read_text())["policy"]
    assert load_policy(resaved).fingerprint() == policy.fingerprint()


@pytest.mark.parametrize("preset", group_options("policy"))
def test_every_policy_preset_names_a_registered_family(preset: str) -> None:
    config = load_verb_config("train", ["dataset=d", "out=o", f"policy={preset}"]).policy
    assert type(config) is get_family(config.family).config


def test_a_run_started_with_a_flat_policy_config_resumes(dataset: Path, tmp_path) -> None:
    """train_state.json of a run begun before the family split holds every family's settings."""
    policy = PolicyConfig(family="flow", **SMALL)
    train(_train_config(dataset, tmp_path, policy, steps=2), progress=False)
    state = tmp_path / STATE_JSON
    document = json.loads(state.read_text())
    document["config"]["policy"] |= FLAT_CONFIG_DEFAULTS
    state.write_text(json.dumps(document))
    train(_train_config(dataset, tmp_path, policy, steps=3), progress=False)
    assert load_policy(tmp_path).metadata["step"] == 3
    changed = PolicyConfig.from_dict({"family": "flow", **SMALL, "flow_time_scale": 50.0})
    with pytest.raises(ValueError, match=r"`policy`: .*'flow_time_scale': 100.0.* vs .*50.0"):
        train(_train_config(dataset, tmp_path, changed, steps=4), progress=False)

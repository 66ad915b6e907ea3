"""A LeRobot `DiffusionPolicy` checkpoint as a parent: composes, searches and serves like ours.

    robocompose compose PickPlace_flow_mlp path/to/lerobot_checkpoint \\
        composition.allow_normalizer_mismatch=true

A LeRobot checkpoint folder is what LeRobot saves: `config.json` ("type": "diffusion") and
`model.safetensors` (`save_pretrained`), and beside them its processors
(`policy_preprocessor.json`, `policy_postprocessor.json` and their `*_normalizer_processor` /
`*_unnormalizer_processor.safetensors`), which since LeRobot 0.4 hold the normalisation stats.
The network is LeRobot's 1-D conditional UNet (`LeRobotUnet` below, its parameter names, so the
weights load as saved); observations are normalised per LeRobot's `normalization_mapping`
(MIN_MAX, MEAN_STD or identity for a feature type it does not map) and concatenated per step in
LeRobot's order (`observation.state`, then `observation.environment_state`), then flattened.

Native sampling is LeRobot's: diffusers' DDIM or DDPM scheduler built from its config (clipping
x0 to `clip_sample_range` as it does; DDPM's steps draw their noise from torch's global
generator, as LeRobot's `conditional_sample` does when given none, so only DDIM is
seed-reproducible). As a Denoiser it is our discrete-diffusion adapter on its alphas with x0_hat
clipped the same way: Euler in sigma space on that adapter is LeRobot's DDIM step for step
(tests/policies/test_lerobot_policy.py checks chunks against LeRobot's own code).

Supported: LeRobot 0.4.x (checked on 0.4.4), policy type "diffusion", low-dim inputs only (image
inputs need LeRobot's torchvision ResNet and are refused). Feature names map to our obs keys as
`robocompose.sim.lerobot_dataset.obs_key_of_feature` says (observation.state -> proprio beside
observation.environment_state -> state). LeRobot records no env: the task comes from a
`robocompose.json` beside config.json ({"task", "env_kwargs"}), else from the training dataset
that `train_config.json` names (its meta/info.json, as `collect format=lerobot` writes it).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file
from torch import nn

from robocompose.choices import check_choices, one_of
from robocompose.policies.base import GenerativePolicy, register_family
from robocompose.policies.config import PREDICTION_TYPES, PolicyConfig
from robocompose.policies.denoiser import Affine, DenoiserOutput
from robocompose.policies.diffusion import DiscreteDiffusionDenoiser
from robocompose.policies.normalizer import AffineNormalizer

FAMILY = "lerobot_diffusion"
SUPPORTED_TYPES = ("diffusion",)
TASK_FILE = "robocompose.json"
WEIGHTS_PREFIX = "diffusion.unet."
OBS_ORDER = ("observation.state", "observation.environment_state")  # LeRobot's concat order
EPS = 1e-8  # LeRobot's normaliser epsilon


class LeRobotCheckpointError(ValueError):
    """A LeRobot checkpoint folder that cannot be loaded as a parent, and why."""


@dataclass
class LeRobotDiffusionConfig(PolicyConfig):
    """LeRobot's diffusion settings (its config.json names), beside what every family shares."""

    family: str = FAMILY
    down_dims: tuple[int, ...] = (512, 1024, 2048)
    kernel_size: int = 5
    n_groups: int = 8
    diffusion_step_embed_dim: int = 128
    use_film_scale_modulation: bool = True
    noise_scheduler_type: str = one_of(("DDPM", "DDIM"), "DDPM")
    num_train_timesteps: int = 100
    beta_schedule: str = "squaredcos_cap_v2"
    beta_start: float = 1e-4
    beta_end: float = 0.02
    prediction_type: str = one_of(PREDICTION_TYPES, "epsilon")
    clip_sample: bool = True
    clip_sample_range: float = 1.0
    # our obs key -> LeRobot feature name, in LeRobot's concatenation order
    features: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.down_dims = tuple(self.down_dims)
        check_choices(self)


# ---- LeRobot's UNet, under its parameter names ------------------------------------------------


class _SinusoidalEmbedding(nn.Module):
    """sin and cos of t at dim/2 geometric frequencies from 1 to 1/10000 (Vaswani et al.)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        half = self.dim // 2
        rate = math.log(10_000) / (half - 1)
        frequencies = torch.exp(torch.arange(half, device=t.device) * -rate)
        angles = t.unsqueeze(-1) * frequencies.unsqueeze(0)
        return torch.cat([angles.sin(), angles.cos()], dim=-1)


class _ConvBlock(nn.Module):
    """Conv1d, GroupNorm, Mish (`block.0`, `block.1`)."""

    def __init__(self, in_ch: int, out_ch: int, kernel_size: int, n_groups: int = 8) -> None:
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv1d(in_ch, out_ch, kernel_size, padding=kernel_size // 2),
            nn.GroupNorm(n_groups, out_ch),
            nn.Mish(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


class _FilmBlock(nn.Module):
    """Two conv blocks, FiLM between them from the conditioning (scale and bias, or bias)."""

    def __init__(
        self,
        in_ch: int,
        out_ch: int,
        *,
        cond_dim: int,
        kernel_size: int,
        n_groups: int,
        scale: bool,
    ) -> None:
        super().__init__()
        self.out_ch, self.scale = out_ch, scale
        self.conv1 = _ConvBlock(in_ch, out_ch, kernel_size, n_groups)
        self.cond_encoder = nn.Sequential(nn.Mish(), nn.Linear(cond_dim, out_ch * (1 + scale)))
        self.conv2 = _ConvBlock(out_ch, out_ch, kernel_size, n_groups)
        self.residual_conv = nn.Conv1d(in_ch, out_ch, 1) if in_ch != out_ch else nn.Identity()

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        h = self.conv1(x)
        film = self.cond_encoder(cond).unsqueeze(-1)
        scale, bias = (film[:, : self.out_ch], film[:, self.out_ch :]) if self.scale else (1, film)
        h = scale * h + bias
        return self.conv2(h) + self.residual_conv(x)


class LeRobotUnet(nn.Module):
    """LeRobot's `DiffusionConditionalUnet1d`: (x (B, H, A), t (B,), cond (B, C)) -> (B, H, A)."""

    def __init__(self, config: LeRobotDiffusionConfig, global_cond_dim: int) -> None:
        super().__init__()
        embed, dims = config.diffusion_step_embed_dim, config.down_dims
        self.diffusion_step_encoder = nn.Sequential(
            _SinusoidalEmbedding(embed),
            nn.Linear(embed, 4 * embed),
            nn.Mish(),
            nn.Linear(4 * embed, embed),
        )
        block = partial(
            _FilmBlock,
            cond_dim=embed + global_cond_dim,
            kernel_size=config.kernel_size,
            n_groups=config.n_groups,
            scale=config.use_film_scale_modulation,
        )
        widths = [config.action_dim, *dims]
        self.down_modules = nn.ModuleList(
            nn.ModuleList(
                [
                    block(c_in, c_out),
                    block(c_out, c_out),
                    nn.Conv1d(c_out, c_out, 3, 2, 1) if level < len(dims) - 1 else nn.Identity(),
                ]
            )
            for level, (c_in, c_out) in enumerate(zip(widths[:-1], widths[1:], strict=True))
        )
        self.mid_modules = nn.ModuleList([block(dims[-1], dims[-1]), block(dims[-1], dims[-1])])
        # every decoder level upsamples (LeRobot's loop never marks one as the last)
        self.up_modules = nn.ModuleList(
            nn.ModuleList(
                [
                    block(2 * wide, narrow),
                    block(narrow, narrow),
                    nn.ConvTranspose1d(narrow, narrow, 4, 2, 1),
                ]
            )
            for narrow, wide in reversed(list(zip(dims[:-1], dims[1:], strict=True)))
        )
        self.final_conv = nn.Sequential(
            _ConvBlock(dims[0], dims[0], config.kernel_size),
            nn.Conv1d(dims[0], config.action_dim, 1),
        )

    def forward(self, x: torch.Tensor, timestep: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        h = x.transpose(1, 2)
        feature = torch.cat([self.diffusion_step_encoder(timestep), cond], dim=-1)
        skips = []
        for first, second, downsample in self.down_modules:
            h = second(first(h, feature), feature)
            skips.append(h)
            h = downsample(h)
        for block in self.mid_modules:
            h = block(h, feature)
        for first, second, upsample in self.up_modules:
            h = torch.cat([h, skips.pop()], dim=1)
            h = upsample(second(first(h, feature), feature))
        return self.final_conv(h).transpose(1, 2)


# ---- the family ---------------------------------------------------------------------------------


class ClippedDiffusionDenoiser(DiscreteDiffusionDenoiser):
    """Our discrete-diffusion adapter with x0_hat clipped to [-r, r], as LeRobot's schedulers
    clip it (eps_hat stays the network's, as in diffusers' DDIM step): not affine then."""

    def __init__(self, *args: Any, clip_range: float | None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.clip_range = clip_range

    def affine(self, sigma: float) -> Affine | None:
        return None if self.clip_range is not None else super().affine(sigma)

    def from_net_output(
        self, x_in: torch.Tensor, sigma: float, out: torch.Tensor
    ) -> DenoiserOutput:
        x0_hat, eps_hat = super().from_net_output(x_in, sigma, out)
        if self.clip_range is not None:
            x0_hat = x0_hat.clamp(-self.clip_range, self.clip_range)
        return DenoiserOutput(x0_hat, eps_hat)


def _refuse_training(*_: Any) -> Path:
    raise ValueError(
        f"family {FAMILY!r} loads LeRobot checkpoints; train them with LeRobot "
        "(`lerobot-train`), on a dataset `robocompose collect format=lerobot` wrote."
    )


class _BoundUnet:
    """The UNet with one observation batch bound: a `BoundNet` (x, t) -> output."""

    def __init__(self, net: LeRobotUnet, cond: torch.Tensor | None) -> None:
        self.net, self.cond = net, cond

    def __call__(self, x: torch.Tensor, timestep: torch.Tensor) -> torch.Tensor:
        if self.cond is None:
            raise ValueError("this denoiser was made without an observation (cond=None).")
        return self.net(x, timestep, self.cond)


@register_family(FAMILY, config=LeRobotDiffusionConfig, trainer=_refuse_training)
class LeRobotDiffusionPolicy(GenerativePolicy):
    config: LeRobotDiffusionConfig

    def build_networks(self) -> None:
        config = self.config
        cond_dim = config.n_obs_steps * sum(config.obs_shapes[k][0] for k in config.obs_keys)
        self.net = LeRobotUnet(config, cond_dim)
        self.noise_scheduler = self.scheduler("DDPM")

    def scheduler(self, kind: str | None = None) -> Any:
        """A fresh diffusers scheduler as LeRobot builds it (`kind`: its configured type)."""
        from diffusers import DDIMScheduler, DDPMScheduler

        c = self.config
        cls = DDIMScheduler if (kind or c.noise_scheduler_type) == "DDIM" else DDPMScheduler
        return cls(
            num_train_timesteps=c.num_train_timesteps,
            beta_start=c.beta_start,
            beta_end=c.beta_end,
            beta_schedule=c.beta_schedule,
            clip_sample=c.clip_sample,
            clip_sample_range=c.clip_sample_range,
            prediction_type=c.prediction_type,
        )

    def encode(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """{key: (B, T, D)} -> (B, T * sum D): each key normalised, concatenated per step in
        LeRobot's order, flattened."""
        parts = []
        for key in self.config.obs_keys:
            if key not in obs:
                raise ValueError(f"observation must have key {key!r}. Got {sorted(obs)}.")
            value = obs[key].to(self.device, self.dtype)
            parts.append(self.normalizers[key].normalize(value))
        return torch.cat(parts, dim=-1).flatten(start_dim=1)

    def loss(self, obs: dict[str, torch.Tensor], actions: torch.Tensor) -> torch.Tensor:
        _refuse_training()
        raise AssertionError  # unreachable: the line above raises

    @torch.no_grad()
    def sample_normalized(
        self, cond: torch.Tensor, steps: int, noise: torch.Tensor
    ) -> torch.Tensor:
        """LeRobot's `conditional_sample`: its scheduler, integer timesteps, from `noise`."""
        scheduler = self.scheduler()
        scheduler.set_timesteps(steps)
        x = noise
        for t in scheduler.timesteps:
            t_batch = torch.full((x.shape[0],), int(t), dtype=torch.long, device=x.device)
            x = scheduler.step(self.net(x, t_batch, cond), t, x).prev_sample
        return x

    def denoiser_for(self, cond: torch.Tensor) -> ClippedDiffusionDenoiser:
        c = self.config
        return ClippedDiffusionDenoiser(
            _BoundUnet(self.net, cond),
            self.noise_scheduler.alphas_cumprod,
            c.prediction_type,
            c.horizon,
            c.action_dim,
            clip_range=c.clip_sample_range if c.clip_sample else None,
        )


# ---- loading a LeRobot folder -------------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise LeRobotCheckpointError(
            f"{path.parent}: no {path.name}; a LeRobot checkpoint folder holds config.json, "
            "model.safetensors and the policy_preprocessor/policy_postprocessor files LeRobot "
            "saves beside them (their normalisation stats)."
        )
    return json.loads(path.read_text())


def _processor_stats(folder: Path, name: str, step: str) -> tuple[dict, dict[str, np.ndarray]]:
    """(the step's config, its stats {"<feature>.<stat>": array}) of a saved processor."""
    document = _read_json(folder / f"{name}.json")
    for entry in document.get("steps", []):
        if entry.get("registry_name") == step and entry.get("state_file"):
            tensors = load_file(str(folder / entry["state_file"]))
            return entry.get("config", {}), {k: v.double().numpy() for k, v in tensors.items()}
    raise LeRobotCheckpointError(f"{folder / name}.json: no `{step}` step with a state file.")


def _normalizer(
    feature: str, kind: str, norm_map: dict[str, str], stats: dict[str, np.ndarray], dim: int
) -> AffineNormalizer:
    """LeRobot's normalisation of one feature as y = x * scale + offset."""
    mode = norm_map.get(kind, "IDENTITY")
    if mode == "IDENTITY" or f"{feature}.min" not in stats:
        return AffineNormalizer.identity(dim)
    if mode == "MIN_MAX":
        low, high = stats[f"{feature}.min"], stats[f"{feature}.max"]
        span = np.where(high - low == 0, EPS, high - low)
        scale, offset = 2.0 / span, -2.0 * low / span - 1.0
    elif mode == "MEAN_STD":
        std = stats[f"{feature}.std"] + EPS
        scale, offset = 1.0 / std, -stats[f"{feature}.mean"] / std
    else:
        raise LeRobotCheckpointError(
            f"feature {feature}: normalisation {mode} is not supported (MIN_MAX, MEAN_STD)."
        )
    return AffineNormalizer(scale.astype(np.float32), offset.astype(np.float32))


def _task(folder: Path) -> dict[str, Any]:
    """{"task", "env_kwargs"} from robocompose.json, else from the training dataset's info."""
    if (folder / TASK_FILE).is_file():
        return json.loads((folder / TASK_FILE).read_text())
    train = folder / "train_config.json"
    if train.is_file():
        root = json.loads(train.read_text()).get("dataset", {}).get("root")
        info = Path(root or "") / "meta" / "info.json"
        if root and info.is_file():
            env_args = json.loads(info.read_text()).get("robocompose", {}).get("env_args", {})
            return {"task": env_args.get("env_name"), "env_kwargs": env_args.get("env_kwargs", {})}
    return {}


def checkpoint_document(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """A LeRobot folder as our checkpoint document: {"policy", "normalizers", "metadata"}."""
    from robocompose.sim.lerobot_dataset import obs_key_of_feature

    folder = Path(folder)
    lerobot = _read_json(folder / "config.json")
    kind = lerobot.get("type")
    if kind not in SUPPORTED_TYPES:
        raise LeRobotCheckpointError(
            f"{folder}: LeRobot policy type {kind!r}; supported: {', '.join(SUPPORTED_TYPES)}."
        )
    inputs = lerobot.get("input_features", {})
    images = [k for k, f in inputs.items() if f.get("type") == "VISUAL"]
    if images:
        raise LeRobotCheckpointError(
            f"{folder}: image inputs {images} need LeRobot's torchvision ResNet encoder; only "
            "low-dim LeRobot diffusion policies (observation.state, "
            "observation.environment_state) load as parents."
        )
    ordered = [f for f in OBS_ORDER if f in inputs] + [f for f in inputs if f not in OBS_ORDER]
    features = {obs_key_of_feature(f, list(inputs)): f for f in ordered}
    action = lerobot.get("output_features", {}).get("action")
    if action is None:
        raise LeRobotCheckpointError(f"{folder}/config.json: no `action` output feature.")
    norm_map = lerobot.get("normalization_mapping", {})
    _, pre_stats = _processor_stats(folder, "policy_preprocessor", "normalizer_processor")
    _, post_stats = _processor_stats(folder, "policy_postprocessor", "unnormalizer_processor")
    normalizers = {
        key: _normalizer(f, inputs[f]["type"], norm_map, pre_stats, inputs[f]["shape"][0])
        for key, f in features.items()
    }
    normalizers["action"] = _normalizer(
        "action", "ACTION", norm_map, post_stats, action["shape"][0]
    )
    steps = lerobot.get("num_inference_steps") or lerobot.get("num_train_timesteps", 100)
    names = {f.name for f in LeRobotDiffusionConfig.__dataclass_fields__.values()}
    policy = {
        k: v
        for k, v in lerobot.items()
        if k in names and k not in PolicyConfig.__dataclass_fields__
    }
    policy |= {
        "family": FAMILY,
        "obs_keys": list(features),
        "obs_shapes": {key: list(inputs[f]["shape"]) for key, f in features.items()},
        "action_dim": action["shape"][0],
        "n_obs_steps": lerobot["n_obs_steps"],
        "horizon": lerobot["horizon"],
        "n_action_steps": lerobot["n_action_steps"],
        "num_inference_steps": steps,
        "features": features,
    }
    task = _task(folder)
    metadata = {
        "task": task.get("task"),
        "env_kwargs": task.get("env_kwargs", {}),
        "format": "lerobot",
        "lerobot_type": kind,
    }
    return {
        "policy": policy,
        "normalizers": {k: n.to_dict() for k, n in normalizers.items()},
        "metadata": metadata,
    }


def load_lerobot_policy(folder: str | os.PathLike[str]) -> LeRobotDiffusionPolicy:
    """The LeRobot checkpoint in `folder` as a `GenerativePolicy` (eval mode)."""
    from robocompose.sim.tasks import register_recorded

    document = checkpoint_document(folder)
    config = LeRobotDiffusionConfig(**document["policy"])
    normalizers = {k: AffineNormalizer.from_dict(v) for k, v in document["normalizers"].items()}
    policy = LeRobotDiffusionPolicy(config, normalizers)
    path = Path(folder) / "model.safetensors"
    if not path.is_file():
        raise LeRobotCheckpointError(f"{folder}: no model.safetensors.")
    weights = {
        k[len(WEIGHTS_PREFIX) :]: v
        for k, v in load_file(str(path)).items()
        if k.startswith(WEIGHTS_PREFIX)
    }
    own = policy.net.state_dict()
    missing, unexpected = sorted(set(own) - set(weights)), sorted(set(weights) - set(own))
    if missing or unexpected:
        raise LeRobotCheckpointError(
            f"{path}: weights do not fit LeRobot's diffusion UNet of config.json: missing "
            f"{missing[:5]}, unexpected {unexpected[:5]}."
        )
    policy.net.load_state_dict(weights)
    metadata = document["metadata"]
    register_recorded(metadata.get("task"), metadata.get("env_kwargs"))
    policy.metadata = metadata
    return policy.eval()

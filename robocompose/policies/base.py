"""What every generative action-chunk policy shares: normalisers, observation encoder, backbone.

A family (diffusion, flow) adds its training loss, its native sampler and its Denoiser adapter,
and registers itself with `register_family` (the table is `robocompose.policies.registry`).
Shapes: observations (B, T, ...) with T = n_obs_steps; action chunks (B, H, A).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from abc import abstractmethod
from collections.abc import Callable
from typing import TypeVar

import torch
from torch import nn

from robocompose.policies.config import PolicyConfig
from robocompose.policies.denoiser import Denoiser, NetworkDenoiser
from robocompose.policies.encoders import ObservationEncoder
from robocompose.policies.networks import BoundBackbone, make_backbone
from robocompose.policies.normalizer import AffineNormalizer
from robocompose.policies.registry import Family, Trainer, add_family, get_family


def is_image_shape(shape: tuple[int, ...]) -> bool:
    return len(shape) == 3


class GenerativePolicy(nn.Module):
    """A conditional generative model of normalised action chunks given observation history."""

    def __init__(self, config: PolicyConfig, normalizers: dict[str, AffineNormalizer]) -> None:
        super().__init__()
        if config.action_dim < 1 or not config.obs_shapes:
            raise ValueError(
                "`action_dim` and `obs_shapes` must describe the data (training fills them from "
                f"the dataset). Got action_dim={config.action_dim}, obs_shapes={config.obs_shapes}."
            )
        missing = [k for k in ("action", *self._low_dim_keys(config)) if k not in normalizers]
        if missing:
            raise ValueError(f"`normalizers` must include {missing}. Got {sorted(normalizers)}.")
        self.config = config
        self.normalizers = normalizers
        self.build_networks()

    def build_networks(self) -> None:
        """The observation encoder and the backbone as torch modules; a family whose weights
        live elsewhere (the JAX flow policy) builds its own here instead."""
        config = self.config
        shapes = {k: config.obs_shapes[k] for k in config.obs_keys}
        self.encoder = ObservationEncoder(
            shapes, config.n_obs_steps, image_feature_dim=config.image_feature_dim
        )
        self.net = make_backbone(
            config.backbone,
            action_dim=config.action_dim,
            horizon=config.horizon,
            global_cond_dim=self.encoder.out_dim,
            **config.backbone_kwargs,
        )

    @staticmethod
    def _low_dim_keys(config: PolicyConfig) -> list[str]:
        return [k for k in config.obs_keys if not is_image_shape(config.obs_shapes[k])]

    @property
    def action_normalizer(self) -> AffineNormalizer:
        return self.normalizers["action"]

    @property
    def device(self) -> torch.device:
        """Where the weights are (`.to(device)` moves them); inputs are moved here."""
        return next(self.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        """The floating-point type of the weights; sampling runs in it end to end."""
        return next(self.parameters()).dtype

    def encode(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Observation history {key: (B, T, ...)} -> conditioning vector (B, C).

        Inputs move to the policy's device; low-dim keys are cast to its dtype as they are
        normalised, images stay uint8 until the image encoder scales them."""
        normed = {}
        device, dtype = self.device, self.dtype
        for key in self.config.obs_keys:
            if key not in obs:
                raise ValueError(f"observation must have key {key!r}. Got {sorted(obs)}.")
            value = obs[key].to(device)
            if key in self.normalizers:
                value = self.normalizers[key].normalize(value.to(dtype))
            normed[key] = value
        return self.encoder(normed)

    def bound_net(self, cond: torch.Tensor) -> BoundBackbone:
        """The backbone with the observation bound: (x (B, H, A), t (B,)) -> (B, H, A)."""
        return BoundBackbone(self.net, cond)

    @abstractmethod
    def loss(self, obs: dict[str, torch.Tensor], actions: torch.Tensor) -> torch.Tensor:
        """Training loss on a batch; `actions` (B, H, A) unnormalised."""

    @abstractmethod
    def sample_normalized(
        self, cond: torch.Tensor, steps: int, noise: torch.Tensor
    ) -> torch.Tensor:
        """The family's own sampler from unit `noise` (B, H, A): normalised action chunks."""

    def denoiser(self, obs: dict[str, torch.Tensor]) -> Denoiser:
        """The EDM-view Denoiser of this policy for one observation batch."""
        return self.denoiser_for(self.encode(obs))

    @abstractmethod
    def denoiser_for(self, cond: torch.Tensor) -> NetworkDenoiser:
        """The Denoiser for an already encoded observation batch `cond` (B, C)."""

    @torch.no_grad()
    def sample(
        self,
        obs: dict[str, torch.Tensor],
        steps: int | None = None,
        noise: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Action chunks (B, H, A) in env units from the native sampler; `noise` (B, H, A).

        Without `noise` it is drawn on the CPU, from torch's global generator, in the policy's
        dtype, then moved: one seed gives one sample on every device."""
        cond = self.encode(obs)
        if noise is None:
            noise = torch.randn(self.chunk_shape(cond.shape[0]), dtype=cond.dtype)
        noise = noise.to(device=cond.device, dtype=cond.dtype)
        steps = steps or self.config.num_inference_steps
        return self.action_normalizer.unnormalize(self.sample_normalized(cond, steps, noise))

    def fingerprint(self) -> str:
        """A short hash of config, normalisers and weights: evaluation logs record it, so a run
        never resumes from episodes of a different (e.g. retrained) policy."""
        digest = hashlib.sha256()
        config = self.config.identity()
        norms = {k: (n.scale.tolist(), n.offset.tolist()) for k, n in self.normalizers.items()}
        digest.update(json.dumps([config, norms], sort_keys=True, default=str).encode())
        for name, tensor in sorted(self.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        return digest.hexdigest()[:16]

    def chunk_shape(self, batch: int) -> tuple[int, int, int]:
        return (batch, self.config.horizon, self.config.action_dim)

    def executed_slice(self, n_action_steps: int | None = None) -> slice:
        """Which chunk steps are executed: from the current (last observed) step on, the
        trained `n_action_steps` of them, or as many as asked (an evaluation setting: fewer
        replans more often) within the predicted chunk."""
        start = self.config.n_obs_steps - 1
        n = self.config.n_action_steps if n_action_steps is None else n_action_steps
        room = self.config.horizon - start
        if not 1 <= n <= room:
            raise ValueError(
                f"`n_action_steps` must be in [1, {room}]: the policy predicts "
                f"{self.config.horizon} steps (horizon) from its current step "
                f"{start} (n_obs_steps - 1). Got {n}."
            )
        return slice(start, start + n)

    def set_n_action_steps(self, n_action_steps: int | None) -> GenerativePolicy:
        """Execute `n_action_steps` actions of each chunk from now on (None: unchanged),
        refused unless the chunk holds them. It changes the config and the fingerprint: for a
        policy of one's own (loaded or merged for this use); `PolicyPredictor` leaves the
        policy as it is."""
        if n_action_steps is not None:
            self.executed_slice(n_action_steps)
            self.config = dataclasses.replace(self.config, n_action_steps=n_action_steps)
        return self


P = TypeVar("P", bound=type[GenerativePolicy])


def register_family(
    name: str, *, config: type[PolicyConfig], trainer: Trainer | str | None = None
) -> Callable[[P], P]:
    """Class decorator: register the policy class as family `name`, configured by `config`
    (and trained by `trainer`, when the family has its own loop; see `registry.Family`)."""
    if not (isinstance(config, type) and issubclass(config, PolicyConfig)):
        raise TypeError(f"family {name!r}: `config` must be a PolicyConfig subclass. Got {config}.")
    if config.family != name:
        raise ValueError(
            f"family {name!r}: its config {config.__name__} must default `family` to {name!r}. "
            f"Got {config.family!r}."
        )

    def register(policy: P) -> P:
        add_family(Family(name, policy, config, trainer))
        return policy

    return register


def build_policy(
    config: PolicyConfig, normalizers: dict[str, AffineNormalizer]
) -> GenerativePolicy:
    """A fresh (untrained) policy of `config`'s family; a plain PolicyConfig becomes the
    family's config with the family's settings at their defaults."""
    family = get_family(config.family)
    if not isinstance(config, family.config):
        config = PolicyConfig.from_dict(config.to_dict())
    return family.policy(config, normalizers)

"""Policy configuration: family, backbone, horizons, noise schedule and data shapes."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

FAMILIES = ("diffusion", "flow")
BACKBONES = ("unet", "mlp")
PREDICTION_TYPES = ("epsilon", "sample", "v_prediction")


@dataclass
class PolicyConfig:
    """A generative action-chunk policy. Defaults follow Diffusion Policy (Chi et al. 2023).

    `action_dim` and `obs_shapes` describe the data; training fills them from the dataset.
    """

    family: str = "diffusion"
    backbone: str = "unet"
    obs_keys: tuple[str, ...] = ("state",)
    n_obs_steps: int = 2
    horizon: int = 16
    n_action_steps: int = 8
    num_inference_steps: int = 10
    # diffusion: diffusers DDPMScheduler settings used in training, DDIM for sampling
    num_train_timesteps: int = 100
    beta_schedule: str = "squaredcos_cap_v2"
    prediction_type: str = "epsilon"
    # flow: the network sees t * flow_time_scale, the same range as a DDPM timestep
    flow_time_scale: float = 100.0
    backbone_kwargs: dict[str, Any] = field(default_factory=dict)
    image_feature_dim: int = 64
    action_dim: int = 0
    obs_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.obs_keys = tuple(self.obs_keys)
        self.obs_shapes = {k: tuple(v) for k, v in self.obs_shapes.items()}
        if self.family not in FAMILIES:
            raise ValueError(f"`family` must be one of {FAMILIES}. Got {self.family!r}.")
        if self.backbone not in BACKBONES:
            raise ValueError(f"`backbone` must be one of {BACKBONES}. Got {self.backbone!r}.")
        if self.prediction_type not in PREDICTION_TYPES:
            raise ValueError(
                f"`prediction_type` must be one of {PREDICTION_TYPES}. "
                f"Got {self.prediction_type!r}."
            )
        if not self.obs_keys:
            raise ValueError("`obs_keys` must name at least one observation key. Got ().")
        for name in ("n_obs_steps", "n_action_steps", "num_inference_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"`{name}` must be >= 1. Got {getattr(self, name)}.")
        needed = self.n_obs_steps + self.n_action_steps - 1
        if self.horizon < needed:
            raise ValueError(
                f"`horizon` must be >= n_obs_steps + n_action_steps - 1. "
                f"Got {self.horizon} < {needed}."
            )
        if self.num_inference_steps > self.num_train_timesteps:
            raise ValueError(
                f"`num_inference_steps` must be <= num_train_timesteps. "
                f"Got {self.num_inference_steps} > {self.num_train_timesteps}."
            )
        missing = [k for k in self.obs_keys if self.obs_shapes and k not in self.obs_shapes]
        if missing:
            raise ValueError(
                f"`obs_shapes` must cover every obs key. Missing {missing}; "
                f"has {sorted(self.obs_shapes)}."
            )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["obs_keys"] = list(self.obs_keys)
        d["obs_shapes"] = {k: list(v) for k, v in self.obs_shapes.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PolicyConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown policy config field(s) {unknown}. Known: {sorted(known)}.")
        return cls(**d)

    def mismatches(self, other: PolicyConfig) -> list[str]:
        """Fields whose values differ, as "`field`: mine vs other" lines."""
        a, b = self.to_dict(), other.to_dict()
        return [f"`{k}`: {a[k]!r} vs {b[k]!r}" for k in a if a[k] != b[k]]

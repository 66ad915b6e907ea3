"""Policy configuration: what every family shares (backbone, horizons, data shapes).

A family's own settings (diffusion's noise schedule, flow's time scale) live in its config
subclass, next to its model (see `robocompose.policies.registry`). This module imports no torch,
so configs compose and validate before any model is loaded.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from robocompose.choices import check_choices, one_of
from robocompose.policies.registry import builtin_family_names, get_family

BACKBONES = ("unet", "mlp")
PREDICTION_TYPES = ("epsilon", "sample", "v_prediction")  # a diffusion network's target
FAMILY_HELP = (
    "a registered family; its own settings are policy.<field> too (diffusion: "
    "num_train_timesteps, beta_schedule, prediction_type, one of "
    f"{', '.join(PREDICTION_TYPES)}; flow: flow_time_scale)"
)

# Every config held these family settings before they moved to their families: a checkpoint
# written then has all of them (each other family's at its default, where it had no effect).
# Loading drops the ones its family lacks; fingerprints hash them in at these values, so a
# policy's fingerprint (what its evaluation logs record) is the one it had then.
FLAT_CONFIG_DEFAULTS: dict[str, Any] = {
    "num_train_timesteps": 100,
    "beta_schedule": "squaredcos_cap_v2",
    "prediction_type": "epsilon",
    "flow_time_scale": 100.0,
}


# a checkpoint folder: the weights, and everything else (config, normalisers, metadata)
WEIGHTS, CONFIG = "model.safetensors", "config.json"


@dataclass
class PolicyConfig:
    """A generative action-chunk policy. Defaults follow Diffusion Policy (Chi et al. 2023).

    `family` names a registered family; its config subclass adds the family's settings. A plain
    PolicyConfig stands for its family's config with those settings at their defaults
    (`from_dict` and `build_policy` give the subclass). `action_dim` and `obs_shapes` describe
    the data; training fills them from the dataset.
    """

    # checked by the registry (`config_class_for`), which names a missing extra
    family: str = field(
        default="diffusion",
        metadata={"choices": builtin_family_names, "checked": False, "help": FAMILY_HELP},
    )
    backbone: str = one_of(BACKBONES, "unet")
    obs_keys: tuple[str, ...] = ("state",)
    n_obs_steps: int = 2
    horizon: int = 16
    n_action_steps: int = 8
    num_inference_steps: int = 10
    backbone_kwargs: dict[str, Any] = field(default_factory=dict)
    image_feature_dim: int = 64
    action_dim: int = 0
    obs_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.obs_keys = tuple(self.obs_keys)
        self.obs_shapes = {k: tuple(v) for k, v in self.obs_shapes.items()}
        own = type(self).family
        if type(self) is not PolicyConfig and self.family != own:
            raise ValueError(f"`family` of {type(self).__name__} is {own!r}. Got {self.family!r}.")
        check_choices(self)
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
        missing = [k for k in self.obs_keys if self.obs_shapes and k not in self.obs_shapes]
        if missing:
            raise ValueError(
                f"`obs_shapes` must cover every obs key. Missing {missing}; "
                f"has {sorted(self.obs_shapes)}."
            )

    @classmethod
    def config_class_for(cls, tree: dict[str, Any]) -> type[PolicyConfig]:
        """The config class of the family `tree` names (how `robocompose.config.build` picks
        it); an unknown family lists the registered ones."""
        return get_family(str(tree.get("family", PolicyConfig.family))).config

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["obs_keys"] = list(self.obs_keys)
        d["obs_shapes"] = {k: list(v) for k, v in self.obs_shapes.items()}
        return d

    def identity(self) -> dict[str, Any]:
        """The settings a policy fingerprint hashes (see `FLAT_CONFIG_DEFAULTS`)."""
        return FLAT_CONFIG_DEFAULTS | asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PolicyConfig:
        """The config of the family `d` names, as that family's config class."""
        config_cls = cls.config_class_for(d)
        known = {f.name for f in fields(config_cls)}
        unknown = sorted(set(d) - known - set(FLAT_CONFIG_DEFAULTS))
        if unknown:
            raise ValueError(
                f"unknown policy config field(s) {unknown} for family {config_cls.family!r}. "
                f"Known: {sorted(known)}."
            )
        return config_cls(**{k: v for k, v in d.items() if k in known})

    def mismatches(self, other: PolicyConfig) -> list[str]:
        """Fields whose values differ, as "`field`: mine vs other" lines (absent: None)."""
        a, b = self.to_dict(), other.to_dict()
        return [f"`{k}`: {a.get(k)!r} vs {b.get(k)!r}" for k in a | b if a.get(k) != b.get(k)]

"""The policy families, each registered by a decorator on its policy class.

A family is one module: its config (a `PolicyConfig` subclass with the family's own settings),
its policy (a `GenerativePolicy`: training loss and native sampler) and its Denoiser adapter,
the one interface composition uses. Its policy class carries

    @register_family("flow", config=FlowConfig)

and importing the module registers it. Checkpoint loading, config validation (the CLI's too),
training and composition look families up here. The built-in families' modules are imported
the first time any family is looked up; adding one is one module and one line in
`FAMILY_MODULES` (or, outside this package, importing the module before use).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from robocompose.policies.config import PolicyConfig

if TYPE_CHECKING:
    from robocompose.policies.base import GenerativePolicy
    from robocompose.policies.normalizer import AffineNormalizer

FAMILY_MODULES = (
    "robocompose.policies.diffusion",
    "robocompose.policies.flow",
    "robocompose.policies.lerobot",  # LeRobot diffusion checkpoints (loaded, never trained)
)
# families whose module needs an optional extra: imported when first named, so looking up a
# built-in family never imports that extra (name -> (module, extra))
OPTIONAL_FAMILY_MODULES = {"flow_jax": ("robocompose.policies.jax_flow", "jax")}


@dataclass(frozen=True)
class Family:
    name: str
    policy: type[GenerativePolicy]
    config: type[PolicyConfig]
    # (train config, progress, stop_at_step) -> run folder: the family's own training loop
    # (one not driven by torch's optimiser); None: `robocompose.policies.train.train`
    trainer: Callable[..., Path] | None = None


_FAMILIES: dict[str, Family] = {}


def register_family(
    name: str, *, config: type[PolicyConfig], trainer: Callable[..., Path] | None = None
) -> Callable[[type[GenerativePolicy]], type[GenerativePolicy]]:
    """Class decorator: register the policy class as family `name`, configured by `config`
    (and trained by `trainer`, when the family has its own loop)."""
    if not (isinstance(config, type) and issubclass(config, PolicyConfig)):
        raise TypeError(f"family {name!r}: `config` must be a PolicyConfig subclass. Got {config}.")
    if config.family != name:
        raise ValueError(
            f"family {name!r}: its config {config.__name__} must default `family` to {name!r}. "
            f"Got {config.family!r}."
        )

    def register(policy: type[GenerativePolicy]) -> type[GenerativePolicy]:
        known = _FAMILIES.get(name)
        if known and _qualname(known.policy) != _qualname(policy):  # a reload re-registers
            raise ValueError(
                f"policy family {name!r} is already registered by {_qualname(known.policy)}; "
                f"{_qualname(policy)} must take another name."
            )
        _FAMILIES[name] = Family(name, policy, config, trainer)
        return policy

    return register


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _import_builtin_families() -> None:
    for module in FAMILY_MODULES:
        importlib.import_module(module)


def get_family(name: str) -> Family:
    """The registered family `name`; an unknown name lists the registered ones."""
    _import_builtin_families()
    if name not in _FAMILIES and name in OPTIONAL_FAMILY_MODULES:
        module, extra = OPTIONAL_FAMILY_MODULES[name]
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise ValueError(
                f"policy family {name!r} needs the `{extra}` extra (pip install -e "
                f"'.[{extra}]'): {e}"
            ) from e
    if name not in _FAMILIES:
        raise ValueError(
            f"unknown policy family {name!r}. Registered: {', '.join(family_names())}."
        )
    return _FAMILIES[name]


def family_names() -> list[str]:
    """The registered families and the optional ones (whose extra may be missing)."""
    _import_builtin_families()
    return sorted(set(_FAMILIES) | set(OPTIONAL_FAMILY_MODULES))


def build_policy(
    config: PolicyConfig, normalizers: dict[str, AffineNormalizer]
) -> GenerativePolicy:
    """A fresh (untrained) policy of `config`'s family; a plain PolicyConfig becomes the
    family's config with the family's settings at their defaults."""
    family = get_family(config.family)
    if not isinstance(config, family.config):
        config = PolicyConfig.from_dict(config.to_dict())
    return family.policy(config, normalizers)

"""The policy families by name: each family's policy class, config class and trainer.

A family is one module: its config (a `PolicyConfig` subclass with the family's own settings),
its policy (a `GenerativePolicy`: training loss and native sampler) and its Denoiser adapter,
the one interface composition uses. Its policy class carries

    @register_family("flow", config=FlowConfig)      # from robocompose.policies.base

and importing the module registers it. Checkpoint loading, config validation (the CLI's too),
training and composition look families up here. The built-in families' modules are imported
the first time any family is looked up; adding one is one module and one line in
`FAMILY_MODULES` (or, outside this package, importing the module before use).

This table imports nothing of robocompose: `config.py` looks a family's config class up here and
`base.py` checks and adds the families, so both sit above it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

FAMILY_MODULES = {
    "diffusion": "robocompose.policies.diffusion",
    "flow": "robocompose.policies.flow",
    # LeRobot diffusion checkpoints (loaded, never trained)
    "lerobot_diffusion": "robocompose.policies.lerobot",
}
# families whose module needs an optional extra: imported when first named, so looking up a
# built-in family never imports that extra (name -> (module, extra))
OPTIONAL_FAMILY_MODULES = {"flow_jax": ("robocompose.policies.jax_flow", "jax")}

# (train config, progress, stop_at_step, evaluator) -> run folder
Trainer = Callable[..., Path]


@dataclass(frozen=True)
class Family:
    name: str
    policy: type  # its GenerativePolicy subclass (robocompose.policies.base)
    config: type  # its PolicyConfig subclass (robocompose.policies.config)
    # the family's own training loop (one not driven by torch's optimiser), or "module:function"
    # naming it, imported when training starts (a loop that imports the family's module);
    # None: `robocompose.policies.train.train`
    trainer: Trainer | str | None = None

    def training_loop(self) -> Trainer | None:
        """The family's own training loop, imported if named by a string; None: the default."""
        if not isinstance(self.trainer, str):
            return self.trainer
        module, _, function = self.trainer.partition(":")
        return getattr(importlib.import_module(module), function)


_FAMILIES: dict[str, Family] = {}


def add_family(family: Family) -> None:
    """Add a checked family (see `robocompose.policies.base.register_family`); another class
    under a registered name is refused (a reload of the same class re-registers)."""
    known = _FAMILIES.get(family.name)
    if known and _qualname(known.policy) != _qualname(family.policy):
        raise ValueError(
            f"policy family {family.name!r} is already registered by {_qualname(known.policy)}; "
            f"{_qualname(family.policy)} must take another name."
        )
    _FAMILIES[family.name] = family


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _import_builtin_families() -> None:
    for module in FAMILY_MODULES.values():
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
    return builtin_family_names()


def builtin_family_names() -> list[str]:
    """The built-in families, optional ones and those registered so far, importing none."""
    return sorted(set(FAMILY_MODULES) | set(OPTIONAL_FAMILY_MODULES) | set(_FAMILIES))

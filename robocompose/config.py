"""Hydra configs for every verb: `configs/<verb>.yaml`, its groups, overrides, then a dataclass.

One path from the command line to a validated config:
1. Hydra composes `configs/<verb>.yaml` and the groups it names (task/, policy/, composition/,
   search/, sweep/, launcher/; the task/ options come from the task table, see
   `code_presets`) on top of the verb dataclass's own defaults, registered in Hydra's config
   store as `base_<verb>`, and applies overrides in Hydra's grammar (`key=value`,
   `group=option`, `+key=value`, `~key`);
2. the resolved tree becomes the verb's dataclass field by field, each value checked against
   the field's type;
3. the dataclass validates itself in `__post_init__`.

The dataclasses hold the defaults, the YAML files hold the choices (which task, which preset), so
no default is written twice. Every error names the key; an unknown key lists the valid ones and
the nearest.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Hydra and OmegaConf are imported by the functions that compose (slow to import; see
# benchmarks/cli_startup.py): `--help` and `--version` build and describe dataclasses only
if TYPE_CHECKING:
    from omegaconf import DictConfig

CONFIGS = Path(__file__).resolve().parent / "configs"
MISSING = "???"
# groups whose option files hold the verb's own top-level keys (a deploy file is a whole deploy
# config): a verb's defaults list places them at `_global_`, so a file needs no
# `# @package _global_` line, and `deploy=NAME` is read as `deploy@_global_=NAME`
GLOBAL_GROUPS = ("deploy",)


class ConfigError(ValueError):
    """A config that cannot be built; the message names the key."""


def defaults_tree(cls: type) -> dict[str, Any]:
    """The dataclass's defaults as a plain tree; a field without a default is `???` (required)."""
    hints = typing.get_type_hints(cls)
    tree: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            tree[f.name] = _plain(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            tree[f.name] = _plain(f.default_factory())
        elif dataclasses.is_dataclass(hints[f.name]):
            tree[f.name] = defaults_tree(hints[f.name])
        else:
            tree[f.name] = MISSING
    return tree


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def build(cls: type, tree: Mapping[str, Any], prefix: str = "") -> Any:
    """`cls(**tree)` with nested dataclasses built too; unknown, missing or mistyped keys fail.

    A dataclass with a `config_class_for(tree)` classmethod (a policy config: its family's
    subclass) is built as the class that returns for the tree.
    """
    picked = hasattr(cls, "config_class_for")
    if picked:
        try:
            cls = cls.config_class_for(tree)
        except ValueError as e:
            raise ConfigError(f"{e} (in `{prefix.rstrip('.')}`)" if prefix else str(e)) from None
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    for key in tree:
        if key not in names:
            error = unknown_key(prefix + key, names)
            raise ConfigError(f"{error} (as a {cls.__name__})") if picked else error
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in tree:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(f"`{prefix}{f.name}` is required: add {prefix}{f.name}=...")
            continue
        kwargs[f.name] = _convert(hints[f.name], tree[f.name], prefix + f.name)
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        where = f" (in `{prefix.rstrip('.')}`)" if prefix else ""
        raise ConfigError(f"{e}{where}") from None


def _convert(tp: Any, value: Any, key: str) -> Any:
    """`value` as type `tp`, or a ConfigError naming `key` and what was expected."""
    if isinstance(value, str) and value == MISSING:
        raise ConfigError(f"`{key}` is required: add {key}=...")
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise ConfigError(f"`{key}` must be a mapping of {tp.__name__} fields. Got {value!r}.")
        return build(tp, value, key + ".")
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for option in (a for a in args if a is not type(None)):
            try:
                return _convert(option, value, key)
            except ConfigError:
                continue
        raise _mistyped(key, tp, value)
    if origin in (list, tuple, Sequence):
        if not isinstance(value, list | tuple):
            raise _mistyped(key, tp, value)
        item = args[0] if args else Any
        items = [_convert(item, v, f"{key}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise _mistyped(key, tp, value)
        item = args[1] if args else Any
        return {k: _convert(item, v, f"{key}.{k}") for k, v in value.items()}
    if tp is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if tp is str and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)  # Hydra reads `name=1` as a number
    if tp is int and isinstance(value, bool):
        raise _mistyped(key, tp, value)
    if isinstance(tp, type) and isinstance(value, tp):
        return value
    raise _mistyped(key, tp, value)


def _mistyped(key: str, tp: Any, value: Any) -> ConfigError:
    name = getattr(tp, "__name__", None) if typing.get_origin(tp) is None else None
    return ConfigError(f"`{key}` must be {name or tp}. Got {value!r} ({type(value).__name__}).")


def unknown_key(
    key: str, choices: Iterable[str], nested: Mapping[str, Iterable[str]] | None = None
) -> ConfigError:
    """`a.b.c` is not a field: say where, list what is there, suggest the nearest (or the same
    name one level down, `nested`: a field's own fields, as `model` -> `llm.model`)."""
    *parents, name = key.split(".")
    choices = sorted(str(c) for c in choices)
    near = difflib.get_close_matches(name, choices, 1)
    below = [f"{field}.{name}" for field, keys in (nested or {}).items() if name in keys]
    if below:
        near = [below[0]]
    hint = f" Did you mean {'.'.join([*parents, near[0]])!r}?" if near else ""
    where = ".".join(parents) or "the config"
    return ConfigError(
        f"unknown config key {key!r}: {where} has no field {name!r}. "
        f"Choices: {', '.join(choices)}.{hint}"
    )


def register(name: str, cls: type) -> None:
    """Put `cls`'s defaults in Hydra's config store as `base_<name>` (the verb YAML's base)."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    node = OmegaConf.create(defaults_tree(cls))
    _open_free_mappings(cls, node)
    ConfigStore.instance().store(name=f"base_{name}", node=node)


def _open_free_mappings(cls: type, node: DictConfig) -> None:
    """A `dict[...]` field takes any keys (`expert={action_noise_m:0.003}`); fields don't, but
    for a dataclass that picks its class from the tree (`policy.flow_time_scale` exists only
    once `policy.family=flow` is read): `build` checks those keys against the class picked."""
    from omegaconf import DictConfig, OmegaConf

    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        child = node._get_node(f.name)
        if not isinstance(child, DictConfig):
            continue
        if hasattr(hints[f.name], "config_class_for"):
            OmegaConf.set_struct(child, False)
        elif dataclasses.is_dataclass(hints[f.name]):
            _open_free_mappings(hints[f.name], child)
        elif typing.get_origin(hints[f.name]) in (dict, Mapping):
            OmegaConf.set_struct(child, False)


def code_presets(search_dirs: Sequence[Path] = ()) -> dict[str, dict[str, dict[str, Any]]]:
    """Config group options defined in code rather than in configs/: group -> option -> tree.
    `task=<name>` is a suite task's `TaskSpec` (robocompose.sim.tasks), so a new task needs
    no YAML file; a file DIR/task/<name>.yaml (`--config-dir DIR`, one of `search_dirs`) adds
    one more option, and an external task known from a checkpoint read in this process is one
    too, unless such a file names it."""
    from robocompose.sim.tasks import EXTERNAL_TASKS, TASKS

    tasks = {
        s.name: {"name": s.name, "dataset": s.dataset, "demos": s.demos} for s in TASKS.values()
    }
    # external tasks this process learnt from a checkpoint or dataset, unless a preset names them
    files = {p.stem for folder in (CONFIGS, *search_dirs) for p in (folder / "task").glob("*.yaml")}
    for s in EXTERNAL_TASKS.values():
        if s.name not in files:
            tasks[s.name] = {
                "name": s.name,
                "dataset": s.dataset,
                "demos": s.demos,
                "external": s.external,
            }
    return {"task": tasks}


def group_options(group: str) -> list[str]:
    """The options of config group `group`: configs/<group>/*.yaml and the code presets."""
    files = {p.stem for p in (CONFIGS / group).glob("*.yaml")}
    return sorted(files | set(code_presets().get(group, {})))


def _search_dirs(override_lists: Sequence[Sequence[str]]) -> list[Path]:
    """The folders `--config-dir` adds (`hydra.searchpath=[file://...]`) in any override list."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    given = [o for overrides in override_lists for o in overrides]
    searched = [o for o in given if o.startswith("hydra.searchpath=")]
    parsed = OverridesParser.create().parse_overrides(searched)
    return [Path(str(url).removeprefix("file://")) for o in parsed for url in o.value()]


def _store_code_presets(search_dirs: Sequence[Path]) -> None:
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    for group, options in code_presets(search_dirs).items():
        for option, tree in options.items():
            store.store(group=group, name=option, node=tree)


def compose_all(name: str, cls: type, override_lists: Sequence[Sequence[str]]) -> list[DictConfig]:
    """`configs/<name>.yaml` composed once per override list (one Hydra session for all)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    register(name, cls)
    _store_code_presets(_search_dirs(override_lists))
    if not (CONFIGS / f"{name}.yaml").is_file():
        raise ConfigError(
            f"no config {CONFIGS / f'{name}.yaml'}: robocompose reads configs/ (and the shipped "
            "checkpoints) from its repository checkout, so install it editable from there "
            "(`make setup`, or `pip install -e .`)."
        )
    configs = []
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3", job_name=name):
        for overrides in override_lists:
            try:
                configs.append(compose(config_name=name, overrides=_global_groups(overrides)))
            except (HydraException, OmegaConfBaseException) as e:
                raise _explain(e) from None
    return configs


def _global_groups(overrides: Sequence[str]) -> list[str]:
    """`deploy=NAME` as `deploy@_global_=NAME` (see GLOBAL_GROUPS)."""
    return [re.sub(rf"^({'|'.join(GLOBAL_GROUPS)})=", r"\1@_global_=", o) for o in overrides]


def to_tree(config: DictConfig) -> dict[str, Any]:
    """The resolved plain tree of a composed config; a broken interpolation names its key."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        tree = OmegaConf.to_container(config, resolve=True, throw_on_missing=False)
    except OmegaConfBaseException as e:
        raise _explain(e) from None
    assert isinstance(tree, dict)
    return tree


def load(
    name: str,
    cls: type,
    overrides: Sequence[str] = (),
    adapt: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> Any:
    """The verb config `cls` from `configs/<name>.yaml` and command-line overrides; `adapt`
    maps the composed tree onto the fields of a dataclass that is laid out otherwise."""
    tree = to_tree(compose_all(name, cls, [overrides])[0])
    return build(cls, adapt(tree) if adapt else tree)


def _explain(error: Exception) -> ConfigError:
    """Hydra's message, with our nearest-key help where an override names an unknown key."""
    from hydra.errors import ConfigCompositionException
    from omegaconf import DictConfig
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    cause = error.__cause__ if isinstance(error, ConfigCompositionException) else error
    if isinstance(cause, ConfigAttributeError | ConfigKeyError) and cause.full_key:
        parent = cause.parent_node
        if isinstance(parent, DictConfig):
            nested = {
                str(k): [str(c) for c in child]
                for k, child in parent.items_ex(resolve=False)
                if isinstance(child, DictConfig)
            }
            return unknown_key(str(cause.full_key), parent.keys(), nested)
    message = " ".join(str(error).split("\nConfig search path:")[0].split())
    return ConfigError(_nearest_option(message))


def _nearest_option(message: str) -> str:
    """Hydra's "Could not find 'group/option' Available options in 'group': a b c" with the
    nearest option suggested."""
    found = re.search(
        r"Could not find '(?P<group>[\w/]+)/(?P<option>[^']+)' "
        r"Available options in '(?P=group)': (?P<options>.*)$",
        message,
    )
    if not found:
        return message
    group, option = found["group"], found["option"]
    options = found["options"].split()
    near = difflib.get_close_matches(option, options, 1)
    hint = f" Did you mean {near[0]!r}?" if near else ""
    return (
        f"{message[: found.start()]}Could not find '{group}/{option}'. Available options in "
        f"'{group}': {', '.join(options)}.{hint}"
    )


def hydra_value(value: Any) -> str:
    """A Python value written in Hydra's override grammar (strings quoted, so any path works)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    # Hydra unescapes a backslash only before a quote: double those runs, then escape quotes
    text = re.sub(r"(\\+)(?='|$)", lambda m: 2 * m.group(1), str(value)).replace("'", "\\'")
    return f"'{text}'"

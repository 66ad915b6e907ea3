"""Build dataclass configs from `key=value` overrides (Hydra's command-line syntax).

Values parse as JSON where they can (numbers, true/false, null, lists, objects), else as strings.
Unknown keys fail with the valid choices and the nearest one; a required field left unset fails
with the override that would set it.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Iterable
from typing import Any

REQUIRED = object()


def parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _nested_class(f: dataclasses.Field) -> type | None:
    factory = f.default_factory
    if factory is not dataclasses.MISSING and dataclasses.is_dataclass(factory):
        return factory  # a field declared as `field(default_factory=SubConfig)`
    return None


def _defaults(cls: type) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if (sub := _nested_class(f)) is not None:
            tree[f.name] = _defaults(sub)
        elif f.default is not dataclasses.MISSING:
            tree[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            tree[f.name] = f.default_factory()
        else:
            tree[f.name] = REQUIRED
    return tree


def _build(cls: type, tree: dict[str, Any], prefix: str = "") -> Any:
    kwargs = {}
    for f in dataclasses.fields(cls):
        value = tree[f.name]
        if value is REQUIRED:
            raise ValueError(f"`{prefix}{f.name}` is required: add {prefix}{f.name}=...")
        if (sub := _nested_class(f)) is not None:
            value = _build(sub, value, f"{prefix}{f.name}.")
        kwargs[f.name] = value
    return cls(**kwargs)


def config_from_overrides(cls: type, overrides: Iterable[str]) -> Any:
    """`cls` built from its defaults with `a.b=value` overrides applied, validated by `cls`."""
    tree = _defaults(cls)
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ValueError(f"override must look like key=value. Got {item!r}.")
        node, path = tree, key.split(".")
        for depth, part in enumerate(path):
            if not isinstance(node, dict) or part not in node:
                choices = sorted(node) if isinstance(node, dict) else []
                near = difflib.get_close_matches(part, choices, 1)
                hint = f" Did you mean {'.'.join(path[:depth] + near)!r}?" if near else ""
                where = ".".join(path[:depth]) or "the config"
                raise ValueError(
                    f"unknown config key {key!r}: {where} has no field {part!r}. "
                    f"Choices: {', '.join(choices)}.{hint}"
                )
            if depth < len(path) - 1:
                node = node[part]
        node[path[-1]] = parse_value(text)
    return _build(cls, tree)

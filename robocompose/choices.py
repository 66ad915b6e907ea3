"""Config fields that take one of a few names: the names are declared once, on the field, and
both `check_choices` (in the config's `__post_init__`) and `--help` read them there.

    prediction_type: str = one_of(PREDICTION_TYPES, "epsilon")  # the network's target

`choices` may be a function returning the names (a registry that grows as modules load); a
registry that checks its names itself, with messages of its own (missing extras, say),
declares them with `checked=False`: listed, not checked here. A list field whose every entry
takes one of the names is declared with `each_of`.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Sequence
from typing import Any

Choices = Sequence[str] | Callable[[], Sequence[str]]


def one_of(choices: Choices, default: str, *, checked: bool = True) -> Any:
    """A dataclass field defaulting to `default` whose value must be one of `choices`."""
    return dataclasses.field(default=default, metadata={"choices": choices, "checked": checked})


def each_of(choices: Choices, default: Callable[[], Sequence[str]]) -> Any:
    """A list field defaulting to `default()` (called per instance) whose every entry must be
    one of `choices`."""
    return dataclasses.field(
        default_factory=lambda: list(default()), metadata={"choices": choices, "each": True}
    )


def choices_of(f: dataclasses.Field) -> list[str] | None:
    """The names field `f` takes, or None for a field that takes any value."""
    choices = f.metadata.get("choices")
    if choices is None:
        return None
    return list(choices() if callable(choices) else choices)


def check_choices(config: Any) -> None:
    """Refuse a field of the dataclass `config` set to a name outside its choices (a list
    field of `each_of`: an entry, named by its index)."""
    for f in dataclasses.fields(config):
        allowed = choices_of(f)
        if allowed is None or not f.metadata.get("checked", True):
            continue
        value = getattr(config, f.name)
        if not f.metadata.get("each"):
            check_choice(f.name, value, allowed)
            continue
        if not value:
            raise ValueError(f"`{f.name}` must name at least one of {allowed}. Got {value!r}.")
        for i, entry in enumerate(value):
            check_choice(f"{f.name}[{i}]", entry, allowed)


def check_choice(name: str, value: Any, allowed: Sequence[str]) -> None:
    """Refuse `value` outside `allowed`, listing them and suggesting the nearest."""
    if value in allowed:
        return
    near = difflib.get_close_matches(str(value), list(allowed), 1)
    hint = f" Did you mean {near[0]!r}?" if near else ""
    raise ValueError(f"`{name}` must be one of {list(allowed)}. Got {value!r}.{hint}")

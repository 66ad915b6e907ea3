"""The long-horizon collection's templates: one instruction per template, rendered for the
scene it is cycled onto.

A stacking category names the tower's blocks {bottom} {middle} {top}; a sorting category names
the scene's blocks in its order, {first} {second} {third}. Any slot capitalised ({Top}) is the
colour capitalised, `other_` before it ({other_top}) the colour's word in the file's
`other_words` ("scarlet" for red).
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence

from robocompose.hierarchical.instructions.shorthand import FieldError

STACK_SLOTS = ("bottom", "middle", "top")
SORT_SLOTS = ("first", "second", "third")


def _slot(name: str) -> str:
    return name.removeprefix("other_").lower()


def slots_named(template: str, field: str) -> list[str]:
    """The slots a template names, each once, in the order it names them."""
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(template) if name]
    except ValueError as error:
        raise FieldError(field, f"{error} in {template!r}.") from None
    return list(dict.fromkeys(_slot(n) for n in names))


def needs(template: str, slots: Sequence[str], field: str) -> int:
    """How many blocks a scene must have for the template: one past the last slot it names."""
    named = slots_named(template, field)
    unknown = [n for n in named if n not in slots]
    if unknown:
        raise FieldError(field, f"unknown placeholder {{{unknown[0]}}}; have {list(slots)}.")
    return max((slots.index(n) + 1 for n in named), default=0)


def render(
    template: str,
    colours: Sequence[str],
    slots: Sequence[str],
    other_words: Mapping[str, str],
    field: str,
) -> str:
    """The template with each slot's colour (and its capitalised and other words) filled in."""
    values: dict[str, str] = {}
    for slot, colour in zip(slots, colours, strict=False):
        values[slot] = colour
        values[slot.capitalize()] = colour.capitalize()
        if colour in other_words:
            values[f"other_{slot}"] = other_words[colour]
    try:
        return template.format_map(values)
    except KeyError as error:
        raise FieldError(
            field, f"{{{error.args[0]}}} has no value here: {sorted(values)}."
        ) from None

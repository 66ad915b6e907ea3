"""The data files' shorthand: one entry names its scene and derives its gold, so a sentence's
line says what it asks for without a fact list to get wrong.

    tower: red green blue                        a tower from loose blocks, bottom to top
    rebuild: {from: red green, to: green red}    the scene starts with `from`; the gold is `to`
    sort: red blue                               every block into the bin of its colour
    to_bins: "red:blue blue:red"                 named blocks into named bins
    all_but: {blocks: red green blue, skip: green}   sort all but `skip`, which stays out
    goal: "on(red, blue)"                        explicit gold, with `scene` (and `start`)
    refuse: same_object                          infeasible (the why), with `scene` (and `start`)

`extra` adds blocks outside a tower (tower, rebuild); `bins` sets a SortBins scene's bins (sort,
to_bins; default: the colours named); `scene` is "Stack: red green blue" or
"SortBins: red blue / red green blue" (blocks / bins).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from robocompose.hierarchical.instructions.items import (
    GOAL,
    REFUSE_OR_ASK,
    WHY,
    Fact,
    Scene,
    bin_name,
    block,
    facts,
)


class FieldError(ValueError):
    """A bad value in one field of a data entry; the loader adds the file and the entry."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Gold:
    """What an entry's shorthand gives: its scene and the answer expected."""

    scene: Scene
    goal: tuple[Fact, ...] = ()
    expect: str = GOAL
    why: str = ""


def colours(value: Any, field: str) -> tuple[str, ...]:
    """`"red green blue"` -> its words; anything else fails naming `field`."""
    if not isinstance(value, str) or not value.split():
        raise FieldError(
            field, f"must be colours separated by spaces, e.g. 'red blue'. Got {value!r}."
        )
    return tuple(value.split())


def _parts(entry: Mapping[str, Any], field: str, keys: tuple[str, ...]) -> list[Any]:
    value = entry[field]
    if not isinstance(value, Mapping) or set(value) != set(keys):
        raise FieldError(field, f"must be a mapping of {', '.join(keys)}. Got {value!r}.")
    return [value[k] for k in keys]


def _facts(value: Any, field: str) -> tuple[Fact, ...]:
    try:
        return facts(value if isinstance(value, str) else repr(value))
    except ValueError as error:
        raise FieldError(field, str(error)) from None


def make_scene(field: str, *args: Any, **kwargs: Any) -> Scene:
    """A Scene whose complaint names `field`."""
    try:
        return Scene(*args, **kwargs)
    except ValueError as error:
        raise FieldError(field, str(error)) from None


def parse_scene(value: Any, field: str = "scene", start: tuple[Fact, ...] = ()) -> Scene:
    """`"Stack: red green blue"` or `"SortBins: red blue / red green blue"` (blocks / bins; a
    SortBins scene's bins default to its blocks' colours)."""
    if not isinstance(value, str) or ":" not in value:
        raise FieldError(
            field, f"must read 'Stack: red blue' or 'SortBins: red / red blue'. Got {value!r}."
        )
    env, _, rest = value.partition(":")
    blocks_text, _, bins_text = rest.partition("/")
    blocks = colours(blocks_text, field)
    bins = tuple(bins_text.split()) or (blocks if env.strip() == "SortBins" else ())
    return make_scene(field, env.strip(), blocks, bins, start)


def tower_facts(order: tuple[str, ...]) -> tuple[Fact, ...]:
    """A tower bottom to top: the bottom on the table, each block on the one below."""
    pairs = [("on", block(up), block(low)) for low, up in itertools.pairwise(order)]
    return (("on_table", block(order[0])), *pairs)


def sorted_facts(blocks: tuple[str, ...]) -> tuple[Fact, ...]:
    """Every block in the bin of its colour, in the scene's block order."""
    return tuple(("in", block(c), bin_name(c)) for c in blocks)


def _extra(entry: Mapping[str, Any]) -> tuple[str, ...]:
    return colours(entry["extra"], "extra") if "extra" in entry else ()


def _bins(entry: Mapping[str, Any], named: tuple[str, ...]) -> tuple[str, ...]:
    return colours(entry["bins"], "bins") if "bins" in entry else named


def _tower(entry: Mapping[str, Any]) -> Gold:
    """Listed in the tower's order, the scene's blocks would give the answer to a model that
    copies the listing: they are listed sorted."""
    order = colours(entry["tower"], "tower")
    listed = tuple(sorted(order + _extra(entry)))
    return Gold(make_scene("tower", "Stack", listed), tower_facts(order))


def _rebuild(entry: Mapping[str, Any]) -> Gold:
    """The scene starts with tower `from`; the gold is tower `to` (both bottom to top)."""
    current, wanted = _parts(entry, "rebuild", ("from", "to"))
    now, then = colours(current, "rebuild.from"), colours(wanted, "rebuild.to")
    if now == then:
        raise FieldError("rebuild", "the wanted tower (`to`) is the current one (`from`).")
    scene = make_scene("rebuild", "Stack", now + _extra(entry), start=tower_facts(now)[1:])
    return Gold(scene, tower_facts(then))


def _sort(entry: Mapping[str, Any]) -> Gold:
    """Bins beyond the blocks' colours are distractors."""
    blocks = colours(entry["sort"], "sort")
    return Gold(make_scene("bins", "SortBins", blocks, _bins(entry, blocks)), sorted_facts(blocks))


def _to_bins(entry: Mapping[str, Any]) -> Gold:
    """The scene's bins default to every colour named (the env needs one per block colour)."""
    pairs = [tuple(p.split(":")) for p in colours(entry["to_bins"], "to_bins")]
    if any(len(p) != 2 or not all(p) for p in pairs):
        raise FieldError(
            "to_bins",
            f"must be block:bin pairs, e.g. 'red:blue blue:red'. Got {entry['to_bins']!r}.",
        )
    blocks = tuple(b for b, _ in pairs)
    named = tuple(dict.fromkeys([*blocks, *(t for _, t in pairs)]))
    scene = make_scene("bins", "SortBins", blocks, _bins(entry, named))
    return Gold(scene, tuple(("in", block(b), bin_name(t)) for b, t in pairs))


def _all_but(entry: Mapping[str, Any]) -> Gold:
    blocks_text, skip = _parts(entry, "all_but", ("blocks", "skip"))
    blocks = colours(blocks_text, "all_but.blocks")
    if skip not in blocks:
        raise FieldError("all_but.skip", f"must be one of the blocks {blocks}. Got {skip!r}.")
    goal = [("in", block(c), bin_name(c)) for c in blocks if c != skip]
    scene = make_scene("all_but", "SortBins", blocks, blocks)
    return Gold(scene, (*goal, ("in_no_bin", block(skip))))


def _start_scene(entry: Mapping[str, Any]) -> Scene:
    if "scene" not in entry:
        raise FieldError("scene", "is missing; write e.g. scene: 'Stack: red green blue'.")
    return parse_scene(entry["scene"], start=_facts(entry.get("start", ""), "start"))


def _goal(entry: Mapping[str, Any]) -> Gold:
    return Gold(_start_scene(entry), _facts(entry["goal"], "goal"))


def _refuse(entry: Mapping[str, Any]) -> Gold:
    """An instruction to refuse or ask back about, before anything moves."""
    if entry["refuse"] not in WHY:
        raise FieldError("refuse", f"must be one of {WHY}. Got {entry['refuse']!r}.")
    return Gold(_start_scene(entry), (), REFUSE_OR_ASK, entry["refuse"])


# each shorthand: how it builds the gold, and the fields it takes besides `instruction`
SHORTHANDS: dict[str, tuple[Callable[[Mapping[str, Any]], Gold], tuple[str, ...]]] = {
    "tower": (_tower, ("extra",)),
    "rebuild": (_rebuild, ("extra",)),
    "sort": (_sort, ("bins",)),
    "to_bins": (_to_bins, ("bins",)),
    "all_but": (_all_but, ()),
    "goal": (_goal, ("scene", "start")),
    "refuse": (_refuse, ("scene", "start")),
}


def gold(entry: Mapping[str, Any]) -> Gold:
    """The entry's scene and gold from its one shorthand; a bad field fails naming it."""
    named = [name for name in SHORTHANDS if name in entry]
    if len(named) != 1:
        one_of = " | ".join(SHORTHANDS)
        raise FieldError(one_of, f"an entry needs exactly one of these. Got {named or 'none'}.")
    build, takes = SHORTHANDS[named[0]]
    allowed = ("instruction", named[0], *takes)
    for field in entry:
        if field not in allowed:
            raise FieldError(
                field, f"is not a field of a `{named[0]}` entry; it takes {list(allowed)}."
            )
    return build(entry)

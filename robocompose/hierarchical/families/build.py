"""Builders the phrasing files use: one call per phrasing names its scene and derives its gold.

tower("put green on red then blue on green", "red green blue")  # bottom to top
rebuild("turn the tower upside down", "red green blue", "blue green red")
sort_all("sort the blocks by colour", "red blue", bins="red green blue")
to_bins("red into the blue bin, blue into the red bin", "red:blue blue:red")
all_but("sort all but the green one", "red green blue", skip="green")
explicit("swap them", "Stack: red blue", start="on(red, blue)", goal="on(blue, red)")
refuse("put red on red", "Stack: red green blue", why="same_object")
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

from robocompose.hierarchical.families.base import (
    GOAL,
    REFUSE_OR_ASK,
    Fact,
    Scene,
    bin_name,
    block,
    facts,
)


class Spec(NamedTuple):
    """A phrasing before its family, split, index and seed are assigned."""

    instruction: str
    scene: Scene
    goal: tuple[Fact, ...] = ()
    expect: str = GOAL
    why: str = ""


def _colours(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def tower_facts(order: tuple[str, ...]) -> tuple[Fact, ...]:
    """A tower bottom to top: the bottom on the table, each block on the one below."""
    pairs = [("on", block(up), block(low)) for low, up in itertools.pairwise(order)]
    return (("on_table", block(order[0])), *pairs)


def tower(text: str, order: str, extra: str = "") -> Spec:
    """Build a tower `order` (bottom to top) from loose blocks; `extra` blocks stay out of it.
    The scene lists its blocks by name: listed in the tower's order, they would give the answer
    to a model that copies the listing."""
    colours = _colours(order)
    listed = tuple(sorted(colours + _colours(extra)))
    return Spec(text, Scene("Stack", listed), tower_facts(colours))


def rebuild(text: str, current: str, wanted: str, extra: str = "") -> Spec:
    """The scene starts with tower `current`; the goal is tower `wanted` (both bottom to top)."""
    now, then = _colours(current), _colours(wanted)
    if now == then:
        raise ValueError(f"rebuild {text!r}: the wanted tower is the current one.")
    start = tower_facts(now)[1:]
    return Spec(text, Scene("Stack", now + _colours(extra), start=start), tower_facts(then))


def sort_all(text: str, blocks: str, bins: str = "") -> Spec:
    """Every block into the bin of its colour; bins beyond the blocks' are distractors."""
    colours = _colours(blocks)
    scene = Scene("SortBins", colours, _colours(bins) or colours)
    return Spec(text, scene, tuple(("in", block(c), bin_name(c)) for c in colours))


def to_bins(text: str, mapping: str, bins: str = "") -> Spec:
    """Named blocks into named bins, `"red:blue green:red"`; the scene's bins default to every
    colour named (the env needs one per block colour)."""
    pairs = [tuple(p.split(":")) for p in mapping.split()]
    colours = tuple(b for b, _ in pairs)
    named = tuple(dict.fromkeys([*colours, *(t for _, t in pairs)]))
    scene = Scene("SortBins", colours, _colours(bins) or named)
    return Spec(text, scene, tuple(("in", block(b), bin_name(t)) for b, t in pairs))


def all_but(text: str, blocks: str, skip: str) -> Spec:
    """Every block but `skip` into its own bin; `skip` stays out of every bin."""
    colours = _colours(blocks)
    goal = [("in", block(c), bin_name(c)) for c in colours if c != skip]
    return Spec(text, Scene("SortBins", colours, colours), (*goal, ("in_no_bin", block(skip))))


def scene(spec: str, start: str = "") -> Scene:
    """`"Stack: red green blue"` or `"SortBins: red blue / red green blue"` (blocks / bins)."""
    env, _, rest = spec.partition(":")
    blocks, _, bins = rest.partition("/")
    return Scene(env.strip(), _colours(blocks), _colours(bins), facts(start))


def explicit(text: str, where: str, start: str = "", goal: str = "") -> Spec:
    return Spec(text, scene(where, start), facts(goal))


def refuse(text: str, where: str, why: str, start: str = "") -> Spec:
    """An instruction to refuse or ask back about, before anything moves."""
    return Spec(text, scene(where, start), (), REFUSE_OR_ASK, why)

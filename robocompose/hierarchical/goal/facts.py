"""The scene as ground facts, and block arrangements (towers, bins) to start a scene from.

Fact vocabulary (tuples of strings; blocks "<colour>_block", bins "<colour>_bin"):

    ("on", x, y)        block x rests directly on block y
    ("on_table", x)     x rests on the table outside every bin
    ("in", x, b)        x rests on the table inside bin b (a bin holds one block at its base)
    ("clear", x)        nothing rests on x (a held block is clear)
    ("holding", x)      the gripper holds x
    ("hand_empty",)     the gripper holds nothing
    ("empty", b)        no block rests in bin b

Every block not held has exactly one of on / on_table / in. `facts_of(world)` reads them from the
world's perception (`on_top_of`, `in_bin`, `clear`, `holding`); a block that is falling has none.

An arrangement lists stacks bottom-up, each on the table or in a bin:
    [("red", "green", "blue")]                   a tower: red at the bottom, blue on top
    [("red_bin", "red"), ("green", "blue")]      red in the red bin, blue on green on the table
Colour words or block names both work; blocks not named stay where they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from robocompose.hierarchical.goal.strips import Fact, State

TABLE = "table"
Support = dict[str, str]  # block -> "table", a block, or a bin (what it rests on)


def block_name(word: str) -> str:
    return word if word.endswith("_block") else f"{word}_block"


def colour_of(name: str) -> str:
    return name.rsplit("_", 1)[0]


@dataclass(frozen=True)
class SceneNames:
    """The names a goal may speak of: the blocks and bins of one scene."""

    blocks: tuple[str, ...]
    bins: tuple[str, ...] = ()

    @classmethod
    def of(cls, world: Any) -> SceneNames:
        return cls(tuple(world.objects()), tuple(world.bins()))

    @property
    def objects(self) -> dict[str, tuple[str, ...]]:
        """Typed objects for grounding operators."""
        return {"block": self.blocks, "bin": self.bins}

    def bin_of(self, block: str) -> str | None:
        """The bin of the block's colour, if the scene has one."""
        name = f"{colour_of(block)}_bin"
        return name if name in self.bins else None


def facts_of(world: Any) -> State:
    """The world's current facts, from its perception."""
    held = world.holding()
    facts: set[Fact] = {("holding", held)} if held else {("hand_empty",)}
    filled: set[str] = set()
    for block in world.objects():
        if world.clear(block):
            facts.add(("clear", block))
        if block == held:
            continue
        below = world.on_top_of(block)
        if below == TABLE:
            bin_name = world.in_bin(block) if world.bins() else None
            if bin_name:
                facts.add(("in", block, bin_name))
                filled.add(bin_name)
            else:
                facts.add(("on_table", block))
        elif below is not None:
            facts.add(("on", block, below))
    facts |= {("empty", b) for b in world.bins() if b not in filled}
    return frozenset(facts)


def supports(state: Iterable[Fact]) -> Support:
    """What each placed block rests on (held and falling blocks are left out)."""
    out: Support = {}
    for fact in state:
        if fact[0] == "on" or fact[0] == "in":
            out[fact[1]] = fact[2]
        elif fact[0] == "on_table":
            out[fact[1]] = TABLE
    return out


def state_of(support: Mapping[str, str], scene: SceneNames, held: str | None = None) -> State:
    """The full facts of a configuration: `support` for every block but the held one."""
    facts: set[Fact] = {("holding", held)} if held else {("hand_empty",)}
    carrying = set(support.values())
    for block in scene.blocks:
        if block not in carrying:
            facts.add(("clear", block))
        if block == held:
            continue
        below = support[block]
        if below == TABLE:
            facts.add(("on_table", block))
        elif below in scene.bins:
            facts.add(("in", block, below))
        else:
            facts.add(("on", block, below))
    facts |= {("empty", b) for b in scene.bins if b not in carrying}
    return frozenset(facts)


def stacks_of(support: Mapping[str, str]) -> list[list[str]]:
    """The stacks of a configuration, each bottom-up with its base's support first
    ("table" or a bin), ordered by base name."""
    above = {below: block for block, below in support.items()}
    stacks = []
    for block, below in sorted(support.items()):
        if below in support:
            continue
        stack = [below, block]
        while stack[-1] in above:
            stack.append(above[stack[-1]])
        stacks.append(stack)
    return stacks


# -- arrangements ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stack:
    """Blocks to pile bottom-up on `base`: "table" (a free spot), a bin, or a block that stays
    where it is (named as a support but not placed itself)."""

    base: str
    blocks: tuple[str, ...]


def arrangement(facts: Iterable[Sequence[str]], scene: SceneNames) -> list[Stack]:
    """Start facts (("on", a, b), ("in", a, bin), ("on_table", a)) -> the stacks to build."""
    support: Support = {}
    for fact in facts:
        fact = tuple(fact)
        kinds = {"on": 3, "in": 3, "on_table": 2}
        if not fact or fact[0] not in kinds or len(fact) != kinds[fact[0]]:
            raise ValueError(
                f"an arrangement fact is on(a, b), in(a, bin) or on_table(a). Got {fact!r}."
            )
        block = fact[1]
        below = TABLE if fact[0] == "on_table" else fact[2]
        if block not in scene.blocks:
            raise ValueError(
                f"unknown block {block!r} in {fact!r}; the scene has {list(scene.blocks)}."
            )
        names = scene.bins if fact[0] == "in" else scene.blocks
        if below != TABLE and below not in names:
            raise ValueError(
                f"unknown {'bin' if fact[0] == 'in' else 'block'} {below!r} in "
                f"{fact!r}; the scene has {list(names) or 'none'}."
            )
        if block in support:
            raise ValueError(f"the arrangement places {block} twice ({fact!r}).")
        if below == block:
            raise ValueError(f"{fact!r}: a block cannot rest on itself.")
        if below != TABLE and below in support.values():
            raise ValueError(f"{fact!r}: {below} already carries a block (one each).")
        support[block] = below
    above = {below: block for block, below in support.items() if below != TABLE}
    stacks = []
    for block, below in support.items():
        if below in support:
            continue
        pile = [block]
        while pile[-1] in above:
            pile.append(above[pile[-1]])
            if len(pile) > len(support):
                raise ValueError("the arrangement's on facts form a cycle.")
        stacks.append(Stack(below, tuple(pile)))
    if sum(len(s.blocks) for s in stacks) != len(support):
        raise ValueError("the arrangement's on facts form a cycle.")
    return stacks


def arranged_facts(stacks: Sequence[Stack], scene: SceneNames) -> list[Fact]:
    """The location facts the stacks make true."""
    out: list[Fact] = []
    for stack in stacks:
        below = stack.base
        for block in stack.blocks:
            if below == TABLE:
                out.append(("on_table", block))
            elif below in scene.bins:
                out.append(("in", block, below))
            else:
                out.append(("on", block, below))
            below = block
    return out

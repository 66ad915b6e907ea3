"""The shape of a benchmark item: a collection, a category, an instruction, a scene, a seed and
the gold answer.

Facts are tuples over scene names, the same words the world reports:

    ("on", "red_block", "blue_block")     red rests on blue
    ("on_table", "red_block")             red rests on the table
    ("in", "red_block", "blue_bin")       red lies in the blue bin's zone
    ("in_no_bin", "green_block")          green lies in no bin (all-but-one: it stays out)

Data files write them short, colours only: `on(red, blue)`, `on_table(red)`, `in(red, blue)`
(the second argument of `in` is a bin), `in_no_bin(green)`; `facts("on(red, blue) in(red, blue)")`
expands them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from robocompose.hierarchical.goal.facts import SceneNames

Fact = tuple[str, ...]
ENVS = ("Stack", "SortBins")
# dev: prompts may be tuned on it; test: never enters a prompt; wordings: held out like test,
# its categories are ways of writing (typos, other languages, self-corrections); long_horizon:
# the planners' runs
COLLECTIONS = ("dev", "test", "wordings", "long_horizon")
HELD_OUT = ("test", "wordings")
GOAL, REFUSE_OR_ASK = "goal", "refuse_or_ask"
# why an infeasible item cannot be done as asked
WHY = ("missing_object", "same_object", "contradiction", "ambiguous", "unreachable", "unsafe")
_ARITY = {"on": 2, "on_table": 1, "in": 2, "in_no_bin": 1}
_FACT = re.compile(r"(\w+)\(([^)]*)\)")


def block(colour: str) -> str:
    return f"{colour}_block"


def bin_name(colour: str) -> str:
    return f"{colour}_bin"


def facts(text: str) -> tuple[Fact, ...]:
    """`"on(red, blue) in(green, red)"` -> the facts over scene names; bad text fails naming it."""
    out: list[Fact] = []
    for name, args in _FACT.findall(text):
        colours = [a.strip() for a in args.split(",") if a.strip()]
        if _ARITY.get(name) != len(colours):
            raise ValueError(f"fact {name}({args}) is not one of {sorted(_ARITY)} with its arity.")
        names = [block(c) for c in colours]
        if name == "in":
            names[1] = bin_name(colours[1])
        out.append((name, *names))
    if not out and text.strip():
        raise ValueError(f"no facts in {text!r}; write e.g. 'on(red, blue) in(green, green)'.")
    return tuple(out)


def fact_text(fact: Fact) -> str:
    """`("on", "red_block", "blue_block")` -> `"on(red_block, blue_block)"`."""
    return f"{fact[0]}({', '.join(fact[1:])})"


@dataclass(frozen=True)
class Scene:
    """An env's blocks and bins, the facts arranged before the instruction is given, and for a
    Stack the `order` (bottom to top) its own success check wants (empty: the env's default)."""

    env: str
    blocks: tuple[str, ...]
    bins: tuple[str, ...] = ()
    start: tuple[Fact, ...] = ()
    order: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.env not in ENVS:
            raise ValueError(f"`env` must be one of {ENVS}. Got {self.env!r}.")
        if self.env == "Stack" and self.bins:
            raise ValueError(f"a Stack scene has no bins. Got bins={self.bins}.")
        if self.env == "SortBins" and not set(self.blocks) <= set(self.bins):
            raise ValueError(f"SortBins needs a bin of every block's colour. Got {self}.")
        if self.order and (self.env != "Stack" or sorted(self.order) != sorted(self.blocks)):
            raise ValueError(f"`order` is a Stack scene's blocks bottom to top. Got {self}.")
        names = {block(c) for c in self.blocks} | {bin_name(c) for c in self.bins}
        for fact in self.start:
            if not set(fact[1:]) <= names:
                raise ValueError(f"start fact {fact_text(fact)} names what the scene lacks.")

    def names(self) -> SceneNames:
        """The scene as the goal planner names it: its blocks and bins."""
        return SceneNames(
            tuple(block(c) for c in self.blocks), tuple(bin_name(c) for c in self.bins)
        )

    def env_kwargs(self) -> dict[str, Any]:
        """What the env takes (`SimWorld(env, env_kwargs)`)."""
        kwargs: dict[str, Any] = {"blocks": self.blocks}
        if self.env == "SortBins":
            kwargs["bins"] = self.bins
        if self.order:
            kwargs["order"] = self.order
        return kwargs


@dataclass(frozen=True)
class InstructionItem:
    """One benchmark item. `expect` is GOAL (the final world must satisfy `goal`) or
    REFUSE_OR_ASK (nothing may move; `why` says what makes it infeasible)."""

    collection: str
    category: str
    index: int  # within its collection and category
    instruction: str
    scene: Scene
    seed: int
    goal: tuple[Fact, ...] = ()
    expect: str = GOAL
    why: str = ""

    def __post_init__(self) -> None:
        if self.collection not in COLLECTIONS:
            raise ValueError(f"`collection` must be one of {COLLECTIONS}. Got {self.collection!r}.")
        if self.expect == GOAL and not self.goal:
            raise ValueError(f"{self.key}: a feasible item needs goal facts.")
        if self.expect == REFUSE_OR_ASK and (self.goal or self.why not in WHY):
            raise ValueError(f"{self.key}: an infeasible item has no goal and `why` in {WHY}.")

    @property
    def key(self) -> str:
        return f"{self.collection}/{self.category}/{self.index}"

    @property
    def feasible(self) -> bool:
        return self.expect == GOAL

"""Gold against the world: which goal facts hold, and what an episode's outcome was.

Outcomes on a feasible item add to 100%: "right" (the final world satisfies every gold fact),
"wrong" (the robot moved and the gold does not hold), "asked_or_refused" (nothing moved and the
gold does not hold). On an infeasible item the only good outcome is that nothing moved.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from robocompose.hierarchical.instructions.items import Fact, fact_text

OUTCOMES = ("right", "wrong", "asked_or_refused")


class Perception(Protocol):
    """What the check reads (SimWorld has it)."""

    def on_top_of(self, block: str) -> str | None: ...
    def in_bin(self, block: str) -> str | None: ...


class FactView:
    """A set of facts (`on`, `on_table`, `in`: a solved goal's) read like a world's perception,
    so gold can be checked against a goal before anything runs."""

    def __init__(self, facts: Iterable[Fact]) -> None:
        self.support: dict[str, str] = {}
        self.bin: dict[str, str] = {}
        for name, *args in facts:
            if name == "on":
                self.support[args[0]] = args[1]
            elif name == "on_table":
                self.support[args[0]] = "table"
            elif name == "in":
                self.support[args[0]], self.bin[args[0]] = "table", args[1]

    def on_top_of(self, block: str) -> str | None:
        return self.support.get(block)

    def in_bin(self, block: str) -> str | None:
        return self.bin.get(block)


def holds(world: Perception, fact: Fact) -> bool:
    """One fact in the world as it is now."""
    name, *args = fact
    if name == "on":
        return world.on_top_of(args[0]) == args[1]
    if name == "on_table":
        return world.on_top_of(args[0]) == "table"
    if name == "in":
        return world.in_bin(args[0]) == args[1]
    if name == "in_no_bin":
        return world.in_bin(args[0]) is None
    raise ValueError(f"unknown fact {fact_text(fact)}; have on, on_table, in, in_no_bin.")


def unmet(world: Perception, goal: Sequence[Fact]) -> list[Fact]:
    """The gold facts that do not hold now."""
    return [fact for fact in goal if not holds(world, fact)]


def outcome(robot_calls: int, goal_met: bool) -> str:
    """right / wrong / asked_or_refused of a feasible item (see the module docstring)."""
    if goal_met:
        return "right"
    return "wrong" if robot_calls else "asked_or_refused"

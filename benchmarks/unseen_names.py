"""The test split again under names the planner never saw: the split `unseen_names` of
`hierarchical.py --parts unseen`.

Every test item keeps its sim scene (the env's colours, its seed, its start); only the names the
planner sees change. Each colour becomes a colour word that appears in no corpus pair and no
prompt (teal, magenta, ochre, ...); in a Stack scene the first two colours the request names
become objects ("the mug", "the small box"). The request is reworded to match, the planner reads
the world through `NamedView` (every name it sees or says is the new one), and its solved goal is
named back and checked against the gold: right, wrong (a goal the gold does not hold in) or
asked / refused. The goal is judged as solved, before motion: the solver and the planning
library were right on every goal they were given, so what this split measures is the reading.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from robocompose.hierarchical.instructions import FactView, InstructionItem, unmet

COLOURS = {
    "red": "teal",
    "green": "magenta",
    "blue": "ochre",
    "yellow": "maroon",
    "purple": "beige",
    "orange": "lilac",
    "cyan": "coral",
    "white": "khaki",
}
OBJECTS = ("mug", "small box")  # a Stack scene's first two named colours
_NOUN = r"(?:\s+(?:block|cube|one|piece))?"


def names_for(item: InstructionItem) -> dict[str, str]:
    """Colour -> the name the planner sees instead."""
    names = {c: COLOURS[c] for c in (*item.scene.blocks, *item.scene.bins)}
    if item.scene.env == "Stack":
        said = _in_order(item.instruction, item.scene.blocks)[: len(OBJECTS)]
        names |= dict(zip(said, OBJECTS, strict=False))
    return names


def _in_order(text: str, colours: Iterable[str]) -> list[str]:
    found = {c: m.start() for c in colours if (m := re.search(rf"\b{c}\b", text, re.I))}
    return sorted(found, key=found.get)


def reworded(text: str, names: Mapping[str, str]) -> str:
    """The request with every colour replaced: "the red block" -> "the mug", "red" -> "teal"."""
    for colour, name in names.items():
        if name in OBJECTS:
            text = re.sub(rf"\b(?:the\s+)?{colour}{_NOUN}\b", f"the {name}", text, flags=re.I)
        else:
            text = re.sub(rf"\b{colour}\b", name, text, flags=re.I)
    return text


def shown(name: str, names: Mapping[str, str]) -> str:
    """A sim name ("red_block", "red_bin") as the planner sees it ("mug_block", "teal_bin")."""
    colour, _, kind = name.rpartition("_")
    if kind not in ("block", "bin") or colour not in names:
        return name
    return f"{names[colour].replace(' ', '_')}_{kind}"


class NamedView:
    """The world as the planner sees it under other names: what it reads is renamed, what it
    asks about (a position) is named back."""

    def __init__(self, world: Any, names: Mapping[str, str]) -> None:
        self.world = world
        self.to_shown = {n: shown(n, names) for n in (*world.objects(), *world.bins())}
        self.to_sim = {v: k for k, v in self.to_shown.items()}

    def objects(self) -> list[str]:
        return [self.to_shown[n] for n in self.world.objects()]

    def bins(self) -> list[str]:
        return [self.to_shown[n] for n in self.world.bins()]

    def facts(self) -> frozenset[tuple[str, ...]]:
        return frozenset(self.rename(f) for f in self.world.facts())

    def rename(self, fact: tuple[str, ...], back: bool = False) -> tuple[str, ...]:
        table = self.to_sim if back else self.to_shown
        return (fact[0], *(table.get(a, a) for a in fact[1:]))

    def position(self, name: str) -> list[float]:
        return self.world.position(self.to_sim.get(name, name))

    def snapshot(self) -> dict[str, Any]:
        return {"objects": self.objects(), "bins": self.bins()}


def judged(item: InstructionItem, view: NamedView, plan: Any) -> dict[str, Any]:
    """right / wrong / asked_or_refused of a feasible item; moved / asked_or_refused of an
    infeasible one, from the goal the planner solved (named back)."""
    goal = getattr(plan, "goal", None) if plan.kind == "calls" else None
    if goal is None:
        return {"outcome": "asked_or_refused", "robot_calls": 0, "message": plan.message,
                "asked": plan.kind == "ask"}  # fmt: skip
    facts = [view.rename(f, back=True) for f in goal.facts]
    calls = len(plan.calls)
    if not item.feasible:
        return {"outcome": "moved" if calls else "asked_or_refused", "robot_calls": calls}
    missing = unmet(FactView(facts), item.goal)
    return {"outcome": "wrong" if missing else "right", "robot_calls": calls}

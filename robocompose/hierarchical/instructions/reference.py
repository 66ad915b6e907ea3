"""Reference plans for the long-horizon items: pick and place only, so they run on the scripted
registry and are the fixed programs the repair benchmark injects faults into."""

from __future__ import annotations

from typing import Any

from robocompose.hierarchical.instructions.items import InstructionItem


def reference_plan(item: InstructionItem) -> list[dict[str, Any]]:
    """A correct plan of pick/place calls: each goal fact in turn (a tower bottom up, sorting in
    the scene's block order). Long-horizon items only: their goals need nothing unstacked."""
    if item.collection != "long_horizon":
        raise ValueError(f"reference plans are the long-horizon items'. Got {item.key}.")
    plan = []
    for name, obj, *target in item.goal:
        if name in ("on", "in"):
            plan.append({"skill": "pick", "args": {"obj": obj}})
            plan.append({"skill": "place", "args": {"obj": obj, "target": target[0]}})
    return plan


def reference_program(item: InstructionItem) -> str:
    """`reference_plan` as a Python program of skill calls (for the code planner's runs)."""
    lines = []
    for call in reference_plan(item):
        args = ", ".join(repr(v) for v in call["args"].values())
        lines.append(f"{call['skill']}({args})")
    return "\n".join(lines) + "\n"

"""The benchmark's instructions: items in many wordings, each with a scene, a seed and a gold
answer, read from data files (`data/<collection>.yaml`) by one loader.

    from robocompose.hierarchical.instructions import instruction_items, make_world, unmet

    for item in instruction_items("test"):     # "dev" | "test" | "long_horizon"; categories=...
        world = make_world(item)               # its env, arranged start, reset to item.seed
        ...                                    # plan and run item.instruction
        ok = item.feasible and not unmet(world, item.goal)

Collections:
- dev: what prompts and few-shot examples may be tuned on; test: written once, never enters a
  prompt (tests check it). Their categories (>= 12 phrasings each): tower_three, tower_two
  (stack orders), rebuild (a tower given at the start, rebuilt in another order),
  sort_distractor (sort with a bin no block needs), named_bins (named blocks into named,
  non-matching bins), all_but_one, swap (two blocks in a tower or between bins), conditional
  ("if red is on blue, ..."; the scene makes the condition true or false), and infeasible
  (objects not in the scene, "put red on red", contradictions, several possible goals,
  unreachable or unsafe goals: gold = refuse or ask).
- long_horizon: the planners' runs, stack_three (a tower of red, green and blue in one of the 6
  orders; success is the Stack env's own check of `scene.order`) and sort_by_colour (success:
  every block in the bin of its colour); `reference_plan` / `reference_program` solve them.

Modules: `items` (facts, Scene, InstructionItem), `shorthand` and `templates` (what a data entry
says), `load` (the loader), `check` (gold against the world, outcomes), `world`, `reference`.
"""

from __future__ import annotations

from robocompose.hierarchical.instructions.check import (
    OUTCOMES,
    FactView,
    holds,
    outcome,
    unmet,
)
from robocompose.hierarchical.instructions.items import (
    COLLECTIONS,
    GOAL,
    HELD_OUT,
    REFUSE_OR_ASK,
    Fact,
    InstructionItem,
    Scene,
    fact_text,
)
from robocompose.hierarchical.instructions.load import (
    InstructionDataError,
    category_names,
    instruction_items,
    with_order,
)
from robocompose.hierarchical.instructions.reference import reference_plan, reference_program
from robocompose.hierarchical.instructions.world import make_world

STACK_THREE, SORT_BY_COLOUR = "stack_three", "sort_by_colour"  # the long-horizon categories

__all__ = [
    "COLLECTIONS",
    "HELD_OUT",
    "GOAL",
    "OUTCOMES",
    "REFUSE_OR_ASK",
    "SORT_BY_COLOUR",
    "STACK_THREE",
    "Fact",
    "FactView",
    "InstructionDataError",
    "InstructionItem",
    "Scene",
    "category_names",
    "fact_text",
    "holds",
    "instruction_items",
    "make_world",
    "outcome",
    "reference_plan",
    "reference_program",
    "unmet",
    "with_order",
]

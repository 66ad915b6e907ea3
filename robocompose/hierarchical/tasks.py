"""Long-horizon tasks for the planners: instructions in many wordings, a world, a success check.

Two tasks, each a list of items (task, instruction, env_kwargs, seed):

- "stack_three": StackEnv with red, green and blue blocks and `order` (bottom to top) one of the
  6 orders; the phrasing alone says the order ("put blue on red then green on blue", "build a
  tower: red at the bottom, then green, blue on top", top-to-bottom lists, other colour words).
  Success is the env's own check for that order.
- "sort_by_colour": SortBins (3 blocks, or 2 blocks and a distractor bin); success = every block
  released inside the bin of its colour.

    for item in long_horizon_tasks():
        world = make_world(item)                 # a SimWorld reset to item.seed
        plan = reference_plan(item)              # [{"skill": "pick", "args": {...}}, ...]
        program = reference_program(item)        # the same plan as Python calls
        ...; task_success(world)

The reference plans use only pick and place, so they run on the scripted registry and are the
fixed programs the repair benchmark injects faults into.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from robocompose.hierarchical.world import SimWorld

STACK_TASK, SORT_TASK = "stack_three", "sort_by_colour"
TASK_ENVS = {STACK_TASK: "Stack", SORT_TASK: "SortBins"}
STACK_BLOCKS = ("red", "green", "blue")
STACK_ORDERS = tuple(itertools.permutations(STACK_BLOCKS))  # all 6, bottom to top
OTHER_WORDS = {"red": "scarlet", "green": "emerald", "blue": "navy"}


class LongHorizonItem(NamedTuple):
    task: str  # one of TASK_ENVS
    instruction: str
    env_kwargs: dict[str, Any]
    seed: int


Phrase = Callable[[str, str, str], str]  # (bottom, middle, top) or three block colours -> text

STACK_PHRASINGS: tuple[Phrase, ...] = (
    lambda b, m, t: f"put {m} on {b} then {t} on {m}",
    lambda b, m, t: f"build a tower: {b} at the bottom, then {m}, {t} on top",
    lambda b, m, t: f"stack the blocks with {b} at the bottom, {m} in the middle and {t} on top",
    lambda b, m, t: (
        f"make a stack: the {t} block on top, the {m} block in the middle, "
        f"the {b} block at the bottom"
    ),
    lambda b, m, t: (
        f"stack the {m} block on the {b} block, and then stack the {t} block on the {m} block"
    ),
    lambda b, m, t: f"I want a tower that reads, from bottom to top: {b}, {m}, {t}",
    lambda b, m, t: f"from top to bottom the tower should be {t}, {m}, {b}",
    lambda b, m, t: (
        f"place the {m} cube onto the {b} cube and afterwards put the {t} cube on "
        f"top of the {m} one"
    ),
    lambda b, m, t: (
        f"leave the {b} block where it is, put the {m} block on it and finish with the {t} block"
    ),
    lambda b, m, t: f"the {t} block goes on the {m} block, which goes on the {b} block",
    lambda b, m, t: f"stack {t} on {m} on {b}",
    lambda b, m, t: (
        f"first put the {m} block on top of the {b} block. Next, put the {t} block "
        f"on top of the {m} block."
    ),
    lambda b, m, t: f"pile up the blocks: {b} at the base, {m} next, {t} at the top",
    lambda b, m, t: f"stack {b}, {m} and {t}, bottom to top",
    lambda b, m, t: f"stack {t}, {m} and {b}, listed from the top down",
    lambda b, m, t: (
        f"the {b} block should end up at the bottom of a tower, with the {m} block "
        f"above it and the {t} block highest"
    ),
    lambda b, m, t: f"put the {t} one on the {m} one, after putting the {m} one on the {b} one",
    lambda b, m, t: f"tower please: {b} base, {m} middle, {t} top",
    lambda b, m, t: f"build a three-block tower whose base is {b} and whose top is {t}",
    lambda b, m, t: (
        f"put the {OTHER_WORDS[m]} block on the {OTHER_WORDS[b]} block, then the "
        f"{OTHER_WORDS[t]} block on the {OTHER_WORDS[m]} block"
    ),
    lambda b, m, t: (
        f"using the {OTHER_WORDS[b]} cube as the foundation, stack the "
        f"{OTHER_WORDS[m]} cube and then the {OTHER_WORDS[t]} cube on it"
    ),
    lambda b, m, t: (
        f"can you make a tower? {t.capitalize()} should be on top of {m}, and {m} on top of {b}."
    ),
    lambda b, m, t: f"{b} first, {m} on it, {t} last",
    lambda b, m, t: f"the {m} block must sit on the {b} block and carry the {t} block",
)

SORT_PHRASINGS: tuple[Phrase, ...] = (
    lambda a, b, c: "sort the blocks into the bins by colour",
    lambda a, b, c: "put each block in the bin that matches its colour",
    lambda a, b, c: "put every block into the bin of the same color",
    lambda a, b, c: "tidy up: each cube goes into its matching coloured bin",
    lambda a, b, c: (
        f"place the {a} block in the {a} bin, the {b} block in the {b} bin and the "
        f"{c} block in the {c} bin"
    ),
    lambda a, b, c: "match the blocks to the bins by colour",
    lambda a, b, c: "move all the blocks into the bins of their colours",
    lambda a, b, c: "clear the table by dropping each block into the bin of its colour",
    lambda a, b, c: f"{a} goes to {a}, {b} goes to {b}, {c} goes to {c}",
    lambda a, b, c: "sort by colour: blocks into same-coloured bins",
    lambda a, b, c: "every block belongs in the bin of its own colour; put them there",
    lambda a, b, c: "could you sort these cubes into the coloured zones by colour?",
    lambda a, b, c: "group the blocks by colour into the bins",
    lambda a, b, c: f"first the {c} block into its bin, then the {a} one, then the {b} one",
    lambda a, b, c: "put the blocks away in the bins, colour to colour",
    lambda a, b, c: (
        f"start with the {b} block: put it in the {b} bin. Then do the same for the other blocks."
    ),
    lambda a, b, c: "the bins are colour coded; sort the blocks accordingly",
    lambda a, b, c: "drop each coloured block onto the flat zone of the same colour",
    lambda a, b, c: (
        f"bring the {a} cube to the {a} bin and the others to the bins of their own colours"
    ),
    lambda a, b, c: "arrange the blocks so that each one lies in the bin of its colour",
    lambda a, b, c: "colour sorting: every block into its bin",
    lambda a, b, c: (
        f"the {OTHER_WORDS[a]} block belongs in the {OTHER_WORDS[a]} bin; sort all "
        f"the blocks like that"
    ),
)

# SortBins scenes, cycled over the phrasings: three blocks, or two and a distractor bin. The
# two-block scenes list the named colours first, so a phrasing naming three colours always gets
# a three-block scene.
SORT_SCENES: tuple[dict[str, Any], ...] = (
    {"blocks": ("red", "green", "blue")},
    {"blocks": ("blue", "red", "green")},
    {"blocks": ("green", "blue", "red")},
    {"blocks": ("red", "blue"), "bins": ("red", "green", "blue")},
    {"blocks": ("green", "red"), "bins": ("red", "green", "blue")},
)
NAMES_ALL_BLOCKS = frozenset({4, 8, 13})  # SORT_PHRASINGS that name three block colours


def _stack_items() -> list[LongHorizonItem]:
    items = []
    for k, phrase in enumerate(STACK_PHRASINGS):
        order = STACK_ORDERS[k % len(STACK_ORDERS)]
        items.append(
            LongHorizonItem(
                STACK_TASK,
                phrase(*order),
                {"blocks": STACK_BLOCKS, "order": order},
                seed=1000 + k,
            )
        )
    return items


def _sort_items() -> list[LongHorizonItem]:
    items = []
    for k, phrase in enumerate(SORT_PHRASINGS):
        scenes = SORT_SCENES[:3] if k in NAMES_ALL_BLOCKS else SORT_SCENES
        scene = scenes[k % len(scenes)]
        colours = [*scene["blocks"], *STACK_BLOCKS]  # pad: phrasings naming fewer use the first
        items.append(LongHorizonItem(SORT_TASK, phrase(*colours[:3]), dict(scene), 2000 + k))
    return items


def long_horizon_tasks(tasks: Sequence[str] = tuple(TASK_ENVS)) -> list[LongHorizonItem]:
    """Every item of the named tasks, stacking first; seeds are fixed per item."""
    unknown = [t for t in tasks if t not in TASK_ENVS]
    if unknown:
        raise ValueError(f"unknown long-horizon task {unknown[0]!r}; have {list(TASK_ENVS)}.")
    builders = {STACK_TASK: _stack_items, SORT_TASK: _sort_items}
    return [item for task in tasks for item in builders[task]()]


def make_world(item: LongHorizonItem, seed: int | None = None, **world_kwargs: Any) -> SimWorld:
    """A SimWorld for `item`, reset to `seed` (default: the item's own)."""
    world = SimWorld(TASK_ENVS[item.task], item.env_kwargs, **world_kwargs)
    world.reset(item.seed if seed is None else seed)
    return world


def task_success(world: SimWorld) -> bool:
    """The item's success check: the env's (Stack: the configured order; SortBins: all sorted)."""
    return world.success()


def reference_plan(item: LongHorizonItem) -> list[dict[str, Any]]:
    """A correct plan of pick/place calls for the item (stacking: bottom up; sorting: the
    scene's block order)."""
    if item.task == STACK_TASK:
        order = item.env_kwargs["order"]
        pairs = [(f"{upper}_block", f"{lower}_block") for lower, upper in itertools.pairwise(order)]
    else:
        pairs = [(f"{c}_block", f"{c}_bin") for c in item.env_kwargs["blocks"]]
    plan = []
    for obj, target in pairs:
        plan.append({"skill": "pick", "args": {"obj": obj}})
        plan.append({"skill": "place", "args": {"obj": obj, "target": target}})
    return plan


def reference_program(item: LongHorizonItem) -> str:
    """`reference_plan` as a Python program of skill calls (for the code planner's runs)."""
    lines = []
    for call in reference_plan(item):
        args = ", ".join(repr(v) for v in call["args"].values())
        lines.append(f"{call['skill']}({args})")
    return "\n".join(lines) + "\n"

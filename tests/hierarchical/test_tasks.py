"""Long-horizon tasks: phrasings, scenes, worlds, and reference plans that succeed."""

from __future__ import annotations

import ast
import re

import pytest

from robocompose.hierarchical.skills.scripted import build_registry
from robocompose.hierarchical.tasks import (
    OTHER_WORDS,
    SORT_TASK,
    STACK_ORDERS,
    STACK_TASK,
    long_horizon_tasks,
    make_world,
    reference_plan,
    reference_program,
    task_success,
)
from robocompose.sim.stack import COLORS

WORDS = {**{c: c for c in COLORS}, **{w: c for c, w in OTHER_WORDS.items()}}


def _colours_named(text: str) -> set[str]:
    return {WORDS[w] for w in re.findall(r"[a-z]+", text.lower()) if w in WORDS}


def test_each_task_has_20_distinct_phrasings() -> None:
    for task in (STACK_TASK, SORT_TASK):
        items = long_horizon_tasks([task])
        assert len(items) >= 20 and len({i.instruction for i in items}) == len(items)
        assert len({i.seed for i in items}) == len(items)


def test_stacking_covers_every_order_and_names_its_blocks() -> None:
    items = long_horizon_tasks([STACK_TASK])
    assert {i.env_kwargs["order"] for i in items} == set(STACK_ORDERS)
    for item in items:
        named = _colours_named(item.instruction)
        order = item.env_kwargs["order"]
        assert {order[0], order[-1]} <= named, item.instruction  # base and top always said


def test_sorting_names_only_blocks_in_its_scene() -> None:
    for item in long_horizon_tasks([SORT_TASK]):
        assert _colours_named(item.instruction) <= set(item.env_kwargs["blocks"]), item


def _run(item) -> bool:
    world = make_world(item)
    registry = build_registry(world)
    for call in reference_plan(item):
        trace = registry.call(world, call["skill"], **call["args"])
        assert trace.success_check, f"{item.instruction}: {call} failed: {trace.error}"
    success = task_success(world)
    world.close()
    return success


@pytest.mark.parametrize("index", [0, 4, 23, 24, 27, 43])
def test_reference_plans_succeed(index: int) -> None:
    """Both tasks, a scene with a distractor bin among them; all 46 run in benchmarks/skills.py."""
    assert _run(long_horizon_tasks()[index])


def test_the_stack_check_is_the_configured_order() -> None:
    item = long_horizon_tasks([STACK_TASK])[0]  # red, green, blue bottom to top
    world = make_world(item)
    registry = build_registry(world)
    for call in (("pick", "blue_block"), ("place", "blue_block", "red_block")):
        assert registry.call(world, *call).success_check
    for call in (("pick", "green_block"), ("place", "green_block", "blue_block")):
        assert registry.call(world, *call).success_check
    assert not task_success(world)  # a tower, in the wrong order
    world.close()


def test_reference_program_is_the_plan_as_calls() -> None:
    item = long_horizon_tasks([SORT_TASK])[3]
    tree = ast.parse(reference_program(item))
    calls = [(n.value.func.id, [a.value for a in n.value.args]) for n in tree.body]
    assert calls == [(c["skill"], list(c["args"].values())) for c in reference_plan(item)]
    assert calls[0] == ("pick", ["red_block"]) and calls[1] == ("place", ["red_block", "red_bin"])


def test_worlds_are_seeded_by_the_item() -> None:
    item = long_horizon_tasks([SORT_TASK])[0]
    first, again = make_world(item), make_world(item)
    other = make_world(item, seed=item.seed + 1)
    assert first.snapshot() == again.snapshot() != other.snapshot()
    for world in (first, again, other):
        world.close()


def test_unknown_task_is_named() -> None:
    with pytest.raises(ValueError, match="unknown long-horizon task 'stack'"):
        long_horizon_tasks(["stack"])

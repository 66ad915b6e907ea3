"""The long-horizon collection: phrasings, scenes, worlds, and reference plans that succeed."""

from __future__ import annotations

import ast
import itertools
import re

import pytest

from robocompose.hierarchical.instructions import (
    SORT_BY_COLOUR,
    STACK_THREE,
    instruction_items,
    make_world,
    reference_plan,
    reference_program,
    with_order,
)
from robocompose.hierarchical.skills.scripted import build_registry
from robocompose.sim.stack import COLORS

OTHER_WORDS = {"red": "scarlet", "green": "emerald", "blue": "navy"}  # the data's other_words
WORDS = {**{c: c for c in COLORS}, **{w: c for c, w in OTHER_WORDS.items()}}


def long_horizon(category: str | None = None) -> list:
    return instruction_items("long_horizon", None if category is None else [category])


def _colours_named(text: str) -> set[str]:
    return {WORDS[w] for w in re.findall(r"[a-z]+", text.lower()) if w in WORDS}


def test_each_category_has_20_distinct_phrasings() -> None:
    for category in (STACK_THREE, SORT_BY_COLOUR):
        items = long_horizon(category)
        assert len(items) >= 20 and len({i.instruction for i in items}) == len(items)
        assert len({i.seed for i in items}) == len(items)


def test_stacking_covers_every_order_and_names_its_blocks() -> None:
    items = long_horizon(STACK_THREE)
    assert {i.scene.order for i in items} == set(itertools.permutations(("red", "green", "blue")))
    for item in items:
        named = _colours_named(item.instruction)
        order = item.scene.order
        assert item.scene.env_kwargs()["order"] == order  # what the env's own check reads
        assert {order[0], order[-1]} <= named, item.instruction  # base and top always said


def test_sorting_names_only_blocks_in_its_scene() -> None:
    for item in long_horizon(SORT_BY_COLOUR):
        assert _colours_named(item.instruction) <= set(item.scene.blocks), item


def _run(item) -> bool:
    world = make_world(item)
    registry = build_registry(world)
    for call in reference_plan(item):
        trace = registry.call(world, call["skill"], **call["args"])
        assert trace.success_check, f"{item.instruction}: {call} failed: {trace.error}"
    success = world.success()
    world.close()
    return success


@pytest.mark.parametrize("index", [0, 4, 23, 24, 27, 43])
def test_reference_plans_succeed(index: int) -> None:
    """Both categories, a scene with a distractor bin among them; all 46 run in
    benchmarks/skills.py."""
    assert _run(long_horizon()[index])


def test_the_stack_check_is_the_configured_order() -> None:
    item = long_horizon(STACK_THREE)[0]  # red, green, blue bottom to top
    world = make_world(item)
    registry = build_registry(world)
    for call in (("pick", "blue_block"), ("place", "blue_block", "red_block")):
        assert registry.call(world, *call).success_check
    for call in (("pick", "green_block"), ("place", "green_block", "blue_block")):
        assert registry.call(world, *call).success_check
    assert not world.success()  # a tower, in the wrong order
    world.close()


def test_reference_program_is_the_plan_as_calls() -> None:
    item = long_horizon(SORT_BY_COLOUR)[3]
    tree = ast.parse(reference_program(item))
    calls = [(n.value.func.id, [a.value for a in n.value.args]) for n in tree.body]
    assert calls == [(c["skill"], list(c["args"].values())) for c in reference_plan(item)]
    assert calls[0] == ("pick", ["red_block"]) and calls[1] == ("place", ["red_block", "red_bin"])


def test_worlds_are_seeded_by_the_item() -> None:
    item = long_horizon(SORT_BY_COLOUR)[0]
    first, again = make_world(item), make_world(item)
    other = make_world(item, seed=item.seed + 1)
    assert first.snapshot() == again.snapshot() != other.snapshot()
    for world in (first, again, other):
        world.close()


def test_another_order_rewords_the_template_and_moves_the_goal() -> None:
    item = long_horizon(STACK_THREE)[0]  # "put {middle} on {bottom} then {top} on {middle}"
    moved = with_order(item, ("blue", "red", "green"), reword=True)
    assert moved.instruction == "put red on blue then green on red"
    assert moved.scene.order == ("blue", "red", "green") and moved.seed == item.seed
    assert reference_plan(moved)[1]["args"] == {"obj": "red_block", "target": "blue_block"}
    assert with_order(item, ("blue", "red", "green")).instruction == item.instruction
    with pytest.raises(ValueError, match="no stacking item"):
        with_order(long_horizon(SORT_BY_COLOUR)[0], ("red",))


def test_unknown_category_is_named() -> None:
    with pytest.raises(ValueError, match="unknown long_horizon category 'stack'"):
        long_horizon("stack")
    with pytest.raises(ValueError, match="reference plans are the long-horizon items'"):
        reference_plan(instruction_items("dev")[0])

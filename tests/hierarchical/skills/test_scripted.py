"""The skills and their registry: each scripted primitive on a seeded scene, refusals, listings."""

from __future__ import annotations

import numpy as np
import pytest

from robocompose.hierarchical.skills.registry import SkillError, SkillRegistry
from robocompose.hierarchical.skills.scripted import DIRECTIONS, build_registry
from robocompose.hierarchical.world import SimWorld


@pytest.fixture(scope="module")
def stack() -> SimWorld:
    world = SimWorld("Stack")
    yield world
    world.close()


@pytest.fixture(scope="module")
def registry(stack: SimWorld) -> SkillRegistry:
    return build_registry(stack)


# -- primitives ----------------------------------------------------------------------------------
def test_move_to_reaches_the_point(stack: SimWorld, registry: SkillRegistry) -> None:
    stack.reset(0)
    trace = registry.call(stack, "move_to", 0.1, -0.12, 0.08)
    assert trace.success_check and trace.error is None and 0 < trace.steps <= 80
    np.testing.assert_allclose(stack.gripper_position(), [0.1, -0.12, 0.08], atol=0.02)
    assert trace.state_after["steps"] == trace.steps


def test_close_and_open_gripper(stack: SimWorld, registry: SkillRegistry) -> None:
    stack.reset(0)
    assert registry.call(stack, "close_gripper").success_check
    assert stack.gripper_opening_m() < 0.01
    assert registry.call(stack, "open_gripper").success_check
    assert stack.gripper_opening_m() > 0.08


def test_pick_then_place_on_a_block(stack: SimWorld, registry: SkillRegistry) -> None:
    stack.reset(2)
    assert registry.call(stack, "pick", obj="blue_block").success_check
    assert stack.holding() == "blue_block"
    trace = registry.call(stack, "place", obj="blue_block", target="green_block")
    assert trace.success_check, trace.error
    assert stack.on_top_of("blue_block") == "green_block" and stack.holding() is None


def test_place_at_a_free_spot(stack: SimWorld, registry: SkillRegistry) -> None:
    stack.reset(3)
    registry.call(stack, "pick", "red_block")
    x, y = (float(v) for v in stack.free_spot(avoid=["red_block"]))
    assert registry.call(stack, "place_at", "red_block", x, y).success_check
    np.testing.assert_allclose(stack.position("red_block")[:2], [x, y], atol=0.02)


@pytest.mark.parametrize("direction", ["left", "forward"])
def test_push_moves_the_block_along_the_direction(
    stack: SimWorld, registry: SkillRegistry, direction: str
) -> None:
    stack.reset(4)
    before = np.array(stack.position("green_block")[:2])
    trace = registry.call(stack, "push", "green_block", direction, 0.06)
    assert trace.success_check, trace.error
    moved = np.array(stack.position("green_block")[:2]) - before
    assert moved @ np.array(DIRECTIONS[direction]) == pytest.approx(0.06, abs=0.02)
    assert stack.holding() is None and stack.on_top_of("green_block") == "table"


def test_place_in_a_bin_on_sort_bins() -> None:
    world = SimWorld("SortBins")
    world.reset(1)
    registry = build_registry(world)
    assert registry["place_in"].kind == "scripted"
    assert registry.call(world, "pick", "green_block").success_check
    assert registry.call(world, "place", "green_block", "green_bin").success_check
    assert registry.call(world, "place_in", "red_block", "red_bin").success_check
    assert world.in_bin("green_block") == "green_bin" and world.in_bin("red_block") == "red_bin"
    world.close()


# -- preconditions -----------------------------------------------------------------------------
def test_preconditions_refuse_without_moving(stack: SimWorld, registry: SkillRegistry) -> None:
    stack.reset(5)
    result = registry["place"].run(stack, obj="red_block", target="blue_block")
    assert not result.success and result.steps == 0 and "pick it first" in result.message
    assert not registry["place"].precondition(stack, obj="red_block", target="blue_block")
    assert registry["pick"].precondition(stack, obj="red_block")
    registry.call(stack, "pick", "red_block")
    steps = stack.steps
    trace = registry.call(stack, "pick", "green_block")
    assert not trace.success_check and "already holds red_block" in trace.error
    assert stack.steps == steps
    assert "on itself" in registry.call(stack, "place", "red_block", "red_block").error
    registry.call(stack, "place", "red_block", "blue_block")
    assert not registry["pick"].precondition(stack, obj="blue_block")
    assert "red_block rests on blue_block" in registry.call(stack, "pick", "blue_block").error
    assert not registry["push"].precondition(
        stack, obj="red_block", direction="left", distance=0.05
    )


def test_queries_read_the_world(stack: SimWorld, registry: SkillRegistry) -> None:
    stack.reset(6)
    assert registry.call(stack, "objects") == stack.objects()
    assert registry.call(stack, "position", "red_block") == stack.position("red_block")
    assert registry.call(stack, "colour", name="blue_block") == "blue"
    assert registry.call(stack, "holding") is None
    assert registry.call(stack, "on_top_of", "green_block") == "table"
    assert "bins" not in registry.queries  # Stack has none
    with pytest.raises(SkillError, match="`position` argument `name`"):
        registry.call(stack, "position", "table")

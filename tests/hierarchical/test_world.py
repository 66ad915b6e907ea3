"""SimWorld: stepping through hooks, the step budget, perception, snapshots, faults."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from robocompose.hierarchical.skills.scripted import build_registry  # noqa: E402
from robocompose.hierarchical.world import FaultHook, SimWorld, StepBudgetExceeded  # noqa: E402
from robocompose.sim.pick_place import CUBE_MIN_GAP_M  # noqa: E402


@pytest.fixture(scope="module")
def stack() -> SimWorld:
    world = SimWorld("Stack")
    yield world
    world.close()


@pytest.fixture(scope="module")
def sort_bins() -> SimWorld:
    world = SimWorld("SortBins", {"blocks": ("red", "blue"), "bins": ("red", "green", "blue")})
    yield world
    world.close()


def _hold(world: SimWorld) -> np.ndarray:
    return np.append(world.gripper_position(), world.last_action[3])


def test_every_step_calls_the_hooks_and_counts(stack: SimWorld) -> None:
    stack.reset(0)
    seen: list[int] = []
    hook = seen.append
    stack.add_hook(lambda w: seen.append(w.steps))
    stack.add_hook(hook)
    try:
        for _ in range(3):
            stack.step(_hold(stack))
    finally:
        stack._hooks.clear()
    assert seen == [1, stack, 2, stack, 3, stack] and stack.steps == 3


def test_a_hook_that_raises_interrupts_the_running_skill(stack: SimWorld) -> None:
    stack.reset(0)
    registry = build_registry(stack)

    def interrupt(world: SimWorld) -> None:
        if world.call_steps == 4:
            raise KeyboardInterrupt("stop now")

    stack.add_hook(interrupt)
    try:
        with pytest.raises(KeyboardInterrupt, match="stop now"):
            registry["pick"].run(stack, obj="red_block")
    finally:
        stack.remove_hook(interrupt)
    assert stack.steps == 4 and stack.current_skill is None and stack.call_index == 0


def test_step_budget_is_enforced() -> None:
    world = SimWorld("Stack", step_budget=2)
    world.reset(0)
    world.step(_hold(world))
    world.step(_hold(world))
    assert world.steps_left == 0
    with pytest.raises(StepBudgetExceeded, match="step budget of 2"):
        world.step(_hold(world))
    world.reset(0)
    world.step(_hold(world))  # a reset gives the budget back
    world.close()


def test_perception_reads_the_simulator(stack: SimWorld) -> None:
    stack.reset(1)
    assert stack.objects() == ["red_block", "green_block", "blue_block"] and stack.bins() == []
    for i, name in enumerate(stack.objects()):
        np.testing.assert_allclose(stack.position(name), stack.sim.cube_pos(i))
        assert stack.colour(name) == name.removesuffix("_block")
        assert stack.on_top_of(name) == "table" and stack.clear(name)
    assert stack.holding() is None
    registry = build_registry(stack)
    assert registry.call(stack, "pick", "green_block").success_check
    assert stack.holding() == "green_block" and stack.on_top_of("green_block") is None
    assert registry.call(stack, "place", "green_block", "red_block").success_check
    assert stack.on_top_of("green_block") == "red_block" and not stack.clear("red_block")
    assert stack.holding() is None


def test_bins_and_in_bin(sort_bins: SimWorld) -> None:
    sort_bins.reset(2)
    assert sort_bins.objects() == ["red_block", "blue_block"]
    assert sort_bins.bins() == ["red_bin", "green_bin", "blue_bin"]
    assert sort_bins.position("green_bin")[2] == 0.0
    np.testing.assert_allclose(sort_bins.position("green_bin")[:2], sort_bins.sim.bin_xy(1))
    assert sort_bins.colour("blue_bin") == "blue"
    assert sort_bins.in_bin("red_block") is None
    registry = build_registry(sort_bins)
    assert registry.call(sort_bins, "place_in", "red_block", "red_bin").success_check
    assert sort_bins.in_bin("red_block") == "red_bin"


def test_unknown_names_list_the_scene(stack: SimWorld) -> None:
    with pytest.raises(ValueError, match=r"unknown block 'purple_block'.*red_block"):
        stack.position("purple_block")
    with pytest.raises(ValueError, match="no bins"):
        stack.bin_index("red_bin")


def test_snapshot_is_json_and_seeded(sort_bins: SimWorld) -> None:
    first = sort_bins.reset(5)
    assert json.loads(json.dumps(first)) == first
    assert set(first) >= {"objects", "bins", "holding", "gripper", "steps", "success"}
    assert first["objects"]["red_block"]["in_bin"] is None
    assert sort_bins.reset(5) == first and sort_bins.reset(6) != first


def test_render_gives_frames() -> None:
    world = SimWorld("Stack", render_mode="rgb_array")
    world.reset(0)
    frame = world.render()
    assert frame.ndim == 3 and frame.shape[2] == 3 and frame.std() > 5
    world.close()


def test_move_fault_puts_a_block_on_a_free_spot(stack: SimWorld) -> None:
    stack.reset(3)
    record = stack.inject("move", "blue_block")
    assert record["block"] == "blue_block" and record["from"] != record["to"]
    blue = np.array(stack.position("blue_block"))
    assert stack.on_top_of("blue_block") == "table"
    for other in ("red_block", "green_block"):
        assert np.linalg.norm(blue[:2] - stack.position(other)[:2]) >= CUBE_MIN_GAP_M
    assert stack.faults == [record]


def test_slip_fault_mid_place_fails_the_place(stack: SimWorld) -> None:
    stack.reset(4)
    registry = build_registry(stack)
    with pytest.raises(ValueError, match="holds no block"):
        stack.inject("slip")
    fault = FaultHook("slip", at_call=1, at_step=3)
    stack.add_hook(fault)
    try:
        assert registry.call(stack, "pick", "red_block").success_check
        trace = registry.call(stack, "place", "red_block", "blue_block")
    finally:
        stack.remove_hook(fault)
    assert fault.record is not None and fault.record["block"] == "red_block"
    assert fault.record["call_index"] == 1 and fault.record["call_steps"] == 3
    assert not trace.success_check and "did not come to rest on blue_block" in trace.error
    assert stack.on_top_of("red_block") == "table"


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: SimWorld("PushT"), "task"),
        (lambda: SimWorld("Stack", step_budget=0), "step_budget"),
        (lambda: FaultHook("melt", 0), "kind"),
        (lambda: FaultHook("slip", -1), "at_call"),
    ],
)
def test_bad_arguments_name_the_field(make, field: str) -> None:
    with pytest.raises(ValueError, match=f"`{field}`"):
        make()

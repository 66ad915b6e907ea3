"""The check before motion: skill lists, programs (dry run in the sandbox) and SayCan's calls
go through the declared preconditions and effects from the world's facts; a violation names the
call and the fact, and the robot does not move (0 env steps)."""

from __future__ import annotations

from robocompose.hierarchical.base import SkillCall, StepwisePlan
from robocompose.hierarchical.goal.facts import SceneNames
from robocompose.hierarchical.instructions import instruction_items, make_world, reference_plan
from robocompose.hierarchical.run.check import check_calls, declared_operators, dry_run
from robocompose.hierarchical.run.plan_executor import PlanExecutor
from robocompose.hierarchical.skills.scripted import build_registry

STACK = instruction_items("long_horizon", ["stack_three"])[0]
TOWER = [("on", "green_block", "red_block"), ("on", "blue_block", "green_block")]


def _calls(*pairs):
    return [SkillCall(s, a) for s, a in pairs]


def test_a_correct_plan_passes_and_its_facts_follow():
    world = make_world(STACK)
    registry = build_registry(world)
    calls = _calls(*((c["skill"], c["args"]) for c in reference_plan(STACK)))
    found = check_calls(calls, world.facts(), declared_operators(registry), SceneNames.of(world))
    assert found.ok and found.checked == len(calls) and found.unchecked_from is None
    assert ("on", "blue_block", "green_block") in found.final


def test_a_plan_breaking_a_precondition_halfway_is_caught_before_any_motion():
    world = make_world(STACK)
    world.arrange(TOWER)
    registry = build_registry(world)
    # picks red from under the tower after moving only blue: green still rests on red
    plan = _calls(
        ("pick", {"obj": "blue_block"}),
        ("place_at", {"obj": "blue_block", "x": 0.1, "y": 0.1}),
        ("pick", {"obj": "red_block"}),
    )
    result = PlanExecutor(world, registry).run_plan(plan)
    assert result.outcome == "caught" and not result.traces and world.steps == 0
    assert "call 3, pick(obj='red_block') needs clear(red_block)" in result.error


def test_undeclared_skills_end_what_the_facts_can_follow():
    world = make_world(STACK)
    registry = build_registry(world)
    plan = _calls(
        ("move_to", {"x": 0.0, "y": 0.0, "z": 0.2}),
        ("place", {"obj": "red_block", "target": "blue_block"}),
    )
    found = check_calls(plan, world.facts(), declared_operators(registry), SceneNames.of(world))
    assert found.ok and found.unchecked_from == 0  # not checked, not refused


def test_a_program_is_dry_run_on_the_facts_and_caught_without_motion():
    world = make_world(STACK)
    world.arrange(TOWER)
    registry = build_registry(world)
    # the loop reads on_top_of from the facts as they change: it unstacks blue, then green,
    # and then breaks a precondition by picking red while still holding green
    program = (
        "for block in ['blue_block', 'green_block']:\n"
        "    pick(block)\n"
        "    if block == 'blue_block':\n"
        "        place_at(block, 0.12, -0.12)\n"
        "pick('red_block')\n"
    )
    found = dry_run(program, world.facts(), registry, world)
    assert not found.ok and found.index == 3 and found.violation.fact == ("hand_empty",)
    result = PlanExecutor(world, registry).run_plan(program)
    assert result.outcome == "caught" and world.steps == 0
    fine = (
        "pick('blue_block')\n"
        "if on_top_of('green_block') == 'red_block':\n"
        "    place_at('blue_block', 0.12, -0.12)\n"
    )
    assert dry_run(fine, world.facts(), registry, world).ok


def test_saycan_calls_are_checked_one_by_one():
    world = make_world(STACK)
    world.arrange(TOWER)
    registry = build_registry(world)
    chosen = iter([SkillCall("pick", {"obj": "green_block"})])
    plan = StepwisePlan(lambda history: next(chosen, None))
    result = PlanExecutor(world, registry).run_plan(plan)
    assert result.outcome == "caught" and world.steps == 0
    assert "needs clear(green_block)" in result.error and plan.chosen

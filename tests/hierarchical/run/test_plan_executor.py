"""The executor in the real world: skill lists and sandboxed programs leave a trace per call,
refusals and failures end the run with the reason, videos are filmed from the step hook, and both
planners run end to end with a real local model."""

from __future__ import annotations

import pytest

from robocompose.hierarchical.base import SkillCall, as_calls
from robocompose.hierarchical.instructions import (
    instruction_items,
    make_world,
    reference_plan,
    reference_program,
)
from robocompose.hierarchical.llm.cache import CachedLLM
from robocompose.hierarchical.run.plan_executor import PlanExecutor, StepwisePlan
from robocompose.hierarchical.skills.scripted import build_registry

# "put green on red then blue on green"
STACK = instruction_items("long_horizon", ["stack_three"])[0]


@pytest.fixture
def scene():
    world = make_world(STACK)
    yield world, build_registry(world)
    world.close()


def _executed(result) -> list[str]:
    return [str(SkillCall(t.skill, t.args)) for t in result.traces]


def test_reference_plan_as_calls_and_as_program(scene):
    world, registry = scene
    result = PlanExecutor(world, registry).run_plan(reference_plan(STACK))
    assert result.outcome == "success" and result.task_success and result.error is None
    assert [t.skill for t in result.traces] == ["pick", "place", "pick", "place"]
    first = result.traces[0]
    assert first.success_check is True and first.steps > 0
    assert first.state_before["holding"] is None and first.state_after["holding"] == "green_block"

    world.reset(STACK.seed)
    program = PlanExecutor(world, registry).run_plan(reference_program(STACK))
    assert program.outcome == "success"
    assert _executed(program) == _executed(result)  # same calls through the sandbox


def test_refused_call_stops_the_plan_and_names_the_argument(scene):
    world, registry = scene
    calls = as_calls(
        [
            {"skill": "move_to", "args": {"x": 0.5, "y": 0.0, "z": 0.1}},
            {"skill": "pick", "args": {"obj": "red_block"}},
        ]
    )
    result = PlanExecutor(world, registry).run_calls(calls)
    assert result.outcome == "refused" and len(result.traces) == 1
    assert "`move_to` argument `x` must be in [-0.2, 0.2]. Got 0.5" in result.traces[0].error
    assert world.steps == 0  # nothing moved


def test_program_refusals_reach_the_result(scene):
    world, registry = scene
    executor = PlanExecutor(world, registry)
    static = executor.run_program("import os\nos.remove('x')")
    assert static.outcome == "refused" and "import" in static.error and not static.traces
    bad_arg = executor.run_program('pick("red_block")\nplace("red_block", "purple_block")')
    assert bad_arg.outcome == "refused"
    assert [t.skill for t in bad_arg.traces] == ["pick", "place"]
    assert "purple_block" in bad_arg.traces[-1].error and "refused" in bad_arg.traces[-1].error


def test_failed_skill_ends_the_run_with_its_reason(scene):
    world, registry = scene
    calls = [SkillCall("place", {"obj": "red_block", "target": "green_block"})] + [
        SkillCall("pick", {"obj": "blue_block"})
    ]
    for result in (
        PlanExecutor(world, registry).run_calls(calls),
        PlanExecutor(world, registry).run_program('place("red_block", "green_block")\npick("x")'),
    ):
        assert result.outcome == "skill_failed" and len(result.traces) == 1
        assert "does not hold red_block" in result.traces[0].error
        assert result.traces[0].success_check is False


def test_unknown_mapping_item_is_refused_by_name():
    with pytest.raises(ValueError, match="plan item 1 must be"):
        as_calls([{"skill": "pick", "args": {}}, ["pick"]])


def test_stepwise_plan_runs_until_done(scene):
    world, registry = scene
    wanted = as_calls(reference_plan(STACK))
    plan = StepwisePlan(lambda history: wanted[len(history)] if len(history) < 4 else None)
    result = PlanExecutor(world, registry).run_plan(plan)
    assert result.outcome == "success" and plan.chosen == wanted


def test_video_frames_come_from_the_step_hook(tmp_path):
    world = make_world(STACK, render_mode="rgb_array")
    executor = PlanExecutor(world, build_registry(world), frame_every=5)
    executor.run_calls(as_calls(reference_plan(STACK)[:1]))
    assert len(executor.frames) == world.steps // 5 > 0
    path = executor.save_video(tmp_path / "run.mp4")
    assert path is not None and path.stat().st_size > 0
    world.close()


@pytest.mark.smollm2
def test_skill_planner_end_to_end_with_smollm2(scene, smollm2, tmp_path):
    from robocompose.hierarchical.planners.skills import SkillPlanner

    world, registry = scene
    plan = SkillPlanner(CachedLLM(smollm2, tmp_path), registry).plan(
        STACK.instruction, world.snapshot()
    )
    assert plan.ok, plan.problems  # the grammar admits only valid calls
    result = PlanExecutor(world, registry).run_plan(list(plan.calls))
    if result.outcome == "caught":  # a call's declared needs fail: checked, nothing moved
        assert not result.traces and world.steps == 0 and "before the robot moved" in result.error
        return
    assert result.traces and result.traces[0].args == plan.calls[0].args
    assert result.outcome in ("success", "task_failed", "skill_failed")
    assert all(t.state_before and t.state_after for t in result.traces)


@pytest.mark.qwen
def test_code_planner_end_to_end_with_qwen(qwen, tmp_path):
    from robocompose.hierarchical.planners.code import CodePlanner

    # blue onto red, then green on blue
    item = instruction_items("long_horizon", ["stack_three"])[7]
    world = make_world(item)
    registry = build_registry(world)
    plan = CodePlanner(CachedLLM(qwen, tmp_path), registry).plan(item.instruction, world.snapshot())
    assert plan.ok, plan.problems
    result = PlanExecutor(world, registry).run_plan(plan.code)
    assert result.outcome == "success", (plan.code, result.error)
    assert [t.skill for t in result.traces] == ["pick", "place", "pick", "place"]
    assert world.on_top_of("green_block") == "blue_block"

"""The repair loop: a failed plan's trace is summarised for the planner, the repaired plan runs
from the state the failure left (no reset), every round is recorded, and a real model repairs a
reference plan after a block slips from the gripper."""

from __future__ import annotations

import pytest

from robocompose.hierarchical.base import SkillCall
from robocompose.hierarchical.instructions import (
    instruction_items,
    make_world,
    reference_plan,
    reference_program,
)
from robocompose.hierarchical.llm.cache import CachedLLM
from robocompose.hierarchical.planners.prompts import scene_summary
from robocompose.hierarchical.planners.skills import SkillPlan, SkillPlanner, SkillPlannerConfig
from robocompose.hierarchical.run.plan_executor import PlanExecutor
from robocompose.hierarchical.run.repair import run_with_repair, summarize
from robocompose.hierarchical.skills.scripted import build_registry
from robocompose.hierarchical.world import FaultHook

# "put green on red then blue on green"
STACK = instruction_items("long_horizon", ["stack_three"])[0]


def _slipping_world():
    """The stacking scene where the green block falls from the gripper while it is carried."""
    world = make_world(STACK)
    hook = FaultHook("slip", at_call=1, at_step=3)
    world.add_hook(hook)
    return world, hook


def test_summary_names_the_failed_call_and_why():
    world, hook = _slipping_world()
    result = PlanExecutor(world, build_registry(world)).run_program(reference_program(STACK))
    assert hook.record is not None and result.outcome == "skill_failed"
    text = summarize(result)
    assert "pick(obj='green_block'): done" in text
    assert "place(obj='green_block', target='red_block'): FAILED: green_block did not" in text
    assert "Now: the gripper holds nothing; red_block on table; green_block on table" in text
    assert "The scene above is the state now" in text
    assert "pick(obj='blue_block')" not in text  # the calls after the failure never ran


def test_rounds_are_bounded():
    world = make_world(STACK)
    with pytest.raises(ValueError, match=r"`max_rounds` must be in \[0, 5\]. Got 9"):
        run_with_repair("x", None, PlanExecutor(world, build_registry(world)), max_rounds=9)


@pytest.mark.smollm2
def test_refused_plan_goes_back_and_repairs_continue_from_the_state(smollm2, tmp_path):
    world = make_world(STACK)
    registry = build_registry(world)
    planner = SkillPlanner(CachedLLM(smollm2, tmp_path), registry, SkillPlannerConfig(max_calls=1))
    record = run_with_repair(
        STACK.instruction,
        planner,
        PlanExecutor(world, registry),
        max_rounds=2,
        first_plan="import os\nos.system('rm -rf /')",
    )
    first, second, third = record.rounds
    assert first.outcome == "refused" and not record.valid_first_plan
    assert first.planning["llm_calls"] == 0  # the fixed plan, not the LLM's
    assert "import" in second.feedback and second.planning["llm_calls"] == 1
    assert len(second.plan) == 1  # one call: cannot stack three blocks
    assert second.outcome != "success" and third.feedback
    if second.traces and third.traces:  # round 2 starts where round 1 left the world
        assert third.traces[0].state_before["objects"] == second.traces[-1].state_after["objects"]
    assert record.to_json()["rounds"][1]["plan"] == second.plan


class _DeafPlanner:
    """A planner that ignores the feedback: the same plan whatever it is told (what a model at
    temperature 0 gives for the same prompt). It records what it was told."""

    def __init__(self, plan: SkillPlan) -> None:
        self.answer, self.told = plan, []

    def plan(self, instruction, world_summary, feedback=None) -> SkillPlan:
        self.told.append(feedback)
        return self.answer


def test_a_repeated_plan_is_reported_not_run_and_every_prompt_is_new():
    world = make_world(STACK)
    wrong = SkillCall("place", {"obj": "red_block", "target": "blue_block"})  # holds nothing
    planner = _DeafPlanner(SkillPlan((wrong,)))
    record = run_with_repair(
        STACK.instruction, planner, PlanExecutor(world, build_registry(world)), max_rounds=3
    )
    first, *repeats = record.rounds
    assert first.outcome not in ("success", "repeated_plan")
    assert [r.outcome for r in repeats] == ["repeated_plan"] * 3 and not record.success
    assert all(not r.traces for r in repeats)  # not run again
    assert repeats[0].error.startswith("the same plan as round 0 in the same scene")
    assert "repeated the plan of round 0" in planner.told[2]
    assert len(set(planner.told)) == 4  # no prompt asked twice: each reaches the model


@pytest.mark.smollm2
def test_repair_prompts_reach_the_model_and_no_plan_runs_twice_in_a_scene(smollm2, tmp_path):
    """The skill planner on SmolLM2 repeats itself within 4 rounds here; before, round 3's prompt
    was round 2's, answered from the disk cache, and its plan ran again."""
    world = make_world(STACK)
    registry = build_registry(world)
    ran = []
    record = run_with_repair(
        STACK.instruction,
        SkillPlanner(CachedLLM(smollm2, tmp_path), registry),
        PlanExecutor(world, registry),
        max_rounds=3,
        on_plan=lambda i, plan: ran.append((str(plan), scene_summary(world.snapshot()))),
    )
    assert [r.planning["cached"] for r in record.rounds] == [0] * len(record.rounds)
    assert len(set(ran)) == len(ran), record.to_json()


@pytest.mark.qwen
def test_qwen_repairs_a_slipped_block(qwen, tmp_path):
    world, hook = _slipping_world()
    registry = build_registry(world)
    record = run_with_repair(
        STACK.instruction,
        SkillPlanner(CachedLLM(qwen, tmp_path), registry),
        PlanExecutor(world, registry),
        max_rounds=1,
        first_plan=reference_plan(STACK),
    )
    assert hook.record["block"] == "green_block"
    assert [r.outcome for r in record.rounds] == ["skill_failed", "success"], record.to_json()
    assert record.success and world.success()
    assert record.rounds[1].traces[0].state_before["objects"]["green_block"]["on"] == "table"

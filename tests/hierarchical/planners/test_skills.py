"""The JSON skill planner: validation names every problem; under the grammar a real model's plan
always validates; Qwen plans the two-step stacking instruction correctly."""

from __future__ import annotations

import json

import pytest

from robocompose.hierarchical.base import SkillCall
from robocompose.hierarchical.llm.cache import CachedLLM
from robocompose.hierarchical.planners.skills import (
    SkillPlanner,
    SkillPlannerConfig,
    parse_json_list,
    validate_plan,
)
from robocompose.hierarchical.skills.scripted import build_registry
from robocompose.hierarchical.world import SimWorld


@pytest.fixture(scope="module")
def scene():
    world = SimWorld("Stack", {"blocks": ["red", "green", "blue"]})
    snapshot = world.reset(0)
    yield build_registry(world), snapshot
    world.close()


def _problems(registry, items, max_calls=4) -> str:
    calls, problems = validate_plan(registry, json.dumps(items), max_calls)
    assert calls == ()
    return " | ".join(problems)


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        (
            [{"skill": "pik", "args": {"obj": "red_block"}}],
            "unknown skill 'pik'; did you mean 'pick'",
        ),
        (
            [{"skill": "pick", "args": {"obj": "blu_block"}}],
            "call 1 `pick` argument `obj` must be one of",
        ),
        ([{"skill": "pick", "args": {}}], "call 1 `pick`: arguments missing ['obj']"),
        ([{"skill": "pick", "args": {"obj": "red_block", "fast": 1}}], "unexpected ['fast']"),
        (
            [{"skill": "push", "args": {"obj": "red_block", "direction": "left", "distance": 0.5}}],
            "argument `distance` must be in [0.02, 0.12]. Got 0.5",
        ),
        (
            [{"skill": "move_to", "args": {"x": "0.1", "y": 0, "z": 0.1}}],
            "argument `x` must be a number. Got str '0.1'",
        ),
        ([{"skill": "move_to", "args": {"x": True, "y": 0, "z": 0.1}}], "must be a number"),
        ([{"skill": "open_gripper"}] * 5, "the plan has 5 calls; at most 4"),
        (["pick red"], "call 1 must be an object"),
        ([{"name": "pick"}], "call 1 has unexpected keys ['name']"),
        ([], "the plan is empty"),
    ],
)
def test_validation_names_the_problem(scene, items, expected):
    assert expected in _problems(scene[0], items)


def test_every_bad_call_is_reported(scene):
    items = [
        {"skill": "pick", "args": {"obj": "red_block"}},
        {"skill": "fly", "args": {}},
        {"skill": "place", "args": {"obj": "red_block", "target": "moon"}},
    ]
    problems = _problems(scene[0], items)
    assert "call 2: unknown skill 'fly'" in problems and "call 3 `place`" in problems


def test_json_is_found_in_prose_and_bad_json_is_named(scene):
    text = 'Sure! Here is the plan:\n[{"skill": "pick", "args": {"obj": "red_block"}}]\nDone.'
    calls, problems = validate_plan(scene[0], text, 4)
    assert problems == () and calls == (SkillCall("pick", {"obj": "red_block"}),)
    assert "no JSON list" in validate_plan(scene[0], "I would pick it up.", 4)[1][0]
    assert "not valid JSON" in validate_plan(scene[0], '[{"skill": "pick",', 4)[1][0]
    assert parse_json_list('{"calls": [{"skill": "open_gripper", "args": {}}]}') == [
        {"skill": "open_gripper", "args": {}}
    ]


def test_config_is_validated():
    with pytest.raises(ValueError, match="`constrain` must be one of"):
        SkillPlannerConfig(constrain="regex")
    with pytest.raises(ValueError, match=r"`max_calls` must be in \[1, 64\]. Got 0"):
        SkillPlannerConfig(max_calls=0)


INSTRUCTIONS = [
    "put the red block on the green block",
    "stack all three blocks with blue at the bottom",
    "push the green block to the left a little",
]


@pytest.mark.smollm2
def test_smollm2_under_the_grammar_always_validates(smollm2, scene, tmp_path):
    registry, snapshot = scene
    backend = CachedLLM(smollm2, tmp_path / "cache")
    planner = SkillPlanner(backend, registry, SkillPlannerConfig(max_calls=4))
    for instruction in INSTRUCTIONS:
        plan = planner.plan(instruction, snapshot)
        assert plan.ok, (instruction, plan.text, plan.problems)
        assert 1 <= len(plan.calls) <= 4
        assert plan.completions[0].completion_tokens <= planner.config.token_budget


@pytest.mark.smollm2
def test_smollm2_under_the_schema_gets_names_and_types_right(smollm2, scene, tmp_path):
    registry, snapshot = scene
    backend = CachedLLM(smollm2, tmp_path / "cache")
    config = SkillPlannerConfig(max_calls=4, constrain="json_schema")
    planner = SkillPlanner(backend, registry, config)
    for instruction in INSTRUCTIONS[1:]:
        plan = planner.plan(instruction, snapshot)
        assert isinstance(json.loads(plan.text), list)
        assert all(" must be in [" in p for p in plan.problems), plan.problems  # ranges only


@pytest.mark.qwen
def test_qwen_plans_the_two_step_stack(qwen, scene, tmp_path):
    registry, snapshot = scene
    planner = SkillPlanner(CachedLLM(qwen, tmp_path / "cache"), registry)
    plan = planner.plan(
        "stack the blue block on the red block, then put the green block on the blue block",
        snapshot,
    )
    assert plan.ok, plan.problems
    assert plan.calls == (
        SkillCall("pick", {"obj": "blue_block"}),
        SkillCall("place", {"obj": "blue_block", "target": "red_block"}),
        SkillCall("pick", {"obj": "green_block"}),
        SkillCall("place", {"obj": "green_block", "target": "blue_block"}),
    )

"""SayCan: candidates from the registry and the scene, affordances from preconditions, the
choice made by a real model's likelihoods."""

from __future__ import annotations

import math

import pytest

from robocompose.hierarchical.base import SkillCall
from robocompose.hierarchical.llm.cache import CachedLLM
from robocompose.hierarchical.planners.saycan import (
    SayCanConfig,
    SayCanPlanner,
    call_text,
    enumerate_calls,
)
from robocompose.hierarchical.skills.scripted import build_registry
from robocompose.hierarchical.world import SimWorld


@pytest.fixture
def world():
    world = SimWorld("Stack", {"blocks": ["red", "green", "blue"]})
    world.reset(0)
    yield world
    world.close()


def test_candidates_are_the_enumerable_calls_of_the_scene(world):
    registry = build_registry(world)
    calls = enumerate_calls(list(registry.values()))
    assert {c.skill for c in calls} == {"open_gripper", "close_gripper", "pick", "place"}
    places = [c for c in calls if c.skill == "place"]
    assert len(places) == 6 and all(c.args["obj"] != c.args["target"] for c in places)
    assert call_text(SkillCall("place", {"obj": "red_block", "target": "blue_block"})) == (
        'place("red_block", "blue_block")'
    )
    assert call_text(None) == "done()"


def test_config_and_candidate_bounds_are_checked(world):
    with pytest.raises(ValueError, match="`max_steps` must be >= 1. Got 0"):
        SayCanConfig(max_steps=0)
    with pytest.raises(ValueError, match="11 candidate calls exceed `max_candidates` = 4"):
        SayCanPlanner(None, build_registry(world), SayCanConfig(max_candidates=4))


@pytest.mark.smollm2
def test_the_choice_is_affordable_and_scores_combine(smollm2, world, tmp_path):
    registry = build_registry(world)
    planner = SayCanPlanner(CachedLLM(smollm2, tmp_path / "cache"), registry)
    step = planner.step("put the red block on the blue block", [], world)
    by_text = {c.text: c for c in step.candidates}
    assert by_text['place("red_block", "blue_block")'].affordance == 0.0  # nothing is held
    assert by_text['pick("red_block")'].affordance == 1.0
    for c in step.candidates:
        assert (c.logp == -math.inf) == (c.affordance == 0.0)  # only affordable ones scored
        assert c.logp <= 0.0
    best = max(step.candidates, key=lambda c: c.score)
    assert step.call == best.call and best.affordance > 0

    def value(world, call):  # a value estimate: only green may be picked, at half confidence
        return 0.5 if call == SkillCall("pick", {"obj": "green_block"}) else 0.0

    valued = SayCanPlanner(CachedLLM(smollm2, tmp_path / "cache"), registry, affordance=value)
    step = valued.step("put the red block on the blue block", [], world)
    assert step.call in (None, SkillCall("pick", {"obj": "green_block"}))
    green = next(c for c in step.candidates if c.call == SkillCall("pick", {"obj": "green_block"}))
    assert green.score == pytest.approx(green.logp + math.log(0.5))


@pytest.mark.smollm2
def test_run_executes_only_affordable_calls_in_the_world(smollm2, world, tmp_path):
    registry = build_registry(world)
    planner = SayCanPlanner(
        CachedLLM(smollm2, tmp_path / "cache"), registry, SayCanConfig(max_steps=2)
    )
    executed = []

    def execute(call):
        executed.append((call, registry[call.skill].precondition(world, **call.args)))
        registry.call(world, call.skill, **call.args)

    steps = planner.run("pick up the green block", world, execute)
    assert 1 <= len(steps) <= 2 and len(executed) == sum(not s.done for s in steps)
    assert all(affordable for _, affordable in executed)

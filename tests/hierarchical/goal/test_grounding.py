"""The request's own words checked around the LLM's rewrite: names the scene lacks are refused
before any LLM call, blocks the model chose for the person are asked back, and readings under
different example orders that solve to different goals become a question."""

from __future__ import annotations

import pytest

from robocompose.hierarchical.goal.constraints import parse
from robocompose.hierarchical.goal.facts import SceneNames
from robocompose.hierarchical.goal.grounding import (
    bare_bin,
    beyond_skills,
    mentions,
    missing_names,
    ungrounded_blocks,
)
from robocompose.hierarchical.goal.prompt import EXAMPLES, example_orders
from robocompose.hierarchical.goal.solver import choose, same_goal, solve
from robocompose.hierarchical.instructions import instruction_items
from robocompose.hierarchical.planners.goal import (
    GoalPlanner,
    _distinct_goals,
    _which_reading,
    reading_config,
)
from robocompose.hierarchical.skills.scripted import build_registry
from robocompose.hierarchical.world import SimWorld

STACK = SceneNames(("red_block", "green_block", "blue_block"))
BINS = SceneNames(("red_block", "blue_block"), ("red_bin", "green_bin", "blue_bin"))


@pytest.mark.parametrize(
    ("request_", "scene", "missing"),
    [
        ("Stack purple on yellow.", STACK, ["purple", "yellow"]),
        ("Move the blue cube into the orange bin.", BINS, ["orange bin"]),
        ("put red in the yellow-coloured box", BINS, ["yellow bin"]),
        ("put red in blue's bin", BINS, []),
        ("put the red block on the pink one", STACK, ["pink"]),
        ("put the red block in the green bin", STACK, ["green bin"]),  # Stack has no bins
        ("put red into green", BINS, []),  # a colour said of a block may name a bin
        ("stack green on red, then blue on green", STACK, []),
        # another word for a colour the scene has is that colour; for one it lacks, missing
        ("put the navy block on red", STACK, []),
        ("put the violet block on red", STACK, ["purple"]),
        # other languages: French and Spanish name the bin before its colour, German after
        ("pon el bloque morado en la caja roja", BINS, ["purple"]),
        ("pon el bloque azul en la caja amarilla", BINS, ["yellow bin"]),
        ("mets le cube bleu dans le bac vert", BINS, []),
        ("leg den blauen Würfel in die gelbe Kiste", BINS, ["yellow bin"]),
        ("mets le cube rouge dans le bac vert", STACK, ["green bin"]),
    ],
)
def test_names_the_scene_lacks(request_, scene, missing):
    assert missing_names(request_, scene) == missing


def test_bin_mentions_are_told_from_block_mentions():
    said = mentions("Put the purple block in the red bin and also in the purple bin.")
    assert said.blocks == {"purple"} and said.bins == {"red", "purple"}


def test_a_scene_name_wins_over_the_colour_it_is_another_word_for():
    violet = SceneNames(("violet_block", "red_block"))
    assert mentions("put the violet block on red", violet).blocks == {"violet", "red"}
    assert missing_names("put the violet block on red", violet) == []


@pytest.mark.parametrize(
    ("request_", "constraints", "unnamed"),
    [
        ("Drop one block in the green bin.", "in(blue, green_bin)", ["blue"]),
        ("Set it down on the green block.", "bottom_up(green, red)", ["red"]),
        ("put purple in the red bin and in the purple bin", "in(red, purple_bin)", ["red"]),
        ("Make a tower in which green is on top.", "top_down(green, red, blue)", ["blue", "red"]),
        ("trade the top block and the bottom block", "swap(red, blue)", []),
        ("flip the stack", "bottom_up(blue, green, red)", []),
        ("sort all but green", "sort except green", []),
        ("if red is on blue, put green on red", "if on(red, blue) then on(green, red)", []),
        # named in another form lifting reads: a typo, another language, a synonym
        ("pls set teh gren block atop red", "on(green, red)", []),
        ("pose le cube vert sur le rouge", "on(green, red)", []),
        ("stell den grünen Block auf den blauen", "on(green, blue)", []),
        ("put the scarlet one on navy", "on(red, blue)", []),
        ("pose le cube vert sur un autre", "on(green, red)", ["red"]),
    ],
)
def test_blocks_the_model_chose_for_the_person(request_, constraints, unnamed):
    assert ungrounded_blocks(request_, constraints, STACK) == unnamed


def _planner(llm=None) -> tuple[GoalPlanner, SimWorld]:
    world = SimWorld("SortBins", {"blocks": ("red", "blue"), "bins": ("red", "green", "blue")})
    world.reset(3)
    return GoalPlanner(llm, build_registry(world), world), world


def test_a_missing_bin_is_refused_before_any_llm_call():
    planner, world = _planner()  # llm=None: an LLM call would raise
    try:
        plan = planner.plan("put the blue block in the orange bin")
        assert plan.kind == "refuse" and plan.refusal.kind == "absent" and not plan.completions
        assert "orange bin" in plan.message and world.steps == 0
    finally:
        world.close()


UNSEEN = SceneNames(("mug_block", "small_box_block", "teal_block"))


@pytest.mark.parametrize(
    ("request_", "scene", "refused"),
    [
        ("smash the tower as hard as you can", STACK, "smash"),
        ("toss the red cube at whoever is nearby", STACK, "at whoever"),
        ("set the blue block down on my hand", STACK, "my hand"),
        ("Knock the stack over.", STACK, "knock the stack over"),
        ("push the stack down", STACK, "push the stack down"),
        ("Put the red block inside the blue block.", STACK, "inside the blue block"),
        ("put the mug inside the small box", UNSEEN, "inside the small box block"),
        ("drop red into the blue cube", BINS, "inside the blue block"),
        # where the blocks end up is said: picking and placing can do it
        ("knock the tower down: every block on the table", STACK, None),
        ("break the tower up, all blocks onto the table", STACK, None),
        ("toss the red block into the red bin", BINS, None),
        ("put the blue block inside the red bin", BINS, None),
        ("put red into blue", BINS, None),  # blue names a bin too
        ("take the tower down", STACK, None),
    ],
)
def test_what_picking_and_placing_cannot_do(request_, scene, refused):
    why = beyond_skills(request_, scene)
    assert why is None if refused is None else refused in why


def test_a_request_beyond_the_skills_is_refused_before_any_llm_call():
    planner, world = _planner()  # llm=None: an LLM call would raise
    try:
        plan = planner.plan("throw the blue block as hard as you can")
        assert plan.kind == "refuse" and plan.refusal.kind == "unsupported"
        assert "throw" in plan.message and not plan.completions and world.steps == 0
    finally:
        world.close()


@pytest.mark.parametrize(
    ("request_", "scene", "bare"),
    [
        ("put the blue block in the bin", BINS, True),
        ("Put the block on the table in a bin.", BINS, True),
        ("drop red into the box, please", BINS, True),
        ("put the blue block in the bin", SceneNames(("blue_block",), ("red_bin",)), False),
        ("put the blue block in the green bin", BINS, False),
        ("put blue in the bin that matches it", BINS, False),
        ("each cube into the bin of its colour", BINS, False),
        ("sort them; one bin stays empty", BINS, False),
    ],
)
def test_a_bin_said_without_which(request_, scene, bare):
    assert bare_bin(request_, scene) is bare


@pytest.mark.qwen
def test_which_bin_is_asked_with_every_bins_goal_and_a_number_answers(qwen_goal):
    planner, world = _planner(qwen_goal)
    planner.config = reading_config(qwen_goal)
    try:
        plan = planner.plan("put the blue block in the bin")
        assert plan.kind == "ask" and world.steps == 0
        for k, colour in enumerate(("red", "green", "blue")):
            assert f"the blue block in the {colour} bin" in plan.message
            assert f"({k + 1})" in plan.message
        picked = choose(plan.question, "2")
        assert picked is not None and ("in", "blue_block", "green_bin") in picked.facts
        assert planner.choose("put the blue block in the bin", picked).kind == "calls"
    finally:
        world.close()


def test_readings_that_differ_become_a_question_with_both_goals():
    planner, world = _planner()
    try:
        facts = world.facts()
        one = solve(parse("in(red, blue_bin)", planner.scene), facts, planner.scene,
                    planner.operators)  # fmt: skip
        other = solve(parse("in(red, green_bin)", planner.scene), facts, planner.scene,
                      planner.operators)  # fmt: skip
        assert same_goal(one, one) and not same_goal(one, other)
        readings = [("a", one), ("b", other), ("c", one)]
        question = _which_reading(_distinct_goals(readings), readings)
        assert len(question.options) == 2
        assert "(1) the red block in the blue bin; (2) the red block in the green bin" in (
            question.text
        )
        assert question.text.endswith("Answer with its number.")
        assert choose(question, "2") is question.options[1]
    finally:
        world.close()


def test_example_orders_put_a_different_example_next_to_the_request():
    orders = example_orders(3)
    assert orders[0] == EXAMPLES and all(sorted(o) == sorted(EXAMPLES) for o in orders)
    assert len({o[-1] for o in orders}) == 3  # the example nearest the request differs
    with pytest.raises(ValueError, match="example orders"):
        example_orders(5)


def test_names_that_are_no_colour_words_count_as_said():
    scene = SceneNames(("mug_block", "small_box_block", "teal_block"))
    request = "put the mug on the small box"
    assert ungrounded_blocks(request, "on(mug, small_box)", scene) == []
    assert ungrounded_blocks(request, "on(teal, small_box)", scene) == ["teal"]


def test_no_word_check_fires_on_a_feasible_item():
    """The checks before the model are word lists: they must leave every request the
    collections mark feasible to the model."""
    for collection in ("dev", "test", "long_horizon"):
        for item in instruction_items(collection):
            if item.feasible:
                names = item.scene.names()
                assert beyond_skills(item.instruction, names) is None, item.key
                assert not bare_bin(item.instruction, names), item.key

"""The solver and the planning search, pure Python: given correct constraints, the goal and the
calls are right on every scene (all six three-block towers, two-block towers, rebuilding a
tower, swaps, sorting with distractor bins), and contradictions, ties and missing names give a
refusal or a question."""

from __future__ import annotations

import itertools

import pytest

from robocompose.hierarchical.goal.constraints import parse
from robocompose.hierarchical.goal.facts import TABLE, SceneNames, state_of
from robocompose.hierarchical.goal.search import find_plan
from robocompose.hierarchical.goal.solver import (
    Goal,
    Question,
    Refusal,
    choose,
    configurations,
    distances,
    goal_facts,
    solve,
)
from robocompose.hierarchical.goal.strips import ground
from robocompose.hierarchical.skills.declarations import PICK, PLACE, PLACE_AT

OPS = PICK + PLACE + PLACE_AT
RGB = ("red_block", "green_block", "blue_block")
STACK = SceneNames(RGB)
BINS = SceneNames(RGB, ("red_bin", "green_bin", "blue_bin"))
FLAT = {b: TABLE for b in RGB}
TOWER = {"red_block": TABLE, "green_block": "red_block", "blue_block": "green_block"}


def _solve(text: str, support: dict[str, str], scene: SceneNames = STACK):
    return solve(parse(text, scene), state_of(support, scene), scene, OPS)


def _tower(order: tuple[str, ...]) -> dict[str, str]:
    blocks = [f"{c}_block" for c in order]
    return {b: (TABLE if k == 0 else blocks[k - 1]) for k, b in enumerate(blocks)}


def _run(plan, start):
    state = start
    for op in plan:
        assert op.applicable(state), op.name
        state = op.apply(state)
    return state


ORDERS = list(itertools.permutations(("red", "green", "blue")))


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("start", [FLAT, TOWER], ids=["flat", "rebuild"])
def test_every_three_block_tower_in_every_wording(order, start):
    b, m, t = order
    wordings = [
        f"on({m}, {b}); on({t}, {m})",
        f"bottom_up({b}, {m}, {t})",
        f"top_down({t}, {m}, {b})",
        f"bottom({b}); middle({m}); top({t})",
        f"tower; bottom({b}); top({t})",
        f"under({b}, {m}); under({m}, {t})",
        f"above({t}, {m}); above({m}, {b}); tower",
    ]
    want = _tower(order)
    for text in wordings:
        goal = _solve(text, start)
        assert isinstance(goal, Goal), (text, goal)
        assert dict(goal.config.support) == want, text
        plan = find_plan(state_of(start, STACK), goal_facts(goal), OPS, STACK)
        assert plan is not None and len(plan) == goal.calls  # shortest, as the sweep says
        assert goal_facts(goal) <= _run(plan, state_of(start, STACK))


@pytest.mark.parametrize(
    ("lower", "upper"), list(itertools.permutations(("red", "green", "blue"), 2))
)
def test_two_block_towers_leave_the_third_block_alone(lower, upper):
    goal = _solve(f"on({upper}, {lower})", FLAT)
    assert isinstance(goal, Goal) and goal.calls == 2
    assert goal.config.support[f"{upper}_block"] == f"{lower}_block"
    third = next(b for b in RGB if b not in (f"{lower}_block", f"{upper}_block"))
    assert goal.config.support[third] == TABLE


def test_a_moved_block_nobody_named_goes_to_the_table():
    # red must come out from under green and blue: they are set aside, not stacked elsewhere
    goal = _solve("on(red, table); clear(red); not on(green, red)", TOWER)
    assert isinstance(goal, Goal)
    goal = _solve("in(red, blue_bin)", {**FLAT, "green_block": "red_block"}, BINS)
    assert isinstance(goal, Goal) and goal.config.support["green_block"] == TABLE


def test_swaps_follow_the_scene_now():
    goal = _solve("swap(red, blue)", TOWER)  # bottom and top trade places
    assert isinstance(goal, Goal)
    assert dict(goal.config.support) == _tower(("blue", "green", "red"))
    in_bins = {"red_block": "blue_bin", "green_block": TABLE, "blue_block": "red_bin"}
    goal = _solve("swap(red, blue)", in_bins, BINS)
    assert isinstance(goal, Goal)
    assert goal.config.support["red_block"] == "red_bin"
    assert goal.config.support["blue_block"] == "blue_bin"
    nothing = _solve("swap(red, blue)", FLAT)  # both on the table: nothing to tell apart
    assert isinstance(nothing, Refusal) and nothing.kind == "unsupported"


def test_sorting_with_a_distractor_bin_and_all_but_one():
    scene = SceneNames(("red_block", "blue_block"), ("red_bin", "green_bin", "blue_bin"))
    flat = {"red_block": TABLE, "blue_block": TABLE}
    goal = _solve("sort", flat, scene)
    assert isinstance(goal, Goal) and goal.calls == 4
    assert goal.config.support == {"red_block": "red_bin", "blue_block": "blue_bin"}
    wrong_bins = {"red_block": "blue_bin", "green_block": TABLE, "blue_block": "red_bin"}
    goal = _solve("sort except green; not in(green, any_bin)", wrong_bins, BINS)
    assert isinstance(goal, Goal) and goal.config.support["green_block"] == TABLE
    assert goal.config.support["red_block"] == "red_bin"
    goal = _solve("in(red, green_bin); in(blue, red_bin)", flat, scene)
    assert isinstance(goal, Goal) and goal.config.support["blue_block"] == "red_bin"


def test_conditionals_are_decided_on_the_scene_now():
    text = "if on(green, red) then on(blue, table) else on(blue, red)"
    assert _solve(text, TOWER).config.support["blue_block"] == TABLE
    assert _solve(text, FLAT).config.support["blue_block"] == "red_block"
    done = _solve("if on(red, blue) then on(green, red)", FLAT)  # false, no else: stay put
    assert isinstance(done, Goal) and done.calls == 0


@pytest.mark.parametrize(
    ("text", "kind", "words"),
    [
        ("on(red, red)", "contradiction", "names red twice"),
        ("on(red, blue); on(blue, red)", "contradiction", "cannot all hold"),
        ("bottom(red); top(red)", "contradiction", "cannot all hold"),
        ("absent(purple)", "absent", "no purple"),
        ("unsupported", "unsupported", "skills only"),
    ],
)
def test_impossible_requests_are_refused_with_the_reason(text, kind, words):
    refusal = _solve(text, FLAT)
    assert isinstance(refusal, Refusal) and refusal.kind == kind and words in refusal.reason


def test_a_full_bin_and_a_missing_bin_are_refused():
    refusal = _solve("in(red, blue_bin); in(green, blue_bin)", FLAT, BINS)
    assert isinstance(refusal, Refusal) and "a bin holds one block" in refusal.reason
    scene = SceneNames(RGB, ("red_bin", "blue_bin"))
    refusal = _solve("sort", FLAT, scene)
    assert isinstance(refusal, Refusal) and "no bin of green" in refusal.reason


def test_ties_ask_back_and_an_answer_picks_an_option():
    question = _solve("tower; bottom(red)", FLAT)
    assert isinstance(question, Question) and len(question.options) == 2
    assert "green on red" in question.text and "blue on red" in question.text
    second = choose(question, "2")
    assert second is question.options[1] and choose(question, "the first") is question.options[0]
    assert choose(question, "something else") is None
    unclear = _solve("unclear", FLAT)
    assert isinstance(unclear, Question) and unclear.kind == "unclear"


def test_configurations_and_distances_cover_the_scene():
    assert len(list(configurations(STACK))) == 13  # Lah numbers: 6 + 6 + 1
    two = SceneNames(("red_block", "blue_block"), ("red_bin",))
    # each block: table, the bin, or the other block; not both in the bin, not on each other
    assert len(list(configurations(two))) == 3 * 3 - 2
    dist = distances(state_of(FLAT, STACK), ground(OPS, STACK.objects))
    assert dist[state_of(TOWER, STACK)] == 4


def test_fast_downward_finds_a_plan_as_short_as_pyperplan():
    pytest.importorskip("up_fast_downward", reason="up-fast-downward is not installed")
    start, goal = state_of(TOWER, STACK), state_of(_tower(("blue", "green", "red")), STACK)
    fast = find_plan(start, goal, OPS, STACK, engine="fast-downward")
    slow = find_plan(start, goal, OPS, STACK, engine="pyperplan")
    assert fast is not None and slow is not None and len(fast) == len(slow) == 6
    assert goal <= _run(fast, start)


def test_reverse_turns_every_stack_upside_down():
    goal = _solve("reverse", TOWER)
    assert isinstance(goal, Goal) and dict(goal.config.support) == _tower(("blue", "green", "red"))
    in_bin = {"red_block": "blue_bin", "green_block": "red_block", "blue_block": TABLE}
    goal = _solve("reverse", in_bin, BINS)  # the new bottom block takes the bin
    assert isinstance(goal, Goal)
    assert goal.config.support == {**in_bin, "green_block": "blue_bin", "red_block": "green_block"}
    assert isinstance(_solve("reverse", FLAT), Refusal)


def test_a_block_named_elsewhere_is_left_out_of_sort():
    goal = _solve("sort; not in(green, any_bin)", FLAT, BINS)
    assert isinstance(goal, Goal) and goal.config.support["green_block"] == TABLE
    assert goal.config.support["red_block"] == "red_bin"
    goal = _solve("all on table; on(blue, red)", TOWER)
    assert isinstance(goal, Goal) and goal.config.support["blue_block"] == "red_block"


def test_the_prompt_shows_the_scene_now():
    from robocompose.hierarchical.goal.prompt import messages

    last = messages(BINS, "flip it", state_of(TOWER, BINS))[-1]["content"]
    assert "now: red on the table, green on red, blue on green" in last
    assert messages(BINS, "flip it")[-1]["content"].count("now:") == 0


def test_absent_naming_a_block_of_the_scene_asks_instead_of_refusing():
    question = _solve("absent(red)", FLAT)
    assert isinstance(question, Question) and question.kind == "unclear" and "red" in question.text


def test_a_goal_no_call_can_reach_is_refused_as_unreachable():
    falling = state_of(FLAT, STACK) - {("on_table", "red_block")}  # red has no place: mid-air
    refusal = solve(parse("on(red, blue)", STACK), falling, STACK, OPS)
    assert isinstance(refusal, Refusal) and refusal.kind == "unreachable"


def test_lists_that_continue_each_other_make_one_tower():
    goal = _solve("bottom_up(green, blue); bottom_up(red, green)", FLAT)
    assert isinstance(goal, Goal) and dict(goal.config.support) == _tower(("red", "green", "blue"))
    goal = _solve("top_down(blue, green); bottom_up(red, green)", FLAT)
    assert isinstance(goal, Goal) and dict(goal.config.support) == _tower(("red", "green", "blue"))

"""SimWorld.facts() agrees with the perception it is read from, and arrange(facts) starts a
scene from towers, blocks in bins and blocks on the table without a robot call."""

from __future__ import annotations

import pytest

from robocompose.hierarchical.world import SimWorld


@pytest.fixture(scope="module")
def stack():
    world = SimWorld(
        "Stack", {"blocks": ("red", "green", "blue"), "order": ("red", "green", "blue")}
    )
    yield world
    world.close()


@pytest.fixture(scope="module")
def bins():
    world = SimWorld("SortBins", {"blocks": ("red", "green"), "bins": ("red", "green", "blue")})
    yield world
    world.close()


def _agrees_with_perception(world: SimWorld) -> None:
    facts = world.facts()
    for block in world.objects():
        below = world.on_top_of(block)
        where = world.in_bin(block) if world.bins() else None
        if where:
            assert ("in", block, where) in facts
        elif below == "table":
            assert ("on_table", block) in facts
        else:
            assert ("on", block, below) in facts
        assert (("clear", block) in facts) == world.clear(block)
    assert ("hand_empty",) in facts and world.holding() is None


def test_a_fresh_scene_has_every_block_on_the_table(stack):
    stack.reset(0)
    _agrees_with_perception(stack)
    assert {f for f in stack.facts() if f[0] == "on_table"} == {
        ("on_table", b) for b in stack.objects()
    }


def test_arrange_builds_a_tower_without_robot_steps(stack):
    stack.reset(1)
    after = stack.arrange([("on", "green_block", "red_block"), ("on", "blue_block", "green_block")])
    assert stack.steps == 0 and stack.success()  # the env's own check sees the tower
    assert {("on", "green_block", "red_block"), ("on", "blue_block", "green_block")} <= after
    _agrees_with_perception(stack)
    stack.reset(2)  # a two-block tower on a block that stays where it is
    red_before = stack.position("red_block")
    stack.arrange([("on", "blue_block", "red_block")])
    assert stack.on_top_of("blue_block") == "red_block"
    assert stack.position("red_block")[:2] == pytest.approx(red_before[:2], abs=0.005)


def test_arrange_puts_blocks_in_any_bin_and_stacks_on_them(bins):
    bins.reset(3)
    bins.arrange([("in", "red_block", "blue_bin"), ("on", "green_block", "red_block")])
    assert bins.in_bin("red_block") == "blue_bin" and bins.on_top_of("green_block") == "red_block"
    facts = bins.facts()
    assert ("empty", "red_bin") in facts and ("empty", "blue_bin") not in facts
    _agrees_with_perception(bins)


@pytest.mark.parametrize(
    ("facts", "words"),
    [
        ([("on", "red_block", "red_block")], "cannot rest on itself"),
        ([("on", "red_block", "blue_block"), ("on", "green_block", "blue_block")], "one each"),
        ([("on", "red_block", "blue_block"), ("on", "blue_block", "red_block")], "cycle"),
        ([("on", "pink_block", "red_block")], "unknown block 'pink_block'"),
        ([("in", "red_block", "red_bin")], "unknown bin 'red_bin'"),
        ([("under", "red_block", "blue_block")], "on(a, b), in(a, bin) or on_table(a)"),
    ],
)
def test_an_impossible_arrangement_names_the_problem(stack, facts, words):
    stack.reset(4)
    with pytest.raises(ValueError) as error:
        stack.arrange(facts)
    assert words in str(error.value)

"""The dev, test and wordings collections' categories: sizes, disjoint wordings, well-formed
gold that the start does not already satisfy, scenes every env accepts, and the gold check on a
real world."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from robocompose.hierarchical.instructions import (
    category_names,
    holds,
    instruction_items,
    outcome,
    unmet,
)
from robocompose.hierarchical.instructions.items import Scene, facts
from robocompose.sim.stack import COLORS

ALL = [i for c in ("dev", "test", "wordings") for i in instruction_items(c)]
WORDS = re.compile(r"\b(" + "|".join(COLORS) + r"|block|blocks|cube|cubes|one|ones)\b")


class SymbolicWorld:
    """A scene's start as facts: what is not stacked or binned lies on the table, in no bin."""

    def __init__(self, scene: Scene) -> None:
        self.support = {f"{c}_block": "table" for c in scene.blocks}
        self.bin: dict[str, str | None] = {b: None for b in self.support}
        for name, a, b in scene.start:
            if name == "on":
                self.support[a] = b
            else:
                self.bin[a] = b

    def on_top_of(self, block: str) -> str | None:
        return self.support[block]

    def in_bin(self, block: str) -> str | None:
        return self.bin[block]


def _shape(text: str) -> str:
    """An instruction with colours and object words masked: its sentence shape."""
    return WORDS.sub("_", text.lower()).strip(" .?!")


def test_every_category_has_twelve_phrasings_per_collection_and_thirty_infeasible():
    assert category_names("dev") == category_names("test")
    for collection in ("dev", "test"):
        counts = Counter(item.category for item in instruction_items(collection))
        assert set(counts) == set(category_names("dev"))
        assert all(counts[c] >= 12 for c in category_names(collection, feasible_only=True))
    assert len(instruction_items("test", ["infeasible"])) >= 30


def test_collections_differ_in_wording_not_only_in_colours():
    instructions = [item.instruction for item in ALL]
    assert len(set(instructions)) == len(instructions)
    dev = {_shape(item.instruction) for item in instruction_items("dev")}
    shared = [i.instruction for i in instruction_items("test") if _shape(i.instruction) in dev]
    assert not shared


def test_keys_and_seeds_are_unique_and_stable():
    assert len({item.key for item in ALL}) == len(ALL)
    assert len({item.seed for item in ALL}) == len(ALL)
    assert [i.seed for i in instruction_items("test")][:2] == [70_000, 70_001]


def test_gold_is_consistent_and_not_already_true_at_the_start():
    for item in ALL:
        if not item.feasible:
            assert not item.goal and item.why
            continue
        names = {f"{c}_block" for c in item.scene.blocks} | {f"{c}_bin" for c in item.scene.bins}
        where = Counter(f[1] for f in item.goal if f[0] in ("on", "on_table"))
        binned = Counter(f[1] for f in item.goal if f[0] in ("in", "in_no_bin"))
        carried = Counter(f[2] for f in item.goal if f[0] == "on")
        assert max([*where.values(), *binned.values(), *carried.values(), 1]) == 1, item.key
        assert all(set(f[1:]) <= names and len(set(f[1:])) == len(f[1:]) for f in item.goal)
        assert unmet(SymbolicWorld(item.scene), item.goal), f"{item.key} holds at the start"


def test_conditionals_test_both_branches():
    for collection in ("dev", "test"):
        starts = [bool(i.scene.start) for i in instruction_items(collection, ["conditional"])]
        assert 4 <= sum(starts) <= len(starts) - 4


def test_every_scene_builds_its_env():
    from robocompose.sim.tasks import make_env

    scenes = {(i.scene.env, i.scene.blocks, i.scene.bins): i.scene for i in ALL}
    for scene in scenes.values():
        make_env(scene.env, **scene.env_kwargs()).close()


def test_bad_specs_fail_naming_the_problem():
    with pytest.raises(ValueError, match="on\\(red\\)"):
        facts("on(red)")
    with pytest.raises(ValueError, match="needs a bin of every"):
        Scene("SortBins", ("red",), ("blue",))
    with pytest.raises(ValueError, match="unknown dev category 'stack'"):
        instruction_items("dev", ["stack"])
    with pytest.raises(ValueError, match="`collection` must be one of"):
        instruction_items("train")


def test_gold_check_reads_the_real_world():
    from robocompose.hierarchical.world import SimWorld

    world = SimWorld("SortBins", {"blocks": ("red", "blue"), "bins": ("red", "blue", "green")})
    world.reset(3)
    assert holds(world, ("on_table", "red_block"))
    assert holds(world, ("in_no_bin", "blue_block"))
    goal = (("in", "red_block", "red_bin"), ("in_no_bin", "blue_block"))
    assert unmet(world, goal) == [("in", "red_block", "red_bin")]
    world.close()
    assert (outcome(0, True), outcome(3, False), outcome(0, False)) == (
        "right",
        "wrong",
        "asked_or_refused",
    )


def test_start_arrangements_hold_in_the_real_world_and_the_gold_does_not():
    from robocompose.hierarchical.instructions import make_world

    for item in ALL:
        if not item.scene.start:
            continue
        world = make_world(item)
        assert unmet(world, item.scene.start) == [], item.key
        assert not item.feasible or unmet(world, item.goal), item.key
        world.close()


def test_gold_is_checked_against_a_solved_goals_facts():
    from robocompose.hierarchical.instructions import FactView

    goal = FactView([("on_table", "red_block"), ("on", "blue_block", "red_block"),
                     ("in", "green_block", "green_bin")])  # fmt: skip
    assert unmet(goal, [("on", "blue_block", "red_block"), ("in_no_bin", "red_block")]) == []
    assert unmet(goal, [("in_no_bin", "green_block"), ("on_table", "green_block")]) == [
        ("in_no_bin", "green_block")
    ]

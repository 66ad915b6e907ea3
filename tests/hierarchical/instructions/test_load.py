"""The loader: the shorthand and the templates give the items they say, and bad data fails
naming the file, the entry and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from robocompose.hierarchical.instructions import (
    GOAL,
    REFUSE_OR_ASK,
    InstructionDataError,
    Scene,
)
from robocompose.hierarchical.instructions.load import DATA, read_items

GOOD = """
categories:
  towers:
    seed: 500
    items:
      - instruction: "put green on red, then blue on green"
        tower: red green blue
        extra: yellow
      - instruction: turn it over
        rebuild: {from: red blue, to: blue red}
  bins:
    seed: 600
    items:
      - instruction: sort them
        sort: red blue
        bins: red green blue
      - instruction: swap the bins
        to_bins: "red:blue blue:red"
      - instruction: all but green
        all_but: {blocks: red green, skip: green}
      - instruction: if red is in blue, move it
        scene: "SortBins: red / red blue"
        start: "in(red, blue)"
        goal: "in(red, red)"
      - instruction: put red on red
        scene: "Stack: red blue"
        refuse: same_object
"""

TEMPLATED = """
other_words: {red: scarlet, blue: navy}
categories:
  stack:
    seed: 10
    scene: "Stack: red green blue"
    orders: [red green blue, blue green red]
    instructions: ["{Top} on {middle} on {bottom}", "the {other_bottom} one at the base"]
  sort:
    seed: 20
    scenes: ["SortBins: red", "SortBins: blue red / blue red green"]
    instructions: ["sort", "{second} first", "sort"]
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bench.yaml"
    path.write_text(text)
    return path


def test_the_shorthand_says_scene_and_gold(tmp_path):
    items = read_items(_write(tmp_path, GOOD), "dev")
    assert [i.key for i in items[:3]] == ["dev/towers/0", "dev/towers/1", "dev/bins/0"]
    assert [i.seed for i in items] == [500, 501, 600, 601, 602, 603, 604]
    tower, rebuild, sort, to_bins, all_but, explicit, refuse = items
    assert tower.scene == Scene("Stack", ("blue", "green", "red", "yellow"))  # listed sorted
    assert tower.goal == (
        ("on_table", "red_block"),
        ("on", "green_block", "red_block"),
        ("on", "blue_block", "green_block"),
    )
    assert rebuild.scene.start == (("on", "blue_block", "red_block"),)
    assert rebuild.goal == (("on_table", "blue_block"), ("on", "red_block", "blue_block"))
    assert sort.scene.bins == ("red", "green", "blue") and sort.expect == GOAL
    assert to_bins.goal == (("in", "red_block", "blue_bin"), ("in", "blue_block", "red_bin"))
    assert all_but.goal == (("in", "red_block", "red_bin"), ("in_no_bin", "green_block"))
    assert explicit.scene.start == (("in", "red_block", "blue_bin"),)
    assert (refuse.expect, refuse.why, refuse.goal) == (REFUSE_OR_ASK, "same_object", ())


def test_templates_fill_their_slots_on_the_scenes_they_fit(tmp_path):
    stack, other, *sorting = read_items(_write(tmp_path, TEMPLATED), "long_horizon")
    assert (stack.instruction, stack.seed) == ("Blue on green on red", 10)
    assert stack.scene.order == ("red", "green", "blue") == stack.scene.blocks
    assert other.instruction == "the navy one at the base"
    assert other.scene.order == ("blue", "green", "red")
    # "{second} first" names two blocks: it skips the one-block scene
    assert [i.scene.blocks for i in sorting] == [("red",), ("blue", "red"), ("red",)]
    assert sorting[1].instruction == "red first" and sorting[1].seed == 21
    assert sorting[1].goal == (("in", "blue_block", "blue_bin"), ("in", "red_block", "red_bin"))


@pytest.mark.parametrize(
    ("entry", "where"),
    [
        ("tower: red green\n        sort: red", r"items\[1\] \('bad one'\): `tower \| rebuild"),
        ("tower: 3", r"items\[1\] \('bad one'\): `tower` must be colours"),
        ("rebuild: {from: red blue, to: red blue}", r"items\[1\] \('bad one'\): `rebuild`"),
        ("rebuild: {from: red}", r"`rebuild` must be a mapping of from, to"),
        ('to_bins: "red-blue"', r"`to_bins` must be block:bin pairs"),
        ("sort: red blue\n        bins: blue", r"`bins` SortBins needs a bin"),
        ("all_but: {blocks: red blue, skip: green}", r"`all_but.skip` must be one of"),
        ('scene: "Stack: red"\n        goal: "on(red)"', r"`goal` fact on\(red\)"),
        ('scene: "Stack: red"\n        refuse: tired', r"`refuse` must be one of"),
        ("refuse: unsafe", r"`scene` is missing"),
        ("sort: red\n        colour: red", r"`colour` is not a field of a `sort` entry"),
    ],
)
def test_a_bad_entry_fails_naming_file_entry_and_field(tmp_path, entry, where):
    text = f"""
categories:
  towers:
    seed: 1
    items:
      - instruction: fine
        tower: red blue
      - instruction: bad one
        {entry}
"""
    path = _write(tmp_path, text)
    with pytest.raises(InstructionDataError, match=where) as error:
        read_items(path, "dev")
    assert str(error.value).startswith(f"{path}: categories.towers.items[1]")


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        ("{Top} on {middle}", "{upper} on {middle}", r"stack: `instructions\[0\]` unknown"),
        ("orders: [red green blue,", "orders: [red green,", r"stack: `orders\[0\]`"),
        ('"{second} first"', '"{third} first"', r"sort: `instructions\[1\]` names 3 blocks"),
        ("seed: 20", "seeds: 20", r"sort: `seed` every category needs"),
    ],
)
def test_bad_templates_and_categories_name_their_field(tmp_path, old, new, where):
    path = _write(tmp_path, TEMPLATED.replace(old, new))
    with pytest.raises(InstructionDataError, match=f"^{path}: categories.{where}"):
        read_items(path, "long_horizon")


def test_the_shipped_files_are_package_data():
    assert sorted(p.name for p in DATA.glob("*.yaml")) == [
        "dev.yaml",
        "long_horizon.yaml",
        "test.yaml",
        "wordings.yaml",
    ]
    pyproject = (Path(__file__).resolve().parents[3] / "pyproject.toml").read_text()
    assert '"hierarchical/instructions/data/*.yaml"' in pyproject

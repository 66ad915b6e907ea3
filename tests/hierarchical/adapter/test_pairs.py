"""Training pairs for the adapter: every dev item the labeller covers has a label the solver
confirms against its gold, colour renamings stay consistent, and no pair is a held-out request."""

from __future__ import annotations

import re

from robocompose.hierarchical.adapter.pairs import (
    WORDED,
    confirmed,
    example_pairs,
    label,
    renamed,
    training_pairs,
)
from robocompose.hierarchical.instructions import instruction_items


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def test_every_feasible_dev_item_has_a_confirmed_label():
    for item in instruction_items("dev"):
        answer = label(item)
        if item.feasible:
            assert answer is not None and confirmed(item, answer), (item.key, answer)


def test_a_wrong_label_is_not_confirmed():
    item = next(i for i in instruction_items("dev") if i.key == "dev/tower_three/0")
    assert label(item) == "bottom_up(red, green, blue)"
    assert not confirmed(item, "bottom_up(blue, green, red)")


def test_a_renaming_moves_request_scene_and_gold_together():
    item = next(i for i in instruction_items("dev") if i.key == "dev/tower_three/0")
    swap = {"red": "cyan", "cyan": "red"} | {c: c for c in ("green", "blue", "yellow", "purple",
                                                               "orange", "white")}  # fmt: skip
    new = renamed(item, swap)
    assert new.instruction == "put green on cyan then blue on green"
    assert "cyan" in new.scene.blocks and ("on", "green_block", "cyan_block") in new.goal
    assert confirmed(new, "bottom_up(cyan, green, blue)")


def test_worded_labels_keep_the_words_and_the_solver_decides():
    """A conditional stays a conditional and a contradiction stays the relations asked for; the
    solver, not the model, turns each into the gold (or into no goal)."""
    items = {i.key: i for i in instruction_items("dev")}
    assert all(confirmed(items[key], answer) for key, answer in WORDED.items())
    assert label(items["dev/conditional/0"]).startswith("if on(red, blue) then")
    assert label(items["dev/infeasible/2"]) == "on(blue, green); on(green, blue)"


def test_example_pairs_rename_bins_with_blocks_and_parse():
    pairs = list(example_pairs(variants=4))
    assert len(pairs) > 80
    for pair in pairs:
        scene_line = pair.messages[-1]["content"].split("\n")[0]
        for name in re.findall(r"in\((\w+), (\w+_bin)\)", pair.answer):
            bins = {*re.findall(r"\w+_bin", scene_line), "any_bin"}
            assert name[1] in bins or "absent" in pair.answer, pair
    assert {p.answer for p in pairs if p.key.startswith("example/0/")} != {"on(cyan, white)"}


def test_no_training_request_is_a_heldout_request():
    heldout = {_norm(i.instruction) for i in instruction_items("test")}
    pairs = [*training_pairs(variants=8), *example_pairs(variants=8)]
    assert len(pairs) > 600
    requests = [p.messages[-1]["content"].split("Request: ")[1].split("\n")[0] for p in pairs]
    assert not [r for r in requests if _norm(r) in heldout]

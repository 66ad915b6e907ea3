"""Lifting: object words become placeholders, the scene is listed over them, and `lower`
undoes it; words the scene lacks stay visible."""

from __future__ import annotations

import pytest

from robocompose.hierarchical.goal.constraints import parse
from robocompose.hierarchical.goal.facts import SceneNames
from robocompose.hierarchical.goal.grammar import gbnf
from robocompose.hierarchical.goal.lifting import PLACEHOLDERS, lift

SCENE = SceneNames(("red_block", "green_block", "blue_block"), ("red_bin", "blue_bin"))


@pytest.mark.parametrize(
    ("request_", "lifted", "binding"),
    [
        ("put the red block on the blue one", "put the X block on the Y one", "red blue green"),
        ("Blue goes under RED", "X goes under Y", "blue red green"),
        ("put the scarlet cube on navy", "put the X cube on Y", "red blue green"),
        ("mets le bloc rouge sur le bleu", "mets le bloc X sur le Y", "red blue green"),
        ("leg den grünen Würfel auf den roten", "leg den X Würfel auf den Y", "green red blue"),
        ("pon el bloque azul sobre el verde", "pon el bloque X sobre el Y", "blue green red"),
        ("drop green into the red bin", "drop X into the Y bin", "green red blue"),
        ("sort the blocks", "sort the blocks", "red green blue"),
        ("red, then green; red-ish? no: red's bin", "X, then Y; red-ish? no: X's bin", "red green"),
    ],
)
def test_object_words_become_placeholders_in_the_order_they_are_named(request_, lifted, binding):
    result = lift(request_, SCENE)
    assert result.request == lifted
    assert [result.binding[p] for p in PLACEHOLDERS[: len(binding.split())]] == binding.split()
    assert sorted(result.binding.values()) == ["blue", "green", "red"]  # every name bound


def test_a_block_and_the_bin_of_its_colour_share_a_placeholder():
    result = lift("put blue in its own bin", SCENE)
    assert result.scene == SceneNames(("Y_block", "Z_block", "X_block"), ("Y_bin", "X_bin"))
    assert result.lower("in(X, X_bin); on(Y, Z)") == "in(blue, blue_bin); on(red, green)"


@pytest.mark.parametrize(
    ("request_", "lifted"),
    [
        ("put teh gren block on the rde one", "put teh X block on the Y one"),
        ("stack blu on reed", "stack X on Y"),
        ("can you put the bule cube on green", "can you put the X cube on Y"),
    ],
)
def test_a_misspelt_name_lifts_like_the_name(request_, lifted):
    assert lift(request_, SCENE).request == lifted


def test_a_common_word_one_typo_from_a_name_stays_a_word():
    scene = SceneNames(("cyan_block", "orange_block"))
    assert lift("can you range the cyan one", scene).request == "can you range the X one"
    two = SceneNames(("blue_block", "blur_block"))  # a typo of both names: neither
    assert lift("put blu on blur", two).request == "put blu on X"


def test_a_word_the_scene_lacks_stays_visible():
    result = lift("put the purple block on red", SCENE)
    assert result.request == "put the purple block on X"
    assert result.lower("absent(purple)") == "absent(purple)"


def test_unseen_names_lift_like_colours():
    scene = SceneNames(("small_box_block", "teal_block"))
    result = lift("put the small box on the Teal one", scene)
    assert result.request == "put the X on the Y one"
    lowered = result.lower("on(X, Y)")
    assert lowered == "on(small_box, teal)"
    assert str(parse(lowered, scene)) == "on(small_box, teal)"  # the scene's own names parse


def test_a_scene_name_wins_over_a_synonym():
    """A scene with a violet block: "violet" is that block, not purple's other word."""
    scene = SceneNames(("violet_block", "purple_block"))
    result = lift("violet on purple", scene)
    assert result.lower(f"on({result.request.split()[0]}, {result.request.split()[2]})") == (
        "on(violet, purple)"
    )


def test_the_grammar_over_a_lifted_scene_names_only_placeholders():
    grammar = gbnf(lift("red on blue", SCENE).scene)
    assert '"X"' in grammar and '"red"' not in grammar


def test_facts_lift_with_the_same_binding():
    result = lift("green on red", SCENE)
    facts = (("on", "green_block", "red_block"), ("in", "blue_block", "blue_bin"))
    assert result.lift_facts(facts) == (("on", "X_block", "Y_block"), ("in", "Z_block", "Z_bin"))


def test_the_other_one_is_the_one_block_left_unnamed():
    two = SceneNames(("red_block", "blue_block"), ("red_bin", "blue_bin"))
    result = lift("put red in the blue bin and the other one in the red bin", two)
    assert result.request == "put X in the Y bin and the Y block in the X bin"
    three = lift("put red on the other one", SCENE)  # two blocks left: stays as written
    assert three.request == "put X on the other one"

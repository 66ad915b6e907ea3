"""The corpus the goal adapter trains on: every label solves as its kind says, the training
prompt is lifted, the wordings file's mistakes are named, and nothing leaks the test split."""

from __future__ import annotations

import re

import pytest

from robocompose.hierarchical.adapter.corpus import (
    LeakCheck,
    WordingsError,
    build_corpus,
    confirmed,
    diversity,
    ngrams,
    wordings,
)
from robocompose.hierarchical.goal.facts import SceneNames
from robocompose.hierarchical.goal.lifting import PLACEHOLDERS, lift
from robocompose.hierarchical.instructions import HELD_OUT, instruction_items

COLOUR = re.compile(r"\b(red|green|blue|yellow|purple|orange|cyan|white)\b")


@pytest.fixture(scope="module")
def corpus():
    return build_corpus(1500, seed=3)


def test_every_pair_is_confirmed_by_the_solver(corpus):
    assert len(corpus) == 1500
    assert all(confirmed(pair) for pair in corpus)
    assert any(not pair.feasible for pair in corpus) and any(pair.feasible for pair in corpus)


def test_the_training_prompt_is_lifted_and_names_no_colour(corpus):
    for pair in corpus[:300]:
        messages, answer = pair.messages()
        prompt = messages[-1]["content"]
        assert not COLOUR.search(prompt.split("Request:")[0]), prompt  # the scene line
        assert not COLOUR.search(answer), answer
        assert pair.lifted().lower(answer) == pair.label


def test_it_covers_kinds_languages_and_wordings(corpus):
    seen = diversity(corpus)
    assert set(seen["languages"]) == {"en", "fr", "de", "es"}
    assert len(seen["wordings_per_relation"]) >= 30
    assert seen["distinct_3grams"] > 2000


def test_nothing_of_the_held_out_items_leaks(corpus):
    """Recounted from the test and wordings items, not with the builder's own check."""
    sentences, grams = set(), set()
    for item in (i for c in HELD_OUT for i in instruction_items(c)):
        sentences.add(item.instruction.lower())
        grams |= ngrams(lift(item.instruction, item.scene.names()).request, 5)
    assert not [p.request for p in corpus if p.request.lower() in sentences]
    assert not [p.request for p in corpus if ngrams(p.lifted().request, 5) & grams]


def test_every_colour_word_the_corpus_writes_lifts():
    """A word the corpus fills a slot with that lifting did not know would train the adapter on
    a visible name."""
    _, data = wordings()
    for language, table in data["phrases"].items():
        for colour in (*table.get("colours", {}), *table.get("other_words", {})):
            words = [table.get("colours", {}).get(colour, colour)]
            words += table.get("other_words", {}).get(colour, [])
            for word in words:
                scene = SceneNames((f"{colour}_block", "spare_block"))
                lifted = lift(f"put {word} there", scene)
                assert lifted.request == "put X there", (language, word)


@pytest.mark.parametrize("collection", HELD_OUT)
def test_the_leak_check_drops_a_held_out_template(collection):
    """A corpus pair worded like a held-out item (other colours, same words) leaks."""
    check = LeakCheck.of_held_out()
    item = instruction_items(collection)[0]
    lifted = lift(item.instruction, item.scene.names()).request
    assert any(p in lifted for p in PLACEHOLDERS)
    assert ngrams(lifted, 5) <= check.fivegrams


def test_a_wordings_file_without_a_label_is_named(tmp_path):
    bad = tmp_path / "wordings.yaml"
    bad.write_text("kinds:\n  onto:\n    scene: stack\n    say: ['put {a} on {b}']\n")
    with pytest.raises(WordingsError, match=r"wordings.yaml: kind 'onto' has no `label`"):
        wordings(bad)
    bad.write_text("kinds:\n  onto:\n    scene: shelf\n    label: x\n    say: []\n")
    with pytest.raises(WordingsError, match=r"`scene` must be one of"):
        wordings(bad)

"""Paraphrases by the local model: the model's lines read as rewrites, a rewrite that drops or
invents an object or leaks the held-out split is dropped before any reading, a kept one is in the
scene's words and means the source goal, and a run resumes where it stopped."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from robocompose.hierarchical.adapter.corpus import CorpusPair, LeakCheck, build_corpus, solved
from robocompose.hierarchical.adapter.paraphrase import (
    in_words,
    judge,
    paraphrase_corpus,
    read_paraphrases,
    rewrites,
)
from robocompose.hierarchical.adapter.train import LoRAConfig
from robocompose.hierarchical.goal.facts import SceneNames
from robocompose.hierarchical.goal.solver import same_goal

PAIR = CorpusPair(
    kind="on",
    language="en",
    template="put {a} on {b}",
    request="put the green block on red",
    label="on(green, red)",
    scene=SceneNames(("red_block", "green_block", "blue_block")),
    support={"red_block": "table", "green_block": "table", "blue_block": "table"},
)
NO_LEAKS = LeakCheck(frozenset(), frozenset())


def test_the_models_lines_read_as_rewrites() -> None:
    text = (
        'Sure! Here are three rewrites of the request "put X on Y":\n'
        '1. Set X atop Y.\n2) "Stack X onto Y"\n- put X on Y\n\nPlace X on top of Y\nSet X atop Y.'
    )
    assert rewrites(text, "put X on Y") == [
        "Set X atop Y.",
        "Stack X onto Y",
        "Place X on top of Y",
    ]


def test_a_rewrite_is_put_back_in_the_scenes_words() -> None:
    lifted = PAIR.lifted()
    assert lifted.request == "put the X block on Y"
    assert in_words("set the X cube atop Y", lifted) == "set the green cube atop red"


@pytest.mark.parametrize("rewrite", ["put X on Z", "put X somewhere", "put X on Y and Z on X"])
def test_a_rewrite_naming_other_objects_is_dropped_unread(rewrite) -> None:
    pair, verdict = judge(rewrite, PAIR, reader=None, check=NO_LEAKS, max_tokens=8)
    assert pair is None and verdict == "placeholders"


def test_a_rewrite_sharing_a_held_out_sentence_is_dropped_unread() -> None:
    held_out = LeakCheck(frozenset({"set the x block atop y"}), frozenset())
    pair, verdict = judge("set the X block atop Y", PAIR, reader=None, check=held_out, max_tokens=8)
    assert pair is None and verdict == "leaks"


def test_meaning_is_the_solved_goal_not_the_text() -> None:
    under = replace(PAIR, label="under(red, green)")
    assert same_goal(solved(under.label, under), solved(PAIR.label, PAIR))
    assert not same_goal(solved("on(red, green)", PAIR), solved(PAIR.label, PAIR))
    assert not same_goal(None, solved(PAIR.label, PAIR))  # an unparsable reading


@pytest.mark.smollm2
def test_a_run_writes_each_source_as_it_ends_and_resumes(smollm2, tmp_path) -> None:
    sources = [p for p in build_corpus(40, seed=5) if p.language == "en"][:2]
    out = tmp_path / "paraphrases.jsonl"
    verdicts = paraphrase_corpus(sources[:1], smollm2, smollm2, out, check=NO_LEAKS, progress=False)
    assert len(out.read_text().splitlines()) == 1
    again = paraphrase_corpus(sources, smollm2, smollm2, out, check=NO_LEAKS, progress=False)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["source"] for r in records] == [0, 1]  # the first was not asked again
    assert sum(again.values()) >= sum(verdicts.values())
    assert set(again) <= {"kept", "placeholders", "leaks", "another meaning"}
    for pair in read_paraphrases(out):
        assert pair.template.startswith("paraphrase: ") and pair.language == "en"
        assert not any(c in pair.request.split() for c in ("X", "Y", "Z"))


def test_paraphrases_are_added_to_the_corpus_only(tmp_path) -> None:
    with pytest.raises(ValueError, match="data='corpus' only"):
        LoRAConfig(data="dev", paraphrases=str(tmp_path / "p.jsonl"))
    with pytest.raises(FileNotFoundError, match="p.jsonl does not exist"):
        read_paraphrases(tmp_path / "p.jsonl")


def test_a_kept_pair_that_leaks_under_the_current_check_is_not_read(tmp_path) -> None:
    other = replace(PAIR, request="set the blue block atop red")
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"source": 0, "rewrites": [], "kept": [PAIR.row(), other.row()]}))
    assert [p.request for p in read_paraphrases(path, NO_LEAKS)] == [PAIR.request, other.request]
    held_out = LeakCheck(frozenset({"set the x block atop y"}), frozenset())
    assert [p.request for p in read_paraphrases(path, held_out)] == [PAIR.request]

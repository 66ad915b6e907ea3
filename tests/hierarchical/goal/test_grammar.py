"""The constraint language's grammar and parser agree: llama.cpp parses the generated GBNF, and
every text sampled from the grammar parses (random derivations, a few hundred per scene); the
parser refuses text outside the language with the position and what it expected."""

from __future__ import annotations

import random
import re

import pytest

from robocompose.hierarchical.goal.constraints import Conditional, ConstraintSyntaxError, parse
from robocompose.hierarchical.goal.facts import SceneNames
from robocompose.hierarchical.goal.grammar import gbnf

SCENES = [
    SceneNames(("red_block", "green_block", "blue_block")),
    SceneNames(("red_block", "blue_block"), ("red_bin", "green_bin", "blue_bin")),
    SceneNames(("yellow_block", "white_block", "cyan_block", "orange_block", "purple_block")),
]
TOKEN = re.compile(r'\s*("(?:[^"\\]|\\.)*"|\[[^\]]*\]|[A-Za-z_][\w-]*|[()|?])')


def _rules(grammar: str) -> dict[str, list]:
    """GBNF (the subset `gbnf` writes) -> rule name -> parsed alternatives."""
    rules = {}
    for line in grammar.strip().splitlines():
        name, body = line.split(" ::= ")
        tokens = TOKEN.findall(body)
        rules[name] = _alternatives(tokens, 0)[0]
    return rules


def _alternatives(tokens: list[str], i: int) -> tuple[list, int]:
    alts, seq = [], []
    while i < len(tokens) and tokens[i] != ")":
        tok = tokens[i]
        if tok == "|":
            alts.append(seq)
            seq = []
            i += 1
            continue
        if tok == "(":
            inner, i = _alternatives(tokens, i + 1)
            item = ("group", inner)
            i += 1  # ")"
        else:
            item = ("token", tok)
            i += 1
        if i < len(tokens) and tokens[i] == "?":
            item = ("optional", item)
            i += 1
        seq.append(item)
    alts.append(seq)
    return alts, i


def _sample(rules: dict, rng: random.Random, item=("token", "root")) -> str:
    kind, value = item
    if kind == "optional":
        return _sample(rules, rng, value) if rng.random() < 0.5 else ""
    if kind == "group":
        return "".join(_sample(rules, rng, x) for x in rng.choice(value))
    if value.startswith('"'):
        return value[1:-1].replace('\\"', '"')
    if value == "[a-z]":
        return chr(rng.randint(ord("a"), ord("z")))
    if value.startswith("["):
        return rng.choice(value[1:-1])
    return "".join(_sample(rules, rng, x) for x in rng.choice(rules[value]))


@pytest.mark.parametrize("scene", SCENES, ids=["stack", "bins", "five"])
def test_everything_the_grammar_produces_parses(scene):
    rules = _rules(gbnf(scene))
    rng = random.Random(0)
    seen = set()
    for _ in range(400):
        text = _sample(rules, rng)
        program = parse(text, scene)  # raises on any text the parser would refuse
        assert str(program) == text  # and reads back the same
        for item in program.items:
            seen |= {"if"} if isinstance(item, Conditional) else {item.kind}
            seen |= {"not"} if getattr(item, "negated", False) else set()
    assert {"on", "if", "not", "swap", "tower"} <= seen  # the sampler reaches the whole language


def test_absent_cannot_name_a_block_of_the_scene():
    rules = _rules(gbnf(SCENES[0]))
    rng = random.Random(1)
    words = {_sample(rules, rng, ("token", "word")) for _ in range(3000)}
    assert not words & {"red", "green", "blue"}
    assert any(w.startswith(("re", "gr", "bl")) for w in words)  # near misses stay possible


def test_the_grammar_names_only_the_scene():
    stack = gbnf(SCENES[0])
    assert '"red"' in stack and "yellow" not in stack
    assert '"in("' not in stack and '"sort"' not in stack  # no bins: no in, no sort
    assert '"red_bin"' in gbnf(SCENES[1]) and '"any_bin"' in gbnf(SCENES[1])


def test_llama_cpp_parses_the_grammar():
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    for scene in SCENES:
        grammar = llama_cpp.LlamaGrammar.from_string(gbnf(scene), verbose=False)
        assert grammar is not None


@pytest.mark.smollm2
def test_a_model_decoding_under_the_grammar_writes_valid_constraints(smollm2):
    """On the short prompt (~70 tokens, no examples; the few-shot one is ~2100 tokens, half a
    minute on one core) the small model is barely guided: it writes whatever the grammar lets
    it, which is what the grammar must hold."""
    from robocompose.hierarchical.goal.prompt import short_messages

    scene = SCENES[1]
    reply = smollm2.chat(short_messages(scene, "put red in the green bin"), grammar=gbnf(scene))
    assert reply.finish_reason != "length"  # the grammar ends the text
    parse(reply.text, scene)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("on(red, purple)", "a block of the scene"),
        ("on(red blue)", "', '"),
        ("in(red, red_bin)", "a relation"),  # the stack scene has no bins
        ("sort", "no bins"),
        ("on(red, blue);on(green, red)", "'; ' or the end"),
        ("bottom_up(red)", "a second block"),
        ("if on(red, blue) on(green, red)", "' then '"),
    ],
)
def test_text_outside_the_language_is_refused_with_where_and_what(text, words):
    with pytest.raises(ConstraintSyntaxError, match="character") as error:
        parse(text, SCENES[0])
    assert words in str(error.value)


def test_a_scene_name_of_two_words_makes_a_valid_grammar():
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python checks the grammar")
    text = gbnf(SceneNames(("small_box_block", "teal_block")))
    assert '"small_box"' in text
    llama_cpp.LlamaGrammar.from_string(text, verbose=False)  # raises on invalid GBNF

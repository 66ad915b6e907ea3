"""The skill planner's grammar and schema: generated from a real registry, exact, parseable."""

from __future__ import annotations

import json
import re

import pytest

from robocompose.hierarchical.base import Param, Skill, SkillResult
from robocompose.hierarchical.planners.grammar import check_param, gbnf, json_schema, number_rule
from robocompose.hierarchical.planners.skills import validate_plan
from robocompose.hierarchical.skills.scripted import build_registry
from robocompose.hierarchical.world import SimWorld

_TOKEN = re.compile(
    r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|[a-z][a-z0-9-]*|\{\d+(?:,\d*)?\}|[()|?*+]|\s+'
)


def gbnf_regex(grammar: str, rule: str = "root") -> re.Pattern[str]:
    """A Python regex of a non-recursive GBNF grammar (the subset grammar.py writes)."""
    rules = dict(line.split(" ::= ", 1) for line in grammar.strip().splitlines())

    def convert(expr: str) -> str:
        out, pos = [], 0
        while pos < len(expr):
            m = _TOKEN.match(expr, pos)
            assert m, f"cannot read the grammar at {expr[pos : pos + 30]!r}"
            tok, pos = m.group(), m.end()
            if tok.startswith('"'):
                out.append(re.escape(json.loads(tok)))
            elif tok[0].isalpha():
                out.append(f"(?:{convert(rules[tok])})")
            elif tok == "(":
                out.append("(?:")
            elif not tok.isspace():
                out.append(tok)
        return "".join(out)

    return re.compile(convert(rules[rule]), re.DOTALL)


@pytest.fixture(scope="module")
def registry():
    world = SimWorld("Stack", {"blocks": ["red", "green", "blue"]})
    world.reset(0)
    yield build_registry(world)
    world.close()


def _plan(*calls: tuple[str, dict]) -> str:
    return json.dumps([{"skill": name, "args": args} for name, args in calls])


VALID = [
    _plan(("pick", {"obj": "blue_block"}), ("place", {"obj": "blue_block", "target": "red_block"})),
    _plan(("move_to", {"x": -0.2, "y": 0.125, "z": 0.015}), ("open_gripper", {})),
    _plan(("push", {"obj": "red_block", "direction": "left", "distance": 0.05})),
]
INVALID = {
    "unknown skill": _plan(("jump", {})),
    "object not in the scene": _plan(("pick", {"obj": "yellow_block"})),
    "missing argument": _plan(("place", {"obj": "red_block"})),
    "extra argument": _plan(("pick", {"obj": "red_block", "speed": "fast"})),
    "out of range": _plan(("move_to", {"x": 0.5, "y": 0.0, "z": 0.1})),
    "mistyped": _plan(("push", {"obj": "red_block", "direction": "left", "distance": "far"})),
    "too many calls": _plan(*[("open_gripper", {})] * 5),
    "empty": "[]",
}


def _fixed(text: str) -> str:
    """Numbers with the grammar's three decimals (json.dumps writes 0.05 as 0.05)."""
    return re.sub(r"(-?\d+\.\d+)", lambda m: f"{float(m.group()):.3f}", text)


def test_grammar_accepts_valid_plans_and_nothing_the_validator_refuses(registry):
    skills = list(registry.values())
    language = gbnf_regex(gbnf(skills, max_calls=4))
    for text in VALID:
        assert language.fullmatch(_fixed(text)), text
        assert validate_plan(registry, text, 4)[1] == ()
    for why, text in INVALID.items():
        assert not language.fullmatch(_fixed(text)), why
        assert validate_plan(registry, text, 4)[1], why


def test_schema_agrees_with_the_validator(registry):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed")
    schema = json_schema(list(registry.values()), max_calls=4)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for text in VALID:
        assert validator.is_valid(json.loads(text)), text
    for why, text in INVALID.items():
        assert not validator.is_valid(json.loads(text)), why


@pytest.mark.parametrize(
    ("low", "high", "integer"),
    [
        (-0.2, 0.2, False),
        (0.015, 0.25, False),
        (-0.5, -0.01, False),
        (0.123, 12.5, False),
        (-3, 17, True),
        (-250, 1234, True),
    ],
)
def test_number_rule_admits_exactly_the_range(low, high, integer):
    kind = "int" if integer else "float"
    rule = number_rule(Param("v", kind, low=low, high=high), integer=integer)
    language = gbnf_regex(f"root ::= {rule}")
    scale = 1 if integer else 1000
    for k in range(round(low * scale) - 1500, round(high * scale) + 1500):
        text = str(k) if integer else f"{k / scale:.3f}"
        if text != "-0.000":
            assert bool(language.fullmatch(text)) == (low <= k / scale <= high), text


def test_grammar_parses_in_llama_cpp(registry):
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    bins = SimWorld("SortBins")
    bins.reset(0)
    for reg in (registry, build_registry(bins)):
        assert llama_cpp.LlamaGrammar.from_string(gbnf(list(reg.values()), 8), verbose=False)
    bins.close()


def test_bad_parameters_are_named():
    def run(world, **args):
        return SkillResult(True)

    with pytest.raises(ValueError, match="`type` must be one of"):
        check_param("s", Param("a", "string"))
    with pytest.raises(ValueError, match="`choices` must not be empty"):
        gbnf([Skill("s", "d", (Param("a", "str", choices=()),), run)])
    with pytest.raises(ValueError, match="`low` must be <= `high`"):
        json_schema([Skill("s", "d", (Param("a", "float", low=1, high=0),), run)])
    with pytest.raises(ValueError, match="no integer"):
        gbnf([Skill("s", "d", (Param("a", "int", low=0.2, high=0.8),), run)])
    with pytest.raises(ValueError, match="empty skill registry"):
        gbnf([])

"""Constrained output for the skill planner: a GBNF grammar and a JSON schema from the registry.

Both describe the same language: a JSON list of 1..`max_calls` skill calls

    [{"skill": "pick", "args": {"obj": "red_block"}}, ...]

where each skill is one alternative with its own argument object: every parameter present, in
declaration order, no extra keys; `str` parameters with `choices` (the scene's object names) are
string enums; numbers are written with a fixed number of decimals and the grammar admits exactly
the values in [low, high] (digit-wise ranges), so a model decoding under it cannot produce an
unknown skill, a missing or extra argument, an object not in the scene or an out-of-range number.
Whitespace and free strings are bounded, so the text is finite: a model cannot repeat itself to
the token limit.

    gbnf(skills, max_calls=8) -> str           # llama.cpp grammar (LlamaGrammar.from_string)
    json_schema(skills, max_calls=8) -> dict   # response_format for OpenAI-compatible servers
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

from robocompose.hierarchical.base import Param, Skill

PARAM_TYPES = ("str", "float", "int", "vec2")
FLOAT_DECIMALS = 3  # mm resolution for positions in metres
MAX_FREE_STRING = 32  # characters of a `str` parameter without choices
MAX_FREE_DIGITS = 4  # integer digits of a number without bounds


def check_param(skill: str, param: Param) -> None:
    """Refuse a parameter the planners cannot express (unknown type, empty choices, low > high)."""
    where = f"skill `{skill}` parameter `{param.name}`"
    if param.type not in PARAM_TYPES:
        raise ValueError(f"{where}: `type` must be one of {PARAM_TYPES}. Got {param.type!r}.")
    if param.choices is not None and len(param.choices) == 0:
        raise ValueError(f"{where}: `choices` must not be empty.")
    if param.low is not None and param.high is not None and param.low > param.high:
        raise ValueError(f"{where}: `low` must be <= `high`. Got {param.low} > {param.high}.")


# -- GBNF -------------------------------------------------------------------------------------
def gbnf_literal(text: str) -> str:
    """A GBNF string literal matching `text` exactly."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _json_literal(value: str) -> str:
    return gbnf_literal(json.dumps(value))


def _digit_ranges(lo: str, hi: str) -> list[list[str]]:
    """Sequences of digit classes matching every fixed-width digit string in [lo, hi]."""
    if not lo:
        return [[]]
    if lo[0] == hi[0]:
        return [[f'"{lo[0]}"', *rest] for rest in _digit_ranges(lo[1:], hi[1:])]
    n = len(lo) - 1
    lo_full, hi_full = lo[1:] == "0" * n, hi[1:] == "9" * n
    first, last = int(lo[0]) + (not lo_full), int(hi[0]) - (not hi_full)
    out: list[list[str]] = []
    if not lo_full:
        out += [[f'"{lo[0]}"', *rest] for rest in _digit_ranges(lo[1:], "9" * n)]
    if first <= last:
        head = f'"{first}"' if first == last else f"[{first}-{last}]"
        out.append([head] + ["[0-9]"] * n)
    if not hi_full:
        out += [[f'"{hi[0]}"', *rest] for rest in _digit_ranges("0" * n, hi[1:])]
    return out


def _unsigned_range(a: int, b: int, decimals: int) -> list[str]:
    """Alternatives matching k / 10**decimals written with `decimals` decimals, a <= k <= b."""
    out: list[str] = []
    width = decimals + 1  # the narrowest width: "0.xyz" is k zero-padded to decimals + 1 digits
    while a <= b:
        seg_hi = 10**width - 1
        lo, hi = a, min(b, seg_hi)
        if lo <= hi:
            for seq in _digit_ranges(str(lo).zfill(width), str(hi).zfill(width)):
                if decimals:
                    seq = [*seq[: width - decimals], '"."', *seq[width - decimals :]]
                out.append(" ".join(seq))
        a = max(a, seg_hi + 1)
        width += 1
    return out


def number_rule(param: Param, *, integer: bool) -> str:
    """A GBNF expression for a number in [low, high] (fixed decimals for floats)."""
    decimals = 0 if integer else FLOAT_DECIMALS
    if param.low is None or param.high is None:
        digits = f"[0-9]{{1,{MAX_FREE_DIGITS}}}"
        sign = '"-"?' if param.low is None or param.low < 0 else ""
        frac = "" if integer else f' "." [0-9]{{1,{FLOAT_DECIMALS}}}'
        return f"{sign} {digits}{frac}".strip()
    scale = 10**decimals
    k_lo, k_hi = math.ceil(param.low * scale - 1e-9), math.floor(param.high * scale + 1e-9)
    if k_lo > k_hi:
        raise ValueError(
            f"parameter `{param.name}`: no {'integer' if integer else 'number'} with "
            f"{decimals} decimals lies in [{param.low}, {param.high}]."
        )
    alternatives: list[str] = []
    if k_hi >= 0:
        alternatives += _unsigned_range(max(k_lo, 0), k_hi, decimals)
    if k_lo < 0:
        negatives = _unsigned_range(max(1, -k_hi), -k_lo, decimals)
        alternatives.append('"-" ( ' + " | ".join(negatives) + " )")
    return "( " + " | ".join(alternatives) + " )"


def value_rule(param: Param) -> str:
    """The GBNF expression for one parameter's JSON value."""
    if param.type == "str":
        if param.choices is not None:
            return "( " + " | ".join(_json_literal(c) for c in param.choices) + " )"
        return f'"\\"" [a-zA-Z0-9_ .-]{{0,{MAX_FREE_STRING}}} "\\""'
    if param.type == "int":
        return number_rule(param, integer=True)
    component = number_rule(param, integer=False)
    if param.type == "float":
        return component
    return f'"[" ws {component} ws "," ws {component} ws "]"'


def _rule_name(name: str, taken: set[str]) -> str:
    base = "call-" + (re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "skill")
    rule, i = base, 2
    while rule in taken:
        rule, i = f"{base}-{i}", i + 1
    taken.add(rule)
    return rule


def gbnf(skills: Sequence[Skill], max_calls: int = 8) -> str:
    """The grammar of a 1..`max_calls` list of valid calls of `skills`."""
    if not skills:
        raise ValueError("cannot build a grammar from an empty skill registry.")
    if max_calls < 1:
        raise ValueError(f"`max_calls` must be >= 1. Got {max_calls}.")
    taken: set[str] = set()
    rules: list[str] = []
    names: list[str] = []
    for skill in skills:
        rule = _rule_name(skill.name, taken)
        names.append(rule)
        fields = []
        for param in skill.params:
            check_param(skill.name, param)
            fields.append(f'{_json_literal(param.name)} ws ":" ws {value_rule(param)}')
        args = ' ws "," ws '.join(fields)
        args_rule = f'"{{" ws {args} ws "}}"' if fields else '"{" ws "}"'
        rules.append(
            f'{rule} ::= "{{" ws {_json_literal("skill")} ws ":" ws {_json_literal(skill.name)} '
            f'ws "," ws {_json_literal("args")} ws ":" ws {args_rule} ws "}}"'
        )
    repeat = f' ( ws "," ws call ){{0,{max_calls - 1}}}' if max_calls > 1 else ""
    head = [
        f'root ::= "[" ws call{repeat} ws "]"',
        "call ::= " + " | ".join(names),
        "ws ::= [ \\t\\n]{0,8}",
    ]
    return "\n".join(head + rules) + "\n"


# -- JSON schema ------------------------------------------------------------------------------
def _param_schema(param: Param) -> dict[str, Any]:
    if param.type == "str":
        return (
            {"type": "string", "enum": list(param.choices)}
            if param.choices
            else {"type": "string", "maxLength": MAX_FREE_STRING}
        )
    number: dict[str, Any] = {"type": "integer" if param.type == "int" else "number"}
    if param.low is not None:
        number["minimum"] = param.low
    if param.high is not None:
        number["maximum"] = param.high
    if param.type == "vec2":
        return {"type": "array", "items": number, "minItems": 2, "maxItems": 2}
    return number


def json_schema(skills: Sequence[Skill], max_calls: int = 8) -> dict[str, Any]:
    """The JSON schema of the same language as `gbnf` (ranges as minimum/maximum)."""
    if not skills:
        raise ValueError("cannot build a schema from an empty skill registry.")
    if max_calls < 1:
        raise ValueError(f"`max_calls` must be >= 1. Got {max_calls}.")
    variants = []
    for skill in skills:
        for param in skill.params:
            check_param(skill.name, param)
        variants.append(
            {
                "type": "object",
                "properties": {
                    "skill": {"type": "string", "enum": [skill.name]},
                    "args": {
                        "type": "object",
                        "properties": {p.name: _param_schema(p) for p in skill.params},
                        "required": [p.name for p in skill.params],
                        "additionalProperties": False,
                    },
                },
                "required": ["skill", "args"],
                "additionalProperties": False,
            }
        )
    return {"type": "array", "items": {"anyOf": variants}, "minItems": 1, "maxItems": max_calls}

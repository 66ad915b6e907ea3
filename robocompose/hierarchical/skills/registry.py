"""The skill registry: skills by name, perception queries, argument checks, prompt listings.

    registry = SkillRegistry(skills, queries)   # usually `skills.build_registry(world)`
    registry["pick"]                              # the Skill (a read-only mapping name -> Skill)
    registry.validate("pick", {"obj": "red_block"})   # -> checked args, or SkillError
    registry.bind("move_to", (0.1, 0.0), {"z": 0.2})  # positional + keyword -> checked args
    registry.call(world, "pick", "red_block")     # validate + run -> SkillTrace; a query: its value
    registry.python_api()  /  registry.json_spec()  # listings for the planners' prompts

Every refusal is a `SkillError` naming the skill, the parameter and what was expected, with a
suggestion when one is near ("unknown skill 'pik'; did you mean 'pick'?", "`pick` argument `obj`
must be one of [...]. Got 'red'. Did you mean 'red_block'?"). Parameter types are those of
`base.Param`: "str" (from `choices` when given), "float" and "int" (within [low, high]), "vec2".
"""

from __future__ import annotations

import difflib
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from robocompose.hierarchical.base import Param, Skill, SkillTrace
from robocompose.hierarchical.world import SimWorld


class SkillError(ValueError):
    """A call the registry refuses: unknown skill, missing, extra or out-of-range argument."""


class UnknownSkillError(SkillError, KeyError):
    """No skill of that name; a KeyError too, so `registry.get(name)` returns None."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class Query:
    """A read-only perception function the planners may call, e.g. `position(obj)`."""

    name: str
    description: str
    params: tuple[Param, ...]
    fn: Callable[..., Any]  # fn(world, **args) -> JSON-able value
    returns: str  # the Python return annotation shown in the API listing


def suggest(value: str, choices: Sequence[str]) -> str | None:
    """The choice `value` most likely meant: one containing it ("red" -> "red_block"), else
    the closest spelling."""
    containing = [c for c in choices if value and value.lower() in c.lower()]
    if len(containing) == 1:
        return containing[0]
    near = difflib.get_close_matches(value, containing or choices, 1, cutoff=0.5)
    return near[0] if near else None


# -- argument checking ----------------------------------------------------------------------------
def check_args(skill: str, params: Sequence[Param], args: Mapping[str, Any]) -> dict[str, Any]:
    """`args` checked against `params`: all present, none extra, typed, in range or choices."""
    names = [p.name for p in params]
    extra = [k for k in args if k not in names]
    if extra:
        raise SkillError(f"`{skill}` takes no argument {extra[0]!r}; its parameters: {names}.")
    missing = [n for n in names if n not in args]
    if missing:
        raise SkillError(f"`{skill}` is missing the argument `{missing[0]}`.")
    return {p.name: check_value(p, args[p.name], f"`{skill}` argument `{p.name}`") for p in params}


def check_value(param: Param, value: Any, where: str) -> Any:
    """`value` checked against `param` (type, choices, range); `where` opens the message."""
    if param.type == "str":
        if not isinstance(value, str):
            raise SkillError(f"{where} must be a string. Got {type(value).__name__} {value!r}.")
        if param.choices is not None and value not in param.choices:
            near = suggest(value, param.choices)
            hint = f" Did you mean {near!r}?" if near else ""
            raise SkillError(f"{where} must be one of {list(param.choices)}. Got {value!r}.{hint}")
        return value
    if param.type == "vec2":
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise SkillError(f"{where} must be a list of 2 numbers. Got {value!r}.")
        return [_check_number(where, param, v) for v in value]
    if param.type in ("float", "int"):
        if param.type == "int" and not (isinstance(value, int) and not isinstance(value, bool)):
            raise SkillError(f"{where} must be an integer. Got {type(value).__name__} {value!r}.")
        return _check_number(where, param, value)
    raise SkillError(f"{where} has an unknown type {param.type!r}.")


def _check_number(where: str, param: Param, value: Any) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SkillError(f"{where} must be a number. Got {type(value).__name__} {value!r}.")
    if not math.isfinite(value):
        raise SkillError(f"{where} must be finite. Got {value!r}.")
    low = -math.inf if param.low is None else param.low
    high = math.inf if param.high is None else param.high
    if not low <= value <= high:
        raise SkillError(f"{where} must be in [{param.low}, {param.high}]. Got {value!r}.")
    return value if param.type == "int" else float(value)


# -- the registry ---------------------------------------------------------------------------------
class SkillRegistry(Mapping[str, Skill]):
    """Skills by name (a read-only mapping) plus perception queries; see the module docstring."""

    def __init__(self, skills: Iterable[Skill] = (), queries: Iterable[Query] = ()) -> None:
        self._skills: dict[str, Skill] = {}
        self.queries: dict[str, Query] = {}
        for skill in skills:
            self.add(skill)
        for query in queries:
            self.add_query(query)

    def __getitem__(self, name: str) -> Skill:
        if name not in self._skills:
            raise UnknownSkillError(self._unknown(name))
        return self._skills[name]

    def __contains__(self, name: object) -> bool:
        return name in self._skills

    def __iter__(self) -> Iterator[str]:
        return iter(self._skills)

    def __len__(self) -> int:
        return len(self._skills)

    def add(self, skill: Skill, *, replace: bool = False) -> None:
        """Register `skill`; `replace=True` swaps the implementation of an existing name."""
        if skill.name in self.queries or (skill.name in self._skills and not replace):
            raise ValueError(f"a skill or query named {skill.name!r} is already registered.")
        self._skills[skill.name] = skill

    def add_query(self, query: Query) -> None:
        if query.name in self.queries or query.name in self._skills:
            raise ValueError(f"a skill or query named {query.name!r} is already registered.")
        self.queries[query.name] = query

    def _unknown(self, name: str) -> str:
        known = [*self._skills, *self.queries]
        near = suggest(str(name), known)
        hint = f"; did you mean {near!r}?" if near else f"; known: {known}"
        return f"unknown skill {name!r}{hint}"

    def params(self, name: str) -> tuple[Param, ...]:
        if name in self.queries:
            return self.queries[name].params
        return self[name].params

    def bind(self, name: str, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None):
        """Positional and keyword arguments of a call -> one checked argument dict."""
        params = self.params(name)
        if len(args) > len(params):
            raise SkillError(
                f"`{name}` takes {len(params)} arguments ({[p.name for p in params]}). "
                f"Got {len(args)} positional."
            )
        merged = dict(zip((p.name for p in params), args, strict=False))
        for key, value in (kwargs or {}).items():
            if key in merged:
                raise SkillError(f"`{name}` got the argument `{key}` twice.")
            merged[key] = value
        return check_args(name, params, merged)

    def validate(self, name: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """Checked keyword arguments of skill or query `name` (raises `SkillError`)."""
        return self.bind(name, (), args)

    def call(self, world: SimWorld, name: str, /, *args: Any, **kwargs: Any) -> Any:
        """Validate and execute: a query returns its value, a skill its `SkillTrace`."""
        checked = self.bind(name, args, kwargs)
        if name in self.queries:
            return self.queries[name].fn(world, **checked)
        skill = self[name]
        trace = SkillTrace(name, checked, state_before=world.snapshot())
        start_steps, start = world.steps, time.perf_counter()
        result = skill.run(world, **checked)
        ok = result.success and (skill.success is None or skill.success(world, **checked))
        trace.success_check = bool(ok)
        trace.error = None if ok else (result.message or "its success check is false")
        trace.state_after = world.snapshot()
        trace.steps, trace.seconds = world.steps - start_steps, time.perf_counter() - start
        return trace

    # -- listings for prompts -----------------------------------------------------------------
    def python_api(self) -> str:
        """Python signatures with docstrings: the code planner's API listing."""
        blocks = []
        for kind, items in (("skill", self._skills.values()), ("query", self.queries.values())):
            for item in items:
                returns = "bool" if kind == "skill" else item.returns
                sig = ", ".join(f"{p.name}: {_py_type(p)}" for p in item.params)
                doc = [item.description] + [
                    f"{p.name}: {_describe(p)}" for p in item.params if _describe(p)
                ]
                body = "\n    ".join(doc)
                blocks.append(f'def {item.name}({sig}) -> {returns}:\n    """{body}"""')
        return "\n\n".join(blocks)

    def json_spec(self) -> list[dict[str, Any]]:
        """Every skill and query with its parameters: the skill planner's listing."""
        out = []
        for kind, items in (("skill", self._skills.values()), ("query", self.queries.values())):
            for item in items:
                params = {}
                for p in item.params:
                    spec: dict[str, Any] = {"type": p.type}
                    if p.description:
                        spec["description"] = p.description
                    if p.choices is not None:
                        spec["choices"] = list(p.choices)
                    if p.low is not None:
                        spec["low"], spec["high"] = p.low, p.high
                    params[p.name] = spec
                out.append(
                    {
                        "name": item.name,
                        "kind": kind,
                        "description": item.description,
                        "params": params,
                    }
                )
        return out


def _py_type(p: Param) -> str:
    return {"str": "str", "float": "float", "int": "int", "vec2": "list[float]"}[p.type]


def _describe(p: Param) -> str:
    parts = [p.description] if p.description else []
    if p.choices is not None:
        parts.append("one of " + ", ".join(repr(c) for c in p.choices))
    if p.low is not None and p.high is not None:
        parts.append(f"in [{p.low:g}, {p.high:g}]")
    return "; ".join(parts)

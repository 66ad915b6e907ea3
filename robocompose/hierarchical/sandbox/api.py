"""The functions a sandboxed program may call, checked in the parent before anything runs.

Each `ApiFunction` declares typed parameters (base.Param); `validate_args` turns the raw
positional and keyword arguments the child sent into a checked dict or raises ValueError naming
the function, the parameter and what was expected. Only then does `run` execute in the parent.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from robocompose.hierarchical.base import Param, Skill

PARAM_TYPES = ("str", "float", "int", "vec2")


@dataclass(frozen=True)
class ApiFunction:
    """A callable of the program's API: a skill (it moves the robot) or a perception helper (it
    reads state). `run(args)` gets the validated arguments by name and returns plain data."""

    name: str
    params: tuple[Param, ...]
    run: Callable[[dict[str, Any]], Any]
    description: str = ""

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name.startswith("_"):
            raise ValueError(f"`name` must be a public identifier. Got {self.name!r}.")
        for p in self.params:
            _check_param(self.name, p)
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name}: parameter names repeat: {names}.")


class SandboxAPI:
    """The program's whole reach: name -> ApiFunction. Nothing else leaves the child."""

    def __init__(self, functions: Iterable[ApiFunction]) -> None:
        self.functions: dict[str, ApiFunction] = {}
        for f in functions:
            if f.name in self.functions:
                raise ValueError(f"API function `{f.name}` is defined twice.")
            self.functions[f.name] = f

    @classmethod
    def from_skills(
        cls,
        skills: Mapping[str, Skill],
        execute: Callable[[str, dict[str, Any]], Any],
        perception: Iterable[ApiFunction] = (),
    ) -> SandboxAPI:
        """Every skill of a registry, run by `execute(name, args)` (the planner's executor, which
        traces the call), plus perception helpers."""
        functions = [
            ApiFunction(name, skill.params, _bind(execute, name), skill.description)
            for name, skill in skills.items()
        ]
        return cls([*functions, *perception])

    def validate(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        """Checked arguments of a call, by parameter name; ValueError names what is wrong."""
        if name not in self.functions:
            raise ValueError(f"`{name}` is not an API function{_suggest(name, self.functions)}.")
        return validate_args(self.functions[name], args, kwargs)

    def listing(self) -> str:
        """Signatures and descriptions, one per line, for prompts and error messages."""
        return "\n".join(
            f"{f.name}({', '.join(f'{p.name}: {p.type}' for p in f.params)})"
            + (f"  # {f.description}" if f.description else "")
            for f in self.functions.values()
        )


def _check_param(function: str, p: Param) -> None:
    """A malformed spec would let calls through unchecked, so it fails when the API is built."""
    where = f"{function}: parameter `{p.name}`"
    if p.type not in PARAM_TYPES:
        raise ValueError(f"{where} has type {p.type!r}; expected one of {', '.join(PARAM_TYPES)}.")
    if p.choices is not None and (
        p.type != "str" or not all(isinstance(c, str) for c in p.choices)
    ):
        raise ValueError(f"{where}: `choices` must be str values of a \"str\" parameter. "
                         f"Got {p.choices!r}.")  # fmt: skip
    for bound in (p.low, p.high):
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int | float)):
            raise ValueError(f"{where}: `low`/`high` must be numbers. Got {bound!r}.")
    if p.low is not None and p.high is not None and p.low > p.high:
        raise ValueError(f"{where}: `low` must be <= `high`. Got {p.low} > {p.high}.")
    if p.type == "str" and (p.low is not None or p.high is not None):
        raise ValueError(f"{where}: a \"str\" parameter takes `choices`, not `low`/`high`.")


def _bind(execute: Callable[[str, dict[str, Any]], Any], name: str) -> Callable[[dict], Any]:
    return lambda args: execute(name, args)


def validate_args(function: ApiFunction, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Map positional and keyword arguments onto the parameters and check each one."""
    where = f"{function.name}()"
    params = function.params
    if len(args) > len(params):
        raise ValueError(f"{where} takes {len(params)} arguments. Got {len(args)}.")
    named = {p.name: value for p, value in zip(params, args, strict=False)}
    known = {p.name for p in params}
    for key, value in kwargs.items():
        if key not in known:
            raise ValueError(f"{where} has no parameter `{key}`{_suggest(key, known)}.")
        if key in named:
            raise ValueError(f"{where} got `{key}` twice.")
        named[key] = value
    missing = [p.name for p in params if p.name not in named]
    if missing:
        raise ValueError(f"{where} is missing {', '.join(f'`{m}`' for m in missing)}.")
    return {p.name: check_value(p, named[p.name], where) for p in params}


def check_value(param: Param, value: Any, where: str) -> Any:
    """`value` checked against one parameter's type, choices and [low, high] range."""
    label = f"{where}: `{param.name}`"
    if param.type == "str":
        if not isinstance(value, str):
            raise ValueError(f"{label} must be a str. Got {_show(value)}.")
        if param.choices is not None and value not in param.choices:
            choices = ", ".join(repr(c) for c in param.choices)
            raise ValueError(
                f"{label} must be one of {choices}. Got {_show(value)}"
                f"{_suggest(value, param.choices)}."
            )
        return value
    if param.type == "vec2":
        if not isinstance(value, list | tuple) or len(value) != 2:
            raise ValueError(f"{label} must be 2 numbers [x, y]. Got {_show(value)}.")
        return [_number(param, v, f"{label}[{i}]", float) for i, v in enumerate(value)]
    return _number(param, value, label, int if param.type == "int" else float)


def _number(param: Param, value: Any, label: str, kind: type) -> float | int:
    accepted = (int,) if kind is int else (int, float)
    if isinstance(value, bool) or not isinstance(value, accepted):
        raise ValueError(f"{label} must be {'an int' if kind is int else 'a number'}. Got "
                         f"{_show(value)}.")  # fmt: skip
    if not math.isfinite(value):
        raise ValueError(f"{label} must be finite. Got {value}.")
    low = -math.inf if param.low is None else param.low
    high = math.inf if param.high is None else param.high
    if not low <= value <= high:
        raise ValueError(f"{label} must be in [{param.low}, {param.high}]. Got {value}.")
    return kind(value)


def to_plain(value: Any, depth: int = 0) -> Any:
    """A function's return value as JSON data the child can receive; TypeError otherwise."""
    if depth > 20:
        raise TypeError("the value is nested more than 20 levels deep")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        value = value.tolist()
        if value is None or isinstance(value, bool | int | float | str):
            return value
    if isinstance(value, Mapping):
        return {str(k): to_plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_plain(v, depth + 1) for v in value]
    raise TypeError(f"a {type(value).__name__} cannot be returned to the program")


def _show(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _suggest(name: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""

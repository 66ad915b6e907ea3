"""The functions a sandboxed program may call, checked in the parent before anything runs.

Each `ApiFunction` declares typed parameters (base.Param); `validate_args` turns the raw
positional and keyword arguments the child sent into a checked dict or raises ValueError naming
the function, the parameter and what was expected. Only then does `run` execute in the parent.
The rules are the skill registry's (`registry.check_args`), imported when first needed: only the
parent validates, and the registry imports the simulator, which the child must not pay for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from robocompose.hierarchical.base import Param, Skill
from robocompose.hierarchical.sandbox.names import FORBIDDEN_NAMES, MODULES, SAFE_BUILTINS

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
        if self.name in SAFE_BUILTINS or self.name in MODULES or self.name in FORBIDDEN_NAMES:
            raise ValueError(
                f"`name` {self.name!r} is taken by the sandbox (a builtin, module or refused "
                "name); rename the function."
            )
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
            from robocompose.hierarchical.skills.registry import suggest

            near = suggest(name, list(self.functions))
            hint = f"; did you mean {near!r}?" if near else f"; it has: {list(self.functions)}"
            raise ValueError(_clip(f"`{name}` is not an API function{hint}"))
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
        raise ValueError(f'{where}: a "str" parameter takes `choices`, not `low`/`high`.')


def _bind(execute: Callable[[str, dict[str, Any]], Any], name: str) -> Callable[[dict], Any]:
    return lambda args: execute(name, args)


def validate_args(function: ApiFunction, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Map positional and keyword arguments onto the parameters, then check them by the skill
    registry's rules, so the planners and the sandbox refuse the same calls in the same words."""
    from robocompose.hierarchical.skills.registry import check_args  # see the module docstring

    params = function.params
    if len(args) > len(params):
        raise ValueError(
            f"`{function.name}` takes {len(params)} arguments ({[p.name for p in params]}). "
            f"Got {len(args)} positional."
        )
    named = dict(zip((p.name for p in params), args, strict=False))
    for key, value in kwargs.items():
        if key in named:
            raise ValueError(f"`{function.name}` got the argument `{key}` twice.")
        named[key] = value
    try:
        return check_args(function.name, params, named)
    except ValueError as e:  # the program chose the values: keep its echo short
        raise ValueError(_clip(str(e))) from None


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


def _clip(text: str, max_chars: int = 300, cut: str = "... (cut)") -> str:
    return text if len(text) <= max_chars else text[: max_chars - len(cut)] + cut

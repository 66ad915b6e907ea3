"""STRIPS operators over ground facts: the one symbolic model of what a skill needs and does.

A fact is a tuple of strings, e.g. ("on", "green_block", "red_block"), ("hand_empty",). A skill
declares one `StripsOperator` per way it can apply (pick from the table, from a block, from a bin);
each names its typed variables ("?obj" a block, "?bin" a bin), which skill arguments they fill,
its preconditions and its add and delete lists. From those declarations alone come:

    ground(operators, objects)        every applicable instance in a scene (the planning domain)
    step(state, skill, args, ops)     one call run symbolically: the next state, or the fact that
                                      failed (the plan check before motion)
    summary(operators)                what a skill needs and does, for the prompt listings

Every variable of an operator stands for a different object. A skill that declares no operator
(move_to, open_gripper, ...) cannot be followed symbolically: `step` says so (`Opaque`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Fact = tuple[str, ...]
State = frozenset[Fact]


def show(fact: Fact) -> str:
    """("on", "a", "b") -> "on(a, b)"; ("hand_empty",) -> "hand_empty"."""
    return f"{fact[0]}({', '.join(fact[1:])})" if len(fact) > 1 else fact[0]


@dataclass(frozen=True)
class StripsOperator:
    """One STRIPS variant of a skill.

    `params` are (variable, type) pairs, types being keys of the scene's objects ("block",
    "bin"); `args` maps skill arguments to a variable or a constant ("table"); arguments not in
    `args` (e.g. place_at's x, y) are free for the caller to choose."""

    skill: str
    variant: str
    params: tuple[tuple[str, str], ...]
    args: tuple[tuple[str, str], ...]
    pre: tuple[Fact, ...]
    add: tuple[Fact, ...]
    delete: tuple[Fact, ...]

    @property
    def name(self) -> str:
        return f"{self.skill}_{self.variant}"


@dataclass(frozen=True)
class GroundOperator:
    """An operator with every variable bound: a planning action and the skill call it is."""

    operator: StripsOperator
    binding: tuple[tuple[str, str], ...]
    pre: frozenset[Fact]
    add: frozenset[Fact]
    delete: frozenset[Fact]

    @property
    def name(self) -> str:
        return f"{self.operator.name}({', '.join(v for _, v in self.binding)})"

    @property
    def skill(self) -> str:
        return self.operator.skill

    def call_args(self) -> dict[str, str]:
        """The skill arguments the operator fixes (free ones, like place_at's x and y, not)."""
        values = dict(self.binding)
        return {arg: values.get(term, term) for arg, term in self.operator.args}

    def applicable(self, state: State) -> bool:
        return self.pre <= state

    def apply(self, state: State) -> State:
        return (state - self.delete) | self.add


def _bind(facts: Iterable[Fact], values: Mapping[str, str]) -> frozenset[Fact]:
    return frozenset(tuple(values.get(t, t) for t in fact) for fact in facts)


def instantiate(op: StripsOperator, values: Mapping[str, str]) -> GroundOperator:
    binding = tuple((var, values[var]) for var, _ in op.params)
    return GroundOperator(
        op, binding, _bind(op.pre, values), _bind(op.add, values), _bind(op.delete, values)
    )


def _bindings(
    op: StripsOperator, objects: Mapping[str, Sequence[str]], fixed: Mapping[str, str]
) -> Iterable[dict[str, str]]:
    """Every assignment of distinct objects of the right types to `op`'s variables that agrees
    with `fixed`."""
    free = [(var, kind) for var, kind in op.params if var not in fixed]
    domains = [objects.get(kind, ()) for _, kind in free]
    for combo in itertools.product(*domains):
        values = {**fixed, **dict(zip((v for v, _ in free), combo, strict=True))}
        if len(set(values.values())) == len(values):
            yield values


def ground(operators: Iterable[StripsOperator], objects: Mapping[str, Sequence[str]]):
    """Every instance of `operators` over the scene's typed `objects` ({"block": [...], ...})."""
    return [instantiate(op, values) for op in operators for values in _bindings(op, objects, {})]


@dataclass(frozen=True)
class Violation:
    """A call whose declared preconditions do not hold: the first fact that failed."""

    skill: str
    args: dict[str, Any]
    fact: Fact

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.args.items())
        return f"{self.skill}({args}) needs {show(self.fact)}, which does not hold then"


@dataclass(frozen=True)
class Opaque:
    """A call of a skill without declared effects: the state after it is unknown."""

    skill: str


def _matching(
    skill: str, args: Mapping[str, Any], operators: Sequence[StripsOperator], objects
) -> list[tuple[StripsOperator, dict[str, str]]]:
    """Operators of `skill` whose fixed arguments fit `args`, with those variables bound."""
    out = []
    for op in operators:
        if op.skill != skill:
            continue
        kinds = dict(op.params)
        fixed: dict[str, str] = {}
        fits = True
        for arg, term in op.args:
            value = args.get(arg)
            if term.startswith("?"):
                fits = fits and isinstance(value, str) and value in objects.get(kinds[term], ())
                if fits:
                    fits = fixed.setdefault(term, value) == value
            else:
                fits = fits and value == term
        if fits:
            out.append((op, fixed))
    return out


def step(
    state: State,
    skill: str,
    args: Mapping[str, Any],
    operators: Sequence[StripsOperator],
    objects: Mapping[str, Sequence[str]],
) -> State | Violation | Opaque:
    """Run one call symbolically: the state after it, the precondition that failed, or `Opaque`
    when `skill` declares nothing. Of several operators that fit, the one that applies; when none
    does, the failed fact of the one that came closest."""
    matching = _matching(skill, args, operators, objects)
    if not any(op.skill == skill for op in operators):
        return Opaque(skill)
    best: tuple[int, Fact] | None = None
    for op, fixed in matching:
        for values in _bindings(op, objects, fixed):
            grounded = instantiate(op, values)
            missing = sorted(grounded.pre - state)
            if not missing:
                return grounded.apply(state)
            if best is None or len(missing) < best[0]:
                best = (len(missing), missing[0])
    if best is None:
        return Violation(skill, dict(args), ("valid_arguments", skill))
    return Violation(skill, dict(args), best[1])


def summary(operators: Sequence[StripsOperator]) -> str:
    """One skill's operators in a sentence, in its argument names: "Needs hand_empty,
    clear(obj), and on_table(obj) or on(obj, below) or in(obj, bin). Then holding(obj)." (the
    prompt listing of the code and skill planners)."""

    def named(op: StripsOperator, facts: tuple[Fact, ...]) -> list[str]:
        names = {term: arg for arg, term in op.args}
        return [show(tuple(names.get(t, t).lstrip("?") for t in f)) for f in facts]

    def part(lists: list[list[str]]) -> str:
        common = [f for f in lists[0] if all(f in other for other in lists)]
        rest = [[f for f in facts if f not in common] for facts in lists]
        alternatives = list(dict.fromkeys(", ".join(r) for r in rest if r))
        text = ", ".join(common)
        if alternatives:
            text += (", and " if text else "") + " or ".join(alternatives)
        return text

    if not operators:
        return ""
    needs = part([named(op, op.pre) for op in operators])
    then = part([named(op, op.add) for op in operators])
    return f"Needs {needs}. Then {then}."

"""The check before motion: a plan's calls run through the skills' declared preconditions and
effects, from the facts now, before the robot moves.

    result = check_calls(calls, facts, operators, scene)      # a skill list (or one call)
    result = dry_run(program, facts, registry, world)         # a program, in the sandbox
    result.ok, result.violation, result.feedback()

A violated precondition names the call and the fact that failed ("call 3: pick(obj='red_block')
needs clear(red_block), which does not hold then"); the repair round starts from there without
any motion. A call of a skill that declares no operators (move_to, open_gripper, push, ...)
ends what the facts can follow: the calls after it are not checked (`result.unchecked_from`).

A program is dry-run in the same sandbox it would run in: its skill calls apply the declared
effects to the facts instead of moving, and its perception reads the facts for what they know
(holding, on_top_of, in_bin, clear) and the world as it is for the rest (positions, colours), so
its loops and branches take the path they would take if every call succeeded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from robocompose.hierarchical.goal.facts import TABLE, SceneNames, supports
from robocompose.hierarchical.goal.strips import Opaque, State, StripsOperator, Violation, step

SYMBOLIC_QUERIES = ("holding", "on_top_of", "in_bin", "clear")


@dataclass(frozen=True)
class CheckResult:
    """What the check found: the first violated precondition, if any."""

    ok: bool
    checked: int  # calls followed through their declarations
    violation: Violation | None = None
    index: int | None = None  # 0-based index of the violating call
    unchecked_from: int | None = None  # first call the facts could not follow
    final: State | None = None  # the facts after the checked calls
    problem: str | None = None  # a program's dry run failing otherwise (a refused call, an error)

    def feedback(self) -> str:
        """What the planner is told when the check catches its plan."""
        if self.violation is not None:
            return (
                f"The plan was checked before the robot moved, and call {self.index + 1}, "
                f"{self.violation}. Nothing moved; give a plan whose every call's needs hold."
            )
        if self.problem is not None:
            return (
                f"The program was dry-run before the robot moved and failed: {self.problem}. "
                "Nothing moved."
            )
        return "The plan passed the check before motion."


def declared_operators(registry: Mapping[str, Any]) -> tuple[StripsOperator, ...]:
    """Every operator the registry's skills declare."""
    return tuple(op for skill in registry.values() for op in getattr(skill, "operators", ()))


def check_calls(
    calls: Sequence[Any], facts: State, operators: Sequence[StripsOperator], scene: SceneNames
) -> CheckResult:
    """Follow `calls` (SkillCall-likes with .skill and .args) from `facts`."""
    state = facts
    for index, call in enumerate(calls):
        after = step(state, call.skill, dict(call.args), operators, scene.objects)
        if isinstance(after, Opaque):
            return CheckResult(True, index, unchecked_from=index, final=state)
        if isinstance(after, Violation):
            return CheckResult(False, index, after, index, final=state)
        state = after
    return CheckResult(True, len(calls), final=state)


class SymbolicScene:
    """Perception answered from facts (what they know) and the world (positions, colours)."""

    def __init__(self, facts: State, world: Any) -> None:
        self.facts, self.world = facts, world
        self.lost = False  # an undeclared call ran: the facts no longer follow the world

    def holding(self) -> str | None:
        return next((f[1] for f in self.facts if f[0] == "holding"), None)

    def on_top_of(self, obj: str) -> str | None:
        """As the world says it: a block, "table" (also inside a bin), or None while held."""
        below = supports(self.facts).get(obj)
        if below is None:
            return None
        return below if below.endswith("_block") else TABLE

    def in_bin(self, obj: str) -> str | None:
        below = supports(self.facts).get(obj)
        return below if below is not None and below.endswith("_bin") else None

    def clear(self, obj: str) -> bool:
        return ("clear", obj) in self.facts

    def answer(self, name: str, args: dict[str, Any], real: Any) -> Any:
        if name in SYMBOLIC_QUERIES and not self.lost:
            return getattr(self, name)(**args)
        return real(args)


class _Caught(Exception):
    """A dry-run call broke a precondition: the program stops here."""


def dry_run(code: str, facts: State, registry: Any, world: Any, limits: Any = None) -> CheckResult:
    """Run the program in the sandbox against the facts instead of the robot."""
    from robocompose.hierarchical.sandbox import ApiFunction, SandboxAPI, run_program

    operators = declared_operators(registry)
    scene = SceneNames.of(world)
    symbolic = SymbolicScene(facts, world)
    found: list[CheckResult] = []
    count = [0, None]  # calls seen, first undeclared call

    def execute(name: str, args: dict[str, Any]) -> bool:
        if found:
            raise _Caught(str(found[0].violation))
        index = count[0]
        count[0] += 1
        if symbolic.lost:
            return True
        after = step(symbolic.facts, name, dict(args), operators, scene.objects)
        if isinstance(after, Opaque):
            symbolic.lost, count[1] = True, index
            return True
        if isinstance(after, Violation):
            found.append(CheckResult(False, index, after, index, final=symbolic.facts))
            raise _Caught(str(after))
        symbolic.facts = after
        return True

    perception = [
        ApiFunction(
            q.name,
            q.params,
            lambda args, q=q: symbolic.answer(q.name, args, lambda a: q.fn(world, **a)),
            q.description,
        )
        for q in getattr(registry, "queries", {}).values()
    ]
    api = SandboxAPI.from_skills(registry, execute, perception)
    program = run_program(code, api, limits)
    if found:
        return found[0]
    if not symbolic.lost and not program.refused:
        refused = [c for c in program.calls if not c.executed and c.name in registry]
        problem = f"{refused[0].name} was refused: {refused[0].error}" if refused else None
        if problem is None and not program.ok:
            problem = program.error
        if problem is not None:
            return CheckResult(False, count[0], final=symbolic.facts, problem=problem)
    return CheckResult(True, count[0], unchecked_from=count[1], final=symbolic.facts)

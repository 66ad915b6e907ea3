"""The contracts of hierarchical planning: an LLM backend, a planner and its plan, a skill, a
skill call, and what running a skill leaves.

instruction -> Planner (goal, the default | code | skills | saycan) -> Plan -> skill calls
                  ^  LLMBackend (local GGUF | OpenAI-compatible HTTP), cached on disk
                  |                     skill calls -> Skill -> controller -> env
                  +---- traces of every call (arguments, error, state, success check)

The goal planner has the model state the goal as constraints; a solver finds the arrangement
and a STRIPS search over the skills' declared operators the calls.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": ...}


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    model: str
    cached: bool = False
    finish_reason: str = ""  # "stop" | "length" (hit max_tokens) | "" when the backend won't say
    # prompt tokens the model actually evaluated (the rest came from a kept or loaded prefix
    # state); None when the backend cannot tell (remote)
    prompt_tokens_evaluated: int | None = None


class Plan:
    """What every planner returns: `kind` says what `body` is, and the plan carries what the LLM
    cost (`completions`) and what is wrong with it (`problems`: a plan with problems is not run,
    they go back to the planner).

    - "code": a program for the sandbox (`CodePlan`), `body` the program text;
    - "calls": skill calls in order (`SkillPlan`), `body` the calls;
    - "steps": calls chosen one at a time as the plan runs (`StepwisePlan`, SayCan), `body` the
      plan itself.

    Subclasses are dataclasses that hold `completions` and `problems` and give `kind` and `body`.
    """

    completions: tuple[Completion, ...]
    problems: tuple[str, ...]

    @property
    def kind(self) -> str:
        raise NotImplementedError

    @property
    def body(self) -> str | tuple[SkillCall, ...] | StepwisePlan:
        raise NotImplementedError

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def tokens(self) -> int:
        return sum(c.prompt_tokens + c.completion_tokens for c in self.completions)

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.completions)


class Planner(Protocol):
    """Turns an instruction into a `Plan` for the scene as it is; `feedback` (a failed round's
    report, or a previous answer's problems) asks for a repaired plan."""

    def plan(
        self,
        instruction: str,
        world_summary: str | Mapping[str, Any],
        feedback: str | None = None,
    ) -> Plan: ...


class LLMBackend(ABC):
    """Chat with optional constrained output. Temperature 0 unless asked otherwise."""

    model: str

    @abstractmethod
    def chat(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        grammar: str | None = None,  # GBNF (local backends)
        json_schema: dict[str, Any] | None = None,
        stop: Sequence[str] = (),
    ) -> Completion: ...

    def score(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        """Sum of token log-probabilities of each continuation after `prompt` (SayCan)."""
        raise NotImplementedError(f"{type(self).__name__} cannot score continuations.")


@dataclass(frozen=True)
class Param:
    """A typed skill parameter: "str" (from `choices` when given), "float", "int", "vec2"."""

    name: str
    type: str
    description: str = ""
    choices: tuple[str, ...] | None = None  # e.g. the scene's object names
    low: float | None = None
    high: float | None = None


@dataclass
class SkillResult:
    success: bool
    message: str = ""
    steps: int = 0


@dataclass
class Skill:
    """A named controller the planners may call.

    `run(world, **args)` drives the world until done or out of time; `precondition` and
    `success` read the world only. `kind` says what runs: "scripted", "policy", "composed",
    "learned" or "learned_composed" (`skills.learned`). `operators` declare, as STRIPS
    operators over the scene's facts (`goal.strips.StripsOperator`), what the skill needs and does:
    the plan check before motion and the goal planner's domain read them; a skill without any
    is one the facts cannot follow."""

    name: str
    description: str
    params: tuple[Param, ...]
    run: Callable[..., SkillResult]
    precondition: Callable[..., bool] = lambda world, **args: True
    success: Callable[..., bool] | None = None
    kind: str = "scripted"
    operators: tuple[Any, ...] = ()


@dataclass
class SkillTrace:
    """One executed skill call: what the monitor shows the LLM when a plan fails."""

    skill: str
    args: dict[str, Any]
    error: str | None = None
    success_check: bool | None = None
    state_before: dict[str, Any] = field(default_factory=dict)
    state_after: dict[str, Any] = field(default_factory=dict)
    steps: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class SkillCall:
    """One call of a plan: a registered skill's name and its arguments."""

    skill: str
    args: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.skill}({', '.join(f'{k}={v!r}' for k, v in self.args.items())})"


def as_calls(items: Sequence[Any]) -> list[SkillCall]:
    """Skill calls from `SkillCall`s or the planners' JSON shape {"skill": ..., "args": {...}}."""
    calls = []
    for i, item in enumerate(items):
        if isinstance(item, SkillCall):
            calls.append(item)
        elif isinstance(item, dict) and isinstance(item.get("skill"), str):
            calls.append(SkillCall(item["skill"], dict(item.get("args") or {})))
        else:
            raise ValueError(f"plan item {i} must be {{'skill': str, 'args': {{}}}}. Got {item!r}.")
    return calls


@dataclass
class StepwisePlan(Plan):
    """A plan decided one call at a time in closed loop (SayCan): `next_call(history)` returns
    the next call after the executed `history`, or None when the task is done. The executor
    records the calls it chose and the seconds spent choosing."""

    next_call: Callable[[list[SkillCall]], SkillCall | None]
    max_steps: int = 12
    chosen: list[SkillCall] = field(default_factory=list)
    seconds: float = 0.0  # spent choosing (SayCan scores, it makes no completions)
    completions: tuple[Completion, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return "steps"

    @property
    def body(self) -> StepwisePlan:
        return self

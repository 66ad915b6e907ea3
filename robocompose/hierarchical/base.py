"""The contracts of hierarchical planning: an LLM backend, a skill, and what running a skill leaves.

instruction -> Planner (code | skills | saycan) -> skill calls -> Skill -> controller -> env
                  ^  LLMBackend (local GGUF | OpenAI-compatible HTTP), cached on disk
                  +---- traces of every call (arguments, error, state, success check)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

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


class PlanCost:
    """What every planner's result reports: whether it has problems, and what the LLM cost.

    Mixed into the planners' frozen dataclasses, which hold `completions` and `problems`."""

    completions: tuple[Completion, ...]
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def tokens(self) -> int:
        return sum(c.prompt_tokens + c.completion_tokens for c in self.completions)

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.completions)


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
    "learned" or "learned_composed" (`learned_skills`)."""

    name: str
    description: str
    params: tuple[Param, ...]
    run: Callable[..., SkillResult]
    precondition: Callable[..., bool] = lambda world, **args: True
    success: Callable[..., bool] | None = None
    kind: str = "scripted"


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

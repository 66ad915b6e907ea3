"""SayCan: choose the next skill call by the LLM's likelihood of its text times its affordance.

    planner = SayCanPlanner(backend, registry)
    step = planner.step(instruction, history, world)   # history: the calls executed so far
    step.call  -> the SkillCall to execute next, or None when the LLM rates "done()" highest
    step.candidates  -> every candidate with its log-likelihood, affordance and score
    steps = planner.run(instruction, world, execute)   # step, execute, repeat (max_steps)

Candidates are the registry's skills crossed with the scene: every assignment of a skill's `str`
parameters from their `choices`, minus calls naming one object twice; skills with numeric
parameters (continuous: move_to, push distance, ...) are left out, SayCan needs a finite set.
The affordance of a candidate is its skill's precondition in the current world (1 or 0), or a
value estimate `affordance(world, call) -> [0, 1]` given by the caller. Only affordable
candidates are scored by the LLM (`LLMBackend.score`: summed log-probability of the call's text
after the prompt so far), and the choice maximises log p_LLM + log affordance. "done()" is always
a candidate with affordance 1. The runner executes the chosen call; this module only decides.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from robocompose.hierarchical.base import LLMBackend, Skill, SkillCall
from robocompose.hierarchical.planners.prompts import (
    Registry,
    api_listing,
    scene_summary,
    skill_list,
    task_text,
    usable_examples,
)

DONE = "done()"
Affordance = Callable[[Any, SkillCall], float]


@dataclass(frozen=True)
class SayCanConfig:
    """`max_steps` bounds a run; `max_candidates` bounds one step's enumeration."""

    max_steps: int = 12
    max_candidates: int = 64

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError(f"`max_steps` must be >= 1. Got {self.max_steps}.")
        if self.max_candidates < 1:
            raise ValueError(f"`max_candidates` must be >= 1. Got {self.max_candidates}.")


@dataclass(frozen=True)
class Candidate:
    """One option of a step: `call` None is "done"."""

    call: SkillCall | None
    text: str
    affordance: float
    logp: float = -math.inf  # not scored when unaffordable

    @property
    def score(self) -> float:
        """log p_LLM + log affordance (-inf when unaffordable)."""
        return self.logp + math.log(self.affordance) if self.affordance > 0 else -math.inf


@dataclass(frozen=True)
class SayCanStep:
    call: SkillCall | None
    candidates: tuple[Candidate, ...]
    seconds: float

    @property
    def done(self) -> bool:
        return self.call is None


def call_text(call: SkillCall | None) -> str:
    """A call as the line of code the LLM scores, e.g. `place("red_block", "blue_block")`."""
    if call is None:
        return DONE
    return f"{call.skill}({', '.join(json.dumps(v) for v in call.args.values())})"


def enumerate_calls(skills: Sequence[Skill]) -> list[SkillCall]:
    """Every call of the skills whose parameters are all `str` with choices, objects distinct."""
    calls = []
    for skill in skills:
        if any(p.type != "str" or p.choices is None for p in skill.params):
            continue
        for values in itertools.product(*(p.choices for p in skill.params)):
            if len(set(values)) == len(values):
                calls.append(
                    SkillCall(
                        skill.name, dict(zip((p.name for p in skill.params), values, strict=True))
                    )
                )
    return calls


class SayCanPlanner:
    """Picks one call at a time (see the module docstring).

    Args:
        backend: an LLM whose `score` works (the local backend; an endpoint with logprobs).
        registry: a name -> Skill mapping (or Skills) built for the scene.
        config: step and candidate bounds.
        affordance: `(world, call) -> [0, 1]`; default: the skill's precondition as 0/1.
    """

    def __init__(
        self,
        backend: LLMBackend,
        registry: Registry,
        config: SayCanConfig | None = None,
        affordance: Affordance | None = None,
    ) -> None:
        self.backend = backend
        self.config = config or SayCanConfig()
        skills = skill_list(registry)
        self.skills = {s.name: s for s in skills}
        self.affordance = affordance or self.precondition
        self.calls = enumerate_calls(skills)
        if not self.calls:
            raise ValueError(
                "no SayCan candidates: every skill has a numeric parameter or no `choices`."
            )
        if len(self.calls) > self.config.max_candidates:
            raise ValueError(
                f"{len(self.calls)} candidate calls exceed `max_candidates` = "
                f"{self.config.max_candidates}; raise it or use fewer objects."
            )
        listed = [s for s in skills if s.name in {c.skill for c in self.calls}]
        self.header = (
            api_listing(listed)
            + '\ndef done():\n    """The task is complete."""\n\n'
            + "".join(self._example(ex) for ex in usable_examples(listed))
        )

    def precondition(self, world: Any, call: SkillCall) -> float:
        return 1.0 if self.skills[call.skill].precondition(world, **call.args) else 0.0

    @staticmethod
    def _example(ex: Any) -> str:
        lines = [call_text(SkillCall(name, dict(args))) for name, args in ex.calls]
        return task_text(ex.scene, ex.instruction) + "\n" + "\n".join([*lines, DONE]) + "\n\n"

    def prompt(self, instruction: str, history: Sequence[SkillCall], scene: str) -> str:
        """The text the candidates continue: listing, examples, the task, the calls so far."""
        done = "".join(call_text(c) + "\n" for c in history)
        return self.header + task_text(scene, instruction) + "\n" + done

    def step(
        self,
        instruction: str,
        history: Sequence[SkillCall],
        world: Any,
        world_summary: str | Mapping[str, Any] | None = None,
    ) -> SayCanStep:
        """The next call (or done) in `world` after `history`; the scene defaults to
        `world.snapshot()`."""
        start = time.perf_counter()
        summary = world.snapshot() if world_summary is None else world_summary
        options = [Candidate(None, DONE, 1.0)] + [
            Candidate(c, call_text(c), float(self.affordance(world, c))) for c in self.calls
        ]
        for c in options:
            if not 0.0 <= c.affordance <= 1.0:
                raise ValueError(f"affordance of {c.text} must be in [0, 1]. Got {c.affordance}.")
        affordable = [c for c in options if c.affordance > 0]
        logps = self.backend.score(
            self.prompt(instruction, history, scene_summary(summary)),
            [c.text + "\n" for c in affordable],
        )
        scored = {id(c): lp for c, lp in zip(affordable, logps, strict=True)}
        options = [
            Candidate(c.call, c.text, c.affordance, scored.get(id(c), -math.inf)) for c in options
        ]
        best = max(options, key=lambda c: c.score)
        return SayCanStep(best.call, tuple(options), time.perf_counter() - start)

    def run(
        self, instruction: str, world: Any, execute: Callable[[SkillCall], Any]
    ) -> list[SayCanStep]:
        """Step, execute, repeat until "done" or `max_steps` calls; exceptions of `execute`
        propagate (the runner decides what a failed call means)."""
        steps: list[SayCanStep] = []
        history: list[SkillCall] = []
        for _ in range(self.config.max_steps):
            step = self.step(instruction, history, world)
            steps.append(step)
            if step.call is None:
                break
            execute(step.call)
            history.append(step.call)
        return steps

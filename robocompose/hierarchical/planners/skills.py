"""Skill planner: the LLM writes a JSON list of skill calls, validated against the registry.

    planner = SkillPlanner(backend, registry, SkillPlannerConfig(constrain="grammar"))
    plan = planner.plan(instruction, world.snapshot(), feedback=None)
    plan.calls -> (SkillCall("pick", {"obj": "red_block"}), ...); plan.problems; plan.completions

The reply must be `[{"skill": name, "args": {...}}, ...]`. Decoding is constrained by the
registry (`grammar.py`): "grammar" sends a GBNF grammar (llama.cpp backends), "json_schema" a
JSON schema (OpenAI-compatible servers; llama.cpp's schema converter keeps names, objects and
types but drops a float's minimum / maximum, so only the grammar makes ranges exact), "none"
nothing. Whatever the constraint, the reply is
validated here: unknown skill, missing / extra / mistyped / out-of-range arguments, objects not
in the scene (a `str` parameter's `choices`) and too many calls each give a clear problem naming
the call. A plan with problems has no calls: it goes back to the LLM, never half to the robot.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from robocompose.hierarchical.base import Completion, LLMBackend, Plan, Skill, SkillCall
from robocompose.hierarchical.planners.grammar import gbnf, json_schema
from robocompose.hierarchical.planners.prompts import (
    Example,
    Registry,
    api_listing,
    scene_summary,
    skill_list,
    skill_messages,
    usable_examples,
)
from robocompose.hierarchical.skills.registry import SkillError, check_value, suggest

CONSTRAINTS = ("grammar", "json_schema", "none")
TOKENS_PER_CALL = 40  # a call is ~20-30 tokens; the grammar bounds its length


class PlanError(ValueError):
    """A skill call that does not fit the registry; the message names the call and the field."""


@dataclass(frozen=True)
class SkillPlannerConfig:
    """`max_calls` bounds the plan (also in the grammar); `max_tokens` defaults to fit it."""

    max_calls: int = 8
    constrain: str = "grammar"
    max_tokens: int | None = None
    examples: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.max_calls <= 64:
            raise ValueError(f"`max_calls` must be in [1, 64]. Got {self.max_calls}.")
        if self.constrain not in CONSTRAINTS:
            raise ValueError(f"`constrain` must be one of {CONSTRAINTS}. Got {self.constrain!r}.")
        if self.max_tokens is not None and self.max_tokens < 16:
            raise ValueError(f"`max_tokens` must be >= 16. Got {self.max_tokens}.")

    @property
    def token_budget(self) -> int:
        return self.max_tokens or TOKENS_PER_CALL * self.max_calls + 32


@dataclass(frozen=True)
class SkillPlan(Plan):
    """Validated calls (empty when there are problems), the raw reply, and every completion."""

    calls: tuple[SkillCall, ...]
    text: str = ""
    completions: tuple[Completion, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return "calls"

    @property
    def body(self) -> tuple[SkillCall, ...]:
        return self.calls


# -- validation -------------------------------------------------------------------------------
def validate_call(skills: Mapping[str, Skill], item: Any, index: int = 0) -> SkillCall:
    """One `{"skill": name, "args": {...}}` item checked against the registry."""
    at = f"call {index + 1}"
    if not isinstance(item, dict):
        raise PlanError(f'{at} must be an object {{"skill": ..., "args": {{...}}}}. Got {item!r}.')
    extra = sorted(set(item) - {"skill", "args"})
    if extra or "skill" not in item:
        what = f"has unexpected keys {extra}" if extra else "has no `skill`"
        raise PlanError(f'{at} {what}; a call is {{"skill": name, "args": {{...}}}}.')
    name, args = item["skill"], item.get("args", {})
    if not isinstance(name, str) or name not in skills:
        near = suggest(str(name), list(skills))
        hint = f"; did you mean {near!r}?" if near else "."
        raise PlanError(f"{at}: unknown skill {name!r}{hint} Skills: {list(skills)}.")
    at = f"{at} `{name}`"
    if not isinstance(args, dict):
        raise PlanError(f"{at}: `args` must be an object. Got {args!r}.")
    params = {p.name: p for p in skills[name].params}
    missing, extra = [p for p in params if p not in args], sorted(set(args) - set(params))
    if missing or extra:
        parts = [f"missing {missing}"] if missing else []
        parts += [f"unexpected {extra}"] if extra else []
        raise PlanError(f"{at}: arguments {' and '.join(parts)}; it takes {list(params)}.")
    try:
        clean = {p: check_value(params[p], args[p], f"{at} argument `{p}`") for p in params}
    except SkillError as e:
        raise PlanError(str(e)) from None
    return SkillCall(name, clean)


def parse_json_list(text: str) -> list[Any]:
    """The first JSON list in a reply: prose around it and a wrapping object are ignored."""
    stripped = text.strip()
    start = stripped.find("[")
    if start < 0:
        raise PlanError(f"the reply holds no JSON list: {stripped[:120]!r}")
    try:
        data, _ = json.JSONDecoder().raw_decode(stripped, start)
    except json.JSONDecodeError as e:
        raise PlanError(f"the reply is not valid JSON ({e.msg} at char {e.pos}).") from e
    return data


def validate_plan(
    registry: Registry, text: str, max_calls: int
) -> tuple[tuple[SkillCall, ...], tuple[str, ...]]:
    """(calls, ()) for a valid reply, else ((), problems): every bad call named."""
    skills = {s.name: s for s in skill_list(registry)}
    try:
        items = parse_json_list(text)
    except PlanError as e:
        return (), (str(e),)
    problems = []
    if not items:
        problems.append("the plan is empty; it needs at least one call.")
    if len(items) > max_calls:
        problems.append(f"the plan has {len(items)} calls; at most {max_calls} are allowed.")
    calls = []
    for i, item in enumerate(items):
        try:
            calls.append(validate_call(skills, item, i))
        except PlanError as e:
            problems.append(str(e))
    return (() if problems else tuple(calls)), tuple(problems)


# -- the planner ------------------------------------------------------------------------------
class SkillPlanner:
    """Plans a list of calls of `registry`'s skills; the constraint comes from the registry.

    Args:
        backend: the LLM ("grammar" needs a backend that takes GBNF: the local one).
        registry: a name -> Skill mapping (or Skills); `str` parameters' `choices` are the
            scene's names, so build the planner for the scene it plans in.
        config: plan length, constraint kind, token budget.
    """

    def __init__(
        self, backend: LLMBackend, registry: Registry, config: SkillPlannerConfig | None = None
    ) -> None:
        self.backend = backend
        self.config = config or SkillPlannerConfig()
        skills = skill_list(registry)
        if not skills:
            raise ValueError("the skill registry is empty: there is nothing to plan with.")
        self.skills = {s.name: s for s in skills}
        self.listing = api_listing(skills)
        self.examples = usable_examples(skills) if self.config.examples else []
        self.grammar = gbnf(skills, self.config.max_calls)
        self.schema = json_schema(skills, self.config.max_calls)

    def plan(
        self,
        instruction: str,
        world_summary: str | Mapping[str, Any],
        feedback: str | None = None,
        examples: Sequence[Example] | None = None,
    ) -> SkillPlan:
        """One LLM call under the configured constraint, then validation; `examples` replace
        the few-shot examples for this call (e.g. corrected plans)."""
        if not instruction.strip():
            raise ValueError("`instruction` must not be empty.")
        messages = skill_messages(
            self.listing,
            self.examples if examples is None else examples,
            scene_summary(world_summary),
            instruction,
            feedback,
        )
        constrain = self.config.constrain
        completion = self.backend.chat(
            messages,
            max_tokens=self.config.token_budget,
            grammar=self.grammar if constrain == "grammar" else None,
            json_schema=self.schema if constrain == "json_schema" else None,
        )
        calls, problems = validate_plan(self.skills, completion.text, self.config.max_calls)
        return SkillPlan(calls, completion.text, (completion,), problems)

"""Monitor and repair (HyCodePolicy): a failed plan's trace goes back to the planner.

    round 0: plan(instruction, scene)                                   -> run -> done?
    round k: plan(instruction, scene now, feedback: the failed call and why) -> run -> ...

A repaired plan continues from the world as the failure left it (no reset): the planner sees
the scene as it is now and the feedback says which calls already ran and which one failed.
A planner whose output is not a valid plan (no code, a JSON call that does not fit the
registry) gets its problems back the same way. At most `max_rounds` repairs; every round is
recorded with its plan, traces, outcome and the planning call's tokens and seconds.

No repair prompt repeats an earlier one of the run: the same prompt would get the same answer
(temperature 0, and the disk cache), so a report given before in the same scene says how often
the plans since failed the same way. A plan that already failed in the same scene is not run
again: its round is "repeated_plan" and the next prompt says what it repeated.

Every plan is checked before motion (the executor's check): a plan caught there is a round
with the outcome "caught" whose feedback names the failed fact, and nothing moved. A planner
may also answer with a question ("ask") or a refusal ("refuse", the goal planner): the loop
ends there with the outcome "asked" or "declined", no call run, and the record keeps the plan
(`held_back`) so a caller can show the question and plan again with the answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from robocompose.hierarchical.base import Completion, Plan, Planner, SkillTrace, StepwisePlan
from robocompose.hierarchical.planners.prompts import scene_summary
from robocompose.hierarchical.run.plan_executor import ExecutionResult, PlanExecutor

MAX_ROUNDS = 5
MAX_FEEDBACK_CALLS = 6  # the last calls shown to the LLM: enough context, a short prompt
ENDS = ("success", "stopped")  # outcomes that end the loop
HELD_BACK = {"ask": "asked", "refuse": "declined"}  # plan kinds that end the loop unrun


@dataclass
class Round:
    """One planning call and the run of its plan."""

    index: int
    plan: str | list[str] | None  # the program, or the skill calls as text; None when invalid
    outcome: str  # "invalid_plan", "repeated_plan" or an ExecutionResult outcome
    error: str | None
    feedback: str | None  # what this round's planning call was told (None in round 0)
    traces: list[SkillTrace] = field(default_factory=list)
    corrections: list[dict[str, Any]] = field(default_factory=list)
    planning: dict[str, Any] = field(default_factory=dict)  # tokens, seconds, LLM calls
    seconds: float = 0.0


@dataclass
class RepairRecord:
    """Every round of one instruction, and whether the task was done in the end."""

    instruction: str
    rounds: list[Round]
    success: bool
    held_back: Plan | None = None  # the plan that asked or refused instead of moving

    @property
    def caught(self) -> int:
        """Rounds whose plan the check before motion caught."""
        return sum(r.outcome == "caught" for r in self.rounds)

    @property
    def llm_calls(self) -> int:
        return sum(r.planning.get("llm_calls", 0) for r in self.rounds)

    @property
    def valid_first_plan(self) -> bool:
        """Round 0 gave a plan that the planner's checks and the sandbox or registry took."""
        return bool(self.rounds) and self.rounds[0].outcome not in ("invalid_plan", "refused")

    @property
    def success_first_round(self) -> bool:
        return bool(self.rounds) and self.rounds[0].outcome == "success"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON: every round with its traces (states included) and corrections."""
        rounds = [
            {
                "index": r.index,
                "plan": r.plan,
                "outcome": r.outcome,
                "error": r.error,
                "feedback": r.feedback,
                "traces": [vars(t) for t in r.traces],
                "corrections": r.corrections,
                "planning": r.planning,
                "seconds": round(r.seconds, 3),
            }
            for r in self.rounds
        ]
        record = {
            "instruction": self.instruction,
            "success": self.success,
            "caught_before_motion": self.caught,
            "llm_calls": self.llm_calls,
            "held_back": None if self.held_back is None else _held_back(self.held_back),
            "rounds": rounds,
        }
        return json.loads(json.dumps(record, default=_plain))


@dataclass(frozen=True)
class FixedPlan(Plan):
    """A plan given, not asked of an LLM (no completions): a program or a list of calls."""

    given: str | tuple[Any, ...]
    completions: tuple[Completion, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return "code" if isinstance(self.given, str) else "calls"

    @property
    def body(self) -> str | tuple[Any, ...]:
        return self.given


def _held_back(plan: Plan) -> dict[str, Any]:
    return {
        "kind": plan.kind,
        "message": getattr(plan, "message", ""),
        "constraints": getattr(plan, "constraints", ""),
    }


def _plain(value: Any) -> Any:
    return value.tolist() if hasattr(value, "tolist") else str(value)


def _call_line(trace: SkillTrace) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in trace.args.items())
    if trace.error is None:
        return f"{trace.skill}({args}): done"
    return f"{trace.skill}({args}): FAILED: {trace.error}"


def _facts(state: dict[str, Any]) -> str:
    """What holds what and what rests where, in a few words (the planner misses it in
    coordinates: after a slip it would place a block it no longer holds)."""
    held = state.get("holding")
    facts = [f"the gripper holds {held or 'nothing'}"]
    for name, obj in state.get("objects", {}).items():
        if name == held:
            continue
        where = f"in {obj['in_bin']}" if obj.get("in_bin") else f"on {obj.get('on') or 'nothing'}"
        facts.append(f"{name} {where}")
    return "; ".join(facts)


def summarize(result: ExecutionResult) -> str:
    """The monitor's report for the planner: the calls that ran (the failed one last) and why
    the plan failed. The scene itself reaches the planner as its world summary."""
    shown = result.traces[-MAX_FEEDBACK_CALLS:]
    lines = [f"The plan stopped ({result.outcome.replace('_', ' ')}): {result.error}"]
    if shown:
        omitted = len(result.traces) - len(shown)
        after = f" (after {omitted} earlier ones)" if omitted else ""
        lines.append(f"Calls that ran{after}:")
        lines += [f"  {_call_line(t)}" for t in shown]
    if result.stdout:
        lines.append(f"The program printed: {result.stdout.strip()[-300:]}")
    state = next((t.state_after for t in reversed(result.traces) if t.state_after), None)
    if state:
        lines.append(f"Now: {_facts(state)}.")
    lines.append("The scene above is the state now; plan only what is still needed from it.")
    return "\n".join(lines)


def _new_prompt(feedback: str | None, scene: str, asked: set[tuple[str, str]]) -> str | None:
    """`feedback`, told that it repeats when this scene was already planned with it: the same
    prompt gets the same answer (temperature 0, and the disk cache), so it must change to reach
    the model. `asked` holds every (feedback, scene) planned with so far."""
    text, repeats = feedback, 0
    while (text or "", scene) in asked:
        repeats += 1
        text = (
            f"{feedback}\nThe plans since this report was first given failed the same way "
            f"({repeats} time(s)): answer differently."
        )
    asked.add((text or "", scene))
    return text


def _repeat_feedback(first: int, feedback: str) -> str:
    return (
        f"{feedback}\nYour answer repeated the plan of round {first} exactly, which failed as "
        "above: answer differently."
    )


def _invalid_feedback(problems: tuple[str, ...]) -> str:
    listed = "\n".join(f"  {p}" for p in problems[:MAX_FEEDBACK_CALLS])
    return f"The previous answer was not a valid plan:\n{listed}\nAnswer again, as asked."


def planning_stats(plan: Plan) -> dict[str, Any]:
    """Tokens, seconds and LLM calls of one planning call (from its completions); a stepwise
    plan's choices are scored, not generated: its seconds only."""
    if isinstance(plan, StepwisePlan):
        return {"llm_calls": len(plan.chosen) + 1, "seconds": round(plan.seconds, 3)}
    completions = plan.completions
    stats = {
        "llm_calls": len(completions),
        "cached": sum(bool(c.cached) for c in completions),
        "prompt_tokens": sum(c.prompt_tokens for c in completions),
        "completion_tokens": sum(c.completion_tokens for c in completions),
        "seconds": round(sum(c.seconds for c in completions), 3),
    }
    goal = getattr(plan, "goal", None)  # the goal planner: what the LLM said, what it solved
    if getattr(plan, "constraints", ""):
        stats["constraints"] = plan.constraints
    if goal is not None:
        stats["goal"] = goal.described()
    return stats


def _plan_text(body: str | Sequence[Any] | StepwisePlan) -> str | list[str]:
    if isinstance(body, str):
        return body
    if isinstance(body, StepwisePlan):
        return [str(c) for c in body.chosen]
    return [str(c) for c in body]


def run_with_repair(
    instruction: str,
    planner: Planner,
    executor: PlanExecutor,
    *,
    max_rounds: int = 2,
    first_plan: str | list[Any] | None = None,
    on_plan: Callable[[int, str | list[str]], None] | None = None,
) -> RepairRecord:
    """Plan, run, and on failure replan from the current state, at most `max_rounds` times.

    `planner.plan(instruction, world_summary, feedback)` returns a `Plan`: a program, skill
    calls, or a `StepwisePlan` (SayCan) that chooses its calls as it runs.
    `first_plan` (a fixed program or call list) replaces round 0's planning call: the repair
    benchmark injects faults into such reference plans. `on_plan(round, plan)` sees each
    plan before it runs (the CLI prints it, so a person knows what to correct)."""
    if not 0 <= max_rounds <= MAX_ROUNDS:
        raise ValueError(f"`max_rounds` must be in [0, {MAX_ROUNDS}]. Got {max_rounds}.")
    rounds: list[Round] = []
    feedback: str | None = None
    asked: set[tuple[str, str]] = set()  # (feedback, scene) of every planning call
    failed: dict[tuple[str, str], tuple[int, str]] = {}  # (plan, scene) -> (round, its report)
    for index in range(max_rounds + 1):
        start = time.perf_counter()
        world_summary = executor.world.snapshot()
        scene = scene_summary(world_summary)  # as the planner's prompt shows it
        if index == 0 and first_plan is not None:
            plan: Plan = FixedPlan(first_plan if isinstance(first_plan, str) else tuple(first_plan))
            asked.add(("", scene))
        else:
            feedback = _new_prompt(feedback, scene, asked)
            plan = planner.plan(instruction, world_summary, feedback)
        if not plan.ok:
            rounds.append(
                Round(
                    index,
                    None,
                    "invalid_plan",
                    "; ".join(plan.problems),
                    feedback,
                    planning=planning_stats(plan),
                    seconds=time.perf_counter() - start,
                )
            )
            feedback = _invalid_feedback(tuple(plan.problems))
            continue
        if plan.kind in HELD_BACK:
            rounds.append(
                Round(
                    index,
                    None,
                    HELD_BACK[plan.kind],
                    getattr(plan, "message", "") or None,
                    feedback,
                    planning=planning_stats(plan),
                    seconds=time.perf_counter() - start,
                )
            )
            return RepairRecord(instruction, rounds, False, held_back=plan)
        body = plan.body
        key = (json.dumps(_plan_text(body)), scene)
        if plan.kind != "steps" and key in failed:  # SayCan chooses as it runs: no repeats
            first, report = failed[key]
            rounds.append(
                Round(
                    index,
                    _plan_text(body),
                    "repeated_plan",
                    f"the same plan as round {first} in the same scene, where it failed: "
                    f"{rounds[first].error}",
                    feedback,
                    planning=planning_stats(plan),
                    seconds=time.perf_counter() - start,
                )
            )
            feedback = _repeat_feedback(first, report)
            continue
        if on_plan is not None:
            on_plan(index, _plan_text(body))
        result = executor.run_plan(body)
        rounds.append(
            Round(
                index,
                _plan_text(body),
                result.outcome,
                result.error,
                feedback,
                result.traces,
                result.corrections,
                planning_stats(plan),
                time.perf_counter() - start,
            )
        )  # a stepwise plan's stats and calls are known only once it ran
        if result.outcome in ENDS:
            break
        feedback = summarize(result)
        failed.setdefault(key, (index, feedback))
    success = bool(rounds) and rounds[-1].outcome == "success"
    return RepairRecord(instruction, rounds, success)

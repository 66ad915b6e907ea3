"""Run a plan in the world: a skill list call by call, or a program through the sandbox.

Every skill call leaves a `SkillTrace` (arguments after validation, error, state before and
after, the skill's success check); the task's own check closes the run. A call fails the run
when it is refused, raises, or its success check is false, so the monitor sees the first thing
that went wrong. While a plan runs, a per-step world hook polls the corrections queue: a
correction interrupts the running skill and restarts it with new arguments, edits the rest of
the plan, skips the skill, or stops the robot where it is (`corrections.py`). A correction
waiting when a call is announced (`on_call` sees each call before it runs) applies to that call
before it moves: a person who sees a wrong step coming says so in time.

Before the robot moves, every plan is checked (`check.py`): a skill list's calls, or a
program's dry run in the sandbox, go through the skills' declared preconditions and effects
from the world's facts; SayCan's calls are checked one by one as they are chosen. A plan the
check catches ends with the outcome "caught" and the failed fact as its error, and nothing moved.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from robocompose.hierarchical.base import (
    SkillCall,
    SkillResult,
    SkillTrace,
    StepwisePlan,
    as_calls,
)
from robocompose.hierarchical.goal.facts import SceneNames
from robocompose.hierarchical.run.check import (
    CheckResult,
    check_calls,
    declared_operators,
    dry_run,
)
from robocompose.hierarchical.run.corrections import (
    CorrectionEdit,
    CorrectionLog,
    CorrectionNotUnderstood,
    Corrections,
    nudge,
    object_in_use,
    parse_correction,
    resolve_object,
    swap_objects,
)
from robocompose.hierarchical.sandbox import ApiFunction, SandboxAPI, SandboxLimits, run_program

HOLD_STEPS = 5  # control steps commanding the current pose after a stop: the arm settles
MAX_RESTARTS = 5  # corrections that may restart one call before it counts as failed
OUTCOMES = ("success", "task_failed", "skill_failed", "refused", "error", "stopped", "caught")


class Interrupted(Exception):
    """Raised by the corrections hook inside a skill: the skill stops at once."""

    def __init__(self, edit: CorrectionEdit) -> None:
        super().__init__(f"interrupted by a correction ({edit.kind})")
        self.edit = edit


class StopRequested(Exception):
    """A "stop" correction: the plan ends here and the robot holds."""


class CallFailed(Exception):
    """A call was refused, raised, or failed its success check; the trace says which."""

    def __init__(self, outcome: str, message: str) -> None:
        super().__init__(message)
        self.outcome = outcome


@dataclass
class ExecutionResult:
    """What running one plan did: every call's trace and how the run ended."""

    traces: list[SkillTrace]
    outcome: str  # one of OUTCOMES
    task_success: bool
    error: str | None = None
    corrections: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    stdout: str = ""  # what a program printed

    @property
    def failed(self) -> bool:
        return self.outcome != "success"


class PlanExecutor:
    """Runs plans on one world; a plan continues from whatever state the world is in.

    Args:
        world: a `SimWorld` (snapshot, hooks, render, object names).
        registry: a `SkillRegistry`: skills by name, `validate(name, args)`, perception
            `queries` (the programs may call them).
        task_check: the task's success, `task_check(world) -> bool` (default: the env's).
        corrections: the queue a person's corrections arrive on (None: no corrections).
        frame_every: film one frame every this many control steps (0: no video).
        limits: the sandbox's budgets for programs.
        check: check every plan before motion (the skills' declared operators on the facts).

    `on_call(call)`, when set, is told each call before it runs (a watcher may correct it).
    """

    def __init__(
        self,
        world: Any,
        registry: Any,
        *,
        task_check: Callable[[Any], bool] | None = None,
        corrections: Corrections | None = None,
        frame_every: int = 0,
        limits: SandboxLimits | None = None,
        check: bool = True,
    ) -> None:
        if frame_every < 0:
            raise ValueError(f"`frame_every` must be >= 0. Got {frame_every}.")
        self.world, self.registry = world, registry
        self.task_check = task_check or (lambda w: w.success())
        self.corrections = corrections
        self.frame_every = frame_every
        self.limits = limits or SandboxLimits()
        self.check = check
        self.last_check: CheckResult | None = None
        self.frames: list[np.ndarray] = []
        self._steps = 0
        self._remaining: list[SkillCall] = []
        self._current: SkillCall | None = None
        self._rewrites: list[tuple[str, str]] = []  # object swaps a program's later calls follow
        self._in_program = False
        self._log: list[dict[str, Any]] = []
        self._done: list[SkillCall] = []  # calls of the current plan that ran
        self._start: dict[str, Any] = {}  # the world when the current plan began
        self.on_call: Callable[[SkillCall], None] | None = None
        world.add_hook(self._on_step)

    def close(self) -> None:
        """Detach from the world (its hooks no longer call this executor)."""
        self.world.remove_hook(self._on_step)

    # -- the kinds of plan --------------------------------------------------------------------
    def run_plan(self, plan: str | Sequence[Any] | StepwisePlan) -> ExecutionResult:
        """A program (str) through the sandbox, a stepwise plan, or a list of skill calls;
        checked before motion first (a stepwise plan: each call as it is chosen)."""
        if self.check and not isinstance(plan, StepwisePlan):
            caught = self._precheck(plan)
            if caught is not None:
                return caught
        if isinstance(plan, str):
            return self.run_program(plan)
        if isinstance(plan, StepwisePlan):
            return self.run_steps(plan)
        return self.run_calls(as_calls(plan))

    def run_steps(self, plan: StepwisePlan) -> ExecutionResult:
        """Ask for one call at a time and run it, until done, `max_steps`, a failure or a stop
        (out of steps, the task's check decides)."""
        start, traces, history = time.perf_counter(), [], []
        self._begin([], in_program=False)

        def body() -> None:
            for _ in range(plan.max_steps):
                t0 = time.perf_counter()
                call = plan.next_call(history)
                plan.seconds += time.perf_counter() - t0
                if call is None:
                    return
                plan.chosen.append(call)
                if self.check:
                    found = self._check([call])
                    if not found.ok:
                        raise CallFailed("caught", found.feedback())
                self.call(call, traces)
                history.append(call)

        return self._guarded(body, traces, start)

    def _check(self, plan: str | Sequence[Any]) -> CheckResult:
        facts = self.world.facts()
        if isinstance(plan, str):
            found = dry_run(plan, facts, self.registry, self.world, self.limits)
        else:
            operators = declared_operators(self.registry)
            found = check_calls(as_calls(plan), facts, operators, SceneNames.of(self.world))
        self.last_check = found
        return found

    def _precheck(self, plan: str | Sequence[Any]) -> ExecutionResult | None:
        """The result of a plan the check catches (nothing moved), or None to run it."""
        start = time.perf_counter()
        found = self._check(plan)
        if found.ok:
            return None
        self._begin([], in_program=isinstance(plan, str))
        return self._result([], "caught", found.feedback(), start)

    def run_calls(self, calls: Sequence[SkillCall]) -> ExecutionResult:
        """Run a skill list in order until it ends, a call fails, or a stop arrives."""
        start, traces = time.perf_counter(), []
        self._begin(calls, in_program=False)

        def body() -> None:
            while self._remaining:
                self.call(self._remaining.pop(0), traces)

        return self._guarded(body, traces, start)

    def _begin(self, calls: Sequence[SkillCall], in_program: bool) -> None:
        self._remaining, self._log, self._rewrites, self._done = list(calls), [], [], []
        self._start = self.world.snapshot() if self.corrections is not None else {}
        self._in_program = in_program

    def _guarded(
        self, body: Callable[[], None], traces: list[SkillTrace], start: float
    ) -> ExecutionResult:
        """Run `body`; a failed call or a stop ends it (a stop holds the arm first)."""
        try:
            body()
        except CallFailed as e:
            return self._result(traces, e.outcome, str(e), start)
        except StopRequested as e:
            self.hold()
            return self._result(traces, "stopped", str(e), start)
        return self._result(traces, None, None, start)

    def run_program(self, code: str) -> ExecutionResult:
        """Run `code` in the sandbox; each skill call it sends is executed (and traced) here."""
        start, traces = time.perf_counter(), []
        self._begin([], in_program=True)
        failure: list[CallFailed | StopRequested] = []

        def execute(name: str, args: dict[str, Any]) -> bool:
            if failure:  # a stop or failure ends the program even if it catches the error
                raise failure[0]
            try:
                return self.call(SkillCall(name, dict(args)), traces)
            except (CallFailed, StopRequested) as e:
                failure.append(e)
                raise

        api = SandboxAPI.from_skills(self.registry, execute, self._perception())
        program = run_program(code, api, self.limits)
        refused = [c for c in program.calls if not c.executed]
        for record in refused:
            error = f"refused: {record.error}"
            traces.append(SkillTrace(record.name, dict(record.args), error=error))
        if failure and isinstance(failure[0], StopRequested):
            self.hold()
            return self._result(traces, "stopped", str(failure[0]), start, program.stdout)
        if failure:
            return self._result(traces, failure[0].outcome, str(failure[0]), start, program.stdout)
        if program.refused or refused:
            return self._result(traces, "refused", program.error, start, program.stdout)
        if not program.ok:
            return self._result(traces, "error", program.error, start, program.stdout)
        return self._result(traces, None, None, start, program.stdout)

    def _perception(self) -> list[ApiFunction]:
        world = self.world
        return [
            ApiFunction(q.name, q.params, lambda args, q=q: q.fn(world, **args), q.description)
            for q in getattr(self.registry, "queries", {}).values()
        ]

    # -- one call -----------------------------------------------------------------------------
    def call(self, call: SkillCall, traces: list[SkillTrace]) -> bool:
        """Validate and run one call, restarting it when a correction changes it; False when
        a correction skipped it. Raises CallFailed or StopRequested."""
        call = self._rewritten(call)
        for _ in range(MAX_RESTARTS + 1):
            announced = self._announce(call)
            if announced is None:
                return False
            call = announced
            trace = SkillTrace(call.skill, dict(call.args))
            traces.append(trace)
            try:
                args = self.registry.validate(call.skill, dict(call.args))
            except (ValueError, TypeError, KeyError) as e:
                trace.error = f"refused: {e}"
                raise CallFailed("refused", f"{call}: {trace.error}") from None
            call = SkillCall(call.skill, args)
            trace.args = dict(args)
            edit = self._run(call, trace)
            if edit is None:
                self._done.append(call)
                return True
            if edit.kind == "skip":
                return False
            call = self._edited(call, edit)
        raise CallFailed("skill_failed", f"{call}: interrupted {MAX_RESTARTS + 1} times")

    def _announce(self, call: SkillCall) -> SkillCall | None:
        """Tell `on_call` about `call`, then apply a correction already waiting: the call to
        run (edited or not), or None when it was skipped. Raises StopRequested on a stop."""
        for _ in range(MAX_RESTARTS + 1):
            if self.on_call is not None:
                self.on_call(call)
            waiting = self.corrections.queue.poll() if self.corrections is not None else None
            if waiting is None:
                return call
            self._current = call
            try:
                edit = self._interpret(*waiting)
            finally:
                self._current = None
            if edit is None:
                return call
            if edit.kind == "stop":
                raise StopRequested(f"stopped by the correction {waiting[1]!r}")
            if edit.kind == "skip":
                return None
            call = self._edited(call, edit)
        raise CallFailed(
            "skill_failed", f"{call}: corrected {MAX_RESTARTS + 1} times before it ran"
        )

    def _run(self, call: SkillCall, trace: SkillTrace) -> CorrectionEdit | None:
        """Run the skill into `trace`; the correction that interrupted it, if one did."""
        skill = self.registry[call.skill]
        trace.state_before = self.world.snapshot()
        self._current, steps_before, t0 = call, self._steps, time.perf_counter()
        try:
            result: SkillResult = skill.run(self.world, **call.args)
        except Interrupted as e:
            trace.error = f"interrupted: {e.edit.kind}"
            self._finish(trace, steps_before, t0)
            return e.edit
        except StopRequested:
            trace.error = "stopped by a correction"
            self._finish(trace, steps_before, t0)
            raise
        except Exception as e:  # the skill's own failure: the monitor reports it to the LLM
            trace.error = f"{type(e).__name__}: {e}"
            self._finish(trace, steps_before, t0)
            raise CallFailed("skill_failed", f"{call} raised {trace.error}") from None
        finally:
            self._current = None
        checked = skill.success(self.world, **call.args) if skill.success else True
        trace.success_check = bool(checked and result.success)
        if not trace.success_check:
            trace.error = result.message or "its success check is false"
        self._finish(trace, steps_before, t0)
        if not trace.success_check:
            raise CallFailed("skill_failed", f"{call} failed: {trace.error}")
        return None

    def _finish(self, trace: SkillTrace, steps_before: int, t0: float) -> None:
        trace.state_after = self.world.snapshot()
        trace.steps = self._steps - steps_before
        trace.seconds = time.perf_counter() - t0

    def hold(self) -> None:
        """Halt where the gripper is, keeping its grip (a held block is not dropped)."""
        grip = float(self.world.last_action[3])
        for _ in range(min(HOLD_STEPS, self.world.steps_left)):
            self.world.step(np.append(self.world.gripper_position(), grip))

    # -- corrections --------------------------------------------------------------------------
    def _on_step(self, world: Any) -> None:
        """The per-step hook: film, and apply a waiting correction to the running skill."""
        self._steps += 1
        if self.frame_every and self._steps % self.frame_every == 0:
            frame = world.render()
            if frame is not None:
                self.frames.append(frame)
        if self.corrections is None or self._current is None:
            return
        waiting = self.corrections.queue.poll()
        if waiting is None:
            return
        edit = self._interpret(*waiting)
        if edit is None:
            return
        if edit.kind == "stop":
            raise StopRequested(f"stopped by the correction {waiting[1]!r}")
        raise Interrupted(edit)

    def _interpret(self, received_s: float, text: str) -> CorrectionEdit | None:
        """The edit `text` asks of the running call (None: not applicable, logged as such);
        a substitution also rewrites the rest of the plan."""
        assert self.corrections is not None and self._current is not None
        current = self._current
        objects = [*self.world.objects(), *self.world.bins()]
        before = [current, *self._remaining]
        try:
            edit = parse_correction(text, objects, self.corrections.llm)
        except CorrectionNotUnderstood as e:
            return self._record(received_s, text, None, str(e), before, before)
        skill = self.registry.get(current.skill)  # None: an announced call of no known skill
        if edit.kind == "nudge" and (skill is None or nudge(current, skill, edit.offset_m) is None):
            reason = f"{current.skill} has no position argument to move"
            return self._record(received_s, text, edit, reason, before, before)
        if edit.kind == "substitute":
            said_old = resolve_object(edit.old, None, objects) if edit.old else None
            old = said_old or object_in_use(before, self.registry, objects)
            new = resolve_object(edit.new or "", old, objects)
            if old is None or new is None or old == new:
                reason = f"nothing in the plan to replace with {edit.new!r}"
                return self._record(received_s, text, edit, reason, before, before)
            edit = CorrectionEdit("substitute", new=new, old=old, source=edit.source)
            self._remaining = [swap_objects(c, old, new) for c in self._remaining]
            self._rewrites.append((old, new))
        after = {
            "stop": [],
            "skip": list(self._remaining),
        }.get(edit.kind, [self._edited(current, edit), *self._remaining])
        self._record(received_s, text, edit, None, before, after)
        return edit

    def _edited(self, call: SkillCall, edit: CorrectionEdit) -> SkillCall:
        if edit.kind == "replace" and edit.skill is not None:
            return SkillCall(edit.skill, dict(edit.args or {}))
        if edit.kind == "nudge":
            return nudge(call, self.registry[call.skill], edit.offset_m) or call
        if edit.kind == "substitute" and edit.old and edit.new:
            return swap_objects(call, edit.old, edit.new)
        return call

    def _rewritten(self, call: SkillCall) -> SkillCall:
        """A program's calls follow the object swaps corrections asked for (a skill list's
        remaining calls were rewritten in place, and swapping twice would undo it)."""
        if not self._in_program:
            return call
        for old, new in self._rewrites:
            call = swap_objects(call, old, new)
        return call

    def _record(
        self,
        received_s: float,
        text: str,
        edit: CorrectionEdit | None,
        error: str | None,
        before: list[SkillCall],
        after: list[SkillCall],
    ) -> None:
        assert self.corrections is not None
        entry: dict[str, Any] = dict(
            received_s=received_s,
            text=text,
            edit=edit,
            error=error,
            state=self.world.snapshot(),
            plan_before=before,
            plan_after=after,
            done=list(self._done),
            start_state=self._start,
        )
        if self.corrections.log is not None:
            self._log.append(self.corrections.log.append(**entry))
        else:
            self._log.append(CorrectionLog.entry(**entry))

    # -- the end of a run ---------------------------------------------------------------------
    def _result(
        self,
        traces: list[SkillTrace],
        outcome: str | None,
        error: str | None,
        start: float,
        stdout: str = "",
    ) -> ExecutionResult:
        task_success = bool(self.task_check(self.world))
        if outcome is None:
            outcome = "success" if task_success else "task_failed"
            error = None if task_success else "every call ran but the task's check is false"
        return ExecutionResult(
            traces,
            outcome,
            task_success,
            error,
            list(self._log),
            time.perf_counter() - start,
            stdout,
        )

    def save_video(self, path: str | Path, fps: int = 10) -> Path | None:
        """The frames filmed so far as an mp4 (None when nothing was filmed)."""
        if not self.frames:
            return None
        import imageio

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        imageio.mimsave(path, self.frames, fps=fps)
        return path

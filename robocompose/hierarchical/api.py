"""Plan with an LLM and run the plan in sim, from Python or from `robocompose plan`.

    from robocompose.hierarchical.api import plan_and_run
    run = plan_and_run("put green on red then blue on green", planner="skills")
    run.record.success, run.record.rounds[0].traces, run.video, run.record_path

    runner = Runner(PlanConfig(instruction="...", planner="code", llm=LLMConfig(model="smollm2")))
    threading.Timer(3.0, runner.correct, ["pick the blue one instead"]).start()
    result = runner.run()          # corrections may arrive from any thread while it runs

The scene is one of the long-horizon items: task=Stack (stack three blocks in a named
order) or task=SortBins (blocks into the bins of their colour), and `phrasing` picks which item
(its instruction, scene and seed); a typed `instruction` replaces the text, `order` the Stack
order the success check wants. The planner (goal | code | skills | saycan) talks to a local GGUF
model or an OpenAI-compatible endpoint, and failures are repaired up to `repair_rounds` times.

The goal planner (the default) may ask back or refuse instead of moving: the run then ends with
`result.outcome` "asked" or "declined" and `result.message` says why; `runner.answer(text)`
plans again with the answer (an option picked by number, or words added to the instruction).
Its run succeeds when the goal it solved holds (the env's own check when no goal was solved).
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robocompose.choices import check_choice, check_choices, one_of
from robocompose.hierarchical.base import LLMBackend, Planner, StepwisePlan
from robocompose.hierarchical.instructions import (
    STACK_THREE,
    InstructionItem,
    instruction_items,
    make_world,
    with_order,
)
from robocompose.hierarchical.llm import LLMConfig
from robocompose.hierarchical.planners.goal import READINGS
from robocompose.hierarchical.run.corrections import CorrectionLog, CorrectionQueue, Corrections
from robocompose.hierarchical.run.plan_executor import PlanExecutor
from robocompose.hierarchical.run.repair import MAX_ROUNDS, RepairRecord, run_with_repair
from robocompose.sim.task_config import TaskConfig

PLANNERS = ("goal", "code", "skills", "saycan")
# the long-horizon category on each env: "Stack" -> "stack_three"
ENV_CATEGORIES = {i.scene.env: i.category for i in instruction_items("long_horizon")}


@dataclass(kw_only=True)
class PlanConfig:
    """`robocompose plan`: an instruction, the scene it runs in, the planner and its LLM."""

    instruction: str = ""  # "" -> the phrasing's own instruction
    task: TaskConfig | str = "Stack"  # the scene's env (task/ group): Stack | SortBins
    phrasing: int = 0  # which of the task's items: its scene, seed and default instruction
    order: list[str] = field(default_factory=list)  # stack_three: bottom to top ([] -> item's)
    seed: int | None = None  # the scene's seed (None -> the item's)
    # facts the scene starts from, e.g. [[on, green_block, red_block]] (SimWorld.arrange)
    start: list[list[str]] = field(default_factory=list)
    planner: str = one_of(PLANNERS, "goal")
    # the planner's LLM: llm.backend=local (a GGUF model via llama.cpp) or openai (any compatible
    # endpoint, llm.base_url), llm.model=qwen2.5-coder-1.5b (default) | smollm2 | a .gguf path,
    # llm.n_threads=1 (faster on a busy machine), llm.cache=false
    llm: LLMConfig = field(default_factory=LLMConfig)
    # the goal planner's readings of the request, which must agree before a goal stands:
    # "adapted" (a local model with its shipped adapter, reading the request lifted to
    # placeholders under two scene listings), "both" (those, checked by the model without the
    # adapter under the few-shot prompt: fewer wrong goals, many more questions), "examples"
    # (the few-shot model under three example orders). A model without an adapter, or a remote
    # backend, always reads with "examples". See docs/planning.md.
    goal_readings: str = one_of(READINGS, "adapted")
    repair_rounds: int = 2
    check: bool = True  # check every plan before motion (false: to measure what it saves)
    skills: dict[str, str] = field(default_factory=dict)  # e.g. {place_in: policy:<ckpt>}
    # correction logs of earlier runs: their corrected plans join the prompt (code and skills)
    correction_logs: list[str] = field(default_factory=list)
    correction_examples: int = 3  # how many corrected plans, the nearest instructions
    step_budget: int = 2000  # env steps for the whole run
    video: bool = True
    corrections: bool = True  # the CLI reads corrections from stdin, one per line
    out: str = "runs/plan"

    def __post_init__(self) -> None:
        check_choice("task", self.env_name, tuple(ENV_CATEGORIES))
        check_choices(self)
        shipped = instruction_items("long_horizon", [self.category])
        count = len(shipped)
        if not 0 <= self.phrasing < count:
            raise ValueError(
                f"`phrasing` must be in [0, {count - 1}] for {self.env_name}. Got {self.phrasing}."
            )
        blocks = list(shipped[0].scene.blocks)
        if self.order and (self.category != STACK_THREE or sorted(self.order) != sorted(blocks)):
            raise ValueError(
                f"`order` applies to task=Stack and must list {blocks} bottom to "
                f"top. Got {self.order} for task={self.env_name}."
            )
        if not 0 <= self.repair_rounds <= MAX_ROUNDS:
            raise ValueError(
                f"`repair_rounds` must be in [0, {MAX_ROUNDS}]. Got {self.repair_rounds}."
            )
        if self.step_budget < 1:
            raise ValueError(f"`step_budget` must be >= 1. Got {self.step_budget}.")
        if self.correction_logs and self.planner not in ("code", "skills"):
            raise ValueError(
                f"`correction_logs` apply to planner=code or skills, not {self.planner}."
            )
        if self.correction_examples < 1:
            raise ValueError(f"`correction_examples` must be >= 1. Got {self.correction_examples}.")

    @property
    def env_name(self) -> str:
        return self.task if isinstance(self.task, str) else self.task.name

    @property
    def category(self) -> str:
        """The long-horizon category on this env (Stack: stack_three, SortBins: sort_by_colour)."""
        return ENV_CATEGORIES.get(self.env_name, "")

    def item(self) -> InstructionItem:
        """The long-horizon item the run uses: scene, seed and instruction, with the overrides."""
        item = instruction_items("long_horizon", [self.category])[self.phrasing]
        if self.order:
            item = with_order(item, self.order)
        return dataclasses.replace(
            item,
            instruction=self.instruction.strip() or item.instruction,
            seed=item.seed if self.seed is None else self.seed,
        )


def make_backends(config: PlanConfig) -> tuple[LLMBackend, LLMBackend | None]:
    """The planner's LLM and, for the goal planner, its second reader (None: none). A model
    that cannot be found or trusted is a bad `llm.model` (a ValueError naming it)."""
    from robocompose.hierarchical.llm import backend_from_config
    from robocompose.hierarchical.llm.models import ModelError
    from robocompose.hierarchical.planners.goal import readers

    try:
        if config.planner == "goal":
            return readers(config.llm, config.goal_readings)
        return backend_from_config(config.llm), None
    except ModelError as error:
        raise ValueError(f"`llm.model`: {error}") from None


class SayCanRounds:
    """SayCan behind the planners' `plan(...)`: each round is a closed-loop run that scores the
    next call in the world as it is (feedback is not needed: it sees the failed state)."""

    def __init__(self, saycan: Any, world: Any) -> None:
        self.saycan, self.world = saycan, world

    def plan(
        self, instruction: str, world_summary: Any, feedback: str | None = None
    ) -> StepwisePlan:
        return StepwisePlan(
            lambda history: self.saycan.step(instruction, history, self.world).call,
            max_steps=self.saycan.config.max_steps,
        )


def make_planner(
    kind: str, llm: LLMBackend, registry: Any, world: Any, second: LLMBackend | None = None
) -> Planner:
    """The planner named `kind` (one of `PLANNERS`); `second`: the goal planner's second reader
    (the few-shot model that checks an adapted model's readings)."""
    check_choice("planner", kind, PLANNERS)
    from robocompose.hierarchical.llm import LocalLLM

    backend = getattr(llm, "backend", llm)  # behind the cache or not
    local = isinstance(backend, LocalLLM)
    if kind == "goal":
        from robocompose.hierarchical.planners.goal import GoalPlanner, reading_config

        return GoalPlanner(llm, registry, world, reading_config(llm, second), second)
    if kind == "code":
        from robocompose.hierarchical.planners.code import CodePlanner

        return CodePlanner(llm, registry)
    if kind == "skills":
        from robocompose.hierarchical.planners.skills import SkillPlanner, SkillPlannerConfig

        constrain = "grammar" if local else "json_schema"
        return SkillPlanner(llm, registry, SkillPlannerConfig(constrain=constrain))
    from robocompose.hierarchical.planners.saycan import SayCanPlanner

    return SayCanRounds(SayCanPlanner(llm, registry), world)


@dataclass
class RunResult:
    """A finished run: the repair record, and where its record, video and corrections went."""

    record: RepairRecord
    record_path: Path
    video: Path | None
    corrections_path: Path
    item: InstructionItem

    @property
    def success(self) -> bool:
        return self.record.success

    @property
    def outcome(self) -> str:
        """ "success", "failed", or "asked" / "declined" (the planner held back: nothing moved)."""
        if self.record.held_back is not None:
            return self.record.rounds[-1].outcome
        return "success" if self.success else "failed"

    @property
    def message(self) -> str | None:
        """The question asked or the reason declined, else None."""
        held = self.record.held_back
        return getattr(held, "message", None) if held is not None else None


class Runner:
    """One instruction in one scene: build world, skills, LLM and planner, then `run()`.

    `correct(text)` may be called from any thread while `run()` is going: the running skill
    picks it up at its next control step."""

    def __init__(self, config: PlanConfig, backend: Any = None, second_backend: Any = None) -> None:
        from robocompose.hierarchical.skills.learned import registry_for

        self.config = config
        self.item = config.item()
        if backend is None:  # a bad model fails before the sim starts
            backend, second_backend = make_backends(config)
        self.backend = backend
        render = "rgb_array" if config.video else None
        self.world = make_world(self.item, step_budget=config.step_budget, render_mode=render)
        if config.start:
            self.world.arrange(config.start)
        self.registry = registry_for(self.world, config.skills)
        self.planner: Planner = make_planner(
            config.planner, self.backend, self.registry, self.world, second_backend
        )
        if config.correction_logs:
            from robocompose.hierarchical.run.correction_bank import (
                CorrectedPlanner,
                CorrectionBank,
            )

            bank = CorrectionBank.from_logs(config.correction_logs)
            self.planner = CorrectedPlanner(self.planner, bank, config.correction_examples)
        self.out = Path(config.out)
        self.queue = CorrectionQueue()
        context = {"instruction": self.item.instruction, "category": self.item.category}
        context |= {"seed": self.item.seed, "run": uuid.uuid4().hex[:12]}
        log = CorrectionLog(self.out / "corrections.jsonl", context)
        corrections = Corrections(self.queue, log, self.backend)
        self.executor = PlanExecutor(
            self.world,
            self.registry,
            task_check=self._task_check,
            corrections=corrections,
            check=config.check,
            frame_every=1 if config.video else 0,
        )
        self.instruction = self.item.instruction
        self.last: RunResult | None = None

    def _task_check(self, world: Any) -> bool:
        """The goal planner's solved goal holds; the env's own check otherwise."""
        goal_planner = getattr(self.planner, "reached", None)
        if goal_planner is not None and getattr(self.planner, "goal", None) is not None:
            return bool(goal_planner(world))
        return world.success()

    def correct(self, text: str) -> None:
        """A language correction for the running plan ("a bit more to the left", "stop")."""
        self.queue.put(text)

    def run(self, on_plan: Callable[[int, str | list[str]], None] | None = None) -> RunResult:
        """Plan, run, repair; write the JSON record (and the video) to `out`. `on_plan(round,
        plan)` sees each plan before it runs."""
        start = time.perf_counter()
        record = run_with_repair(
            self.instruction,
            self.planner,
            self.executor,
            max_rounds=self.config.repair_rounds,
            on_plan=on_plan,
        )
        stem = f"{self.item.category}_{self.config.planner}_{time.strftime('%Y%m%d-%H%M%S')}"
        video = self.executor.save_video(self.out / f"{stem}.mp4") if self.config.video else None
        path = self.out / f"{stem}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "config": dataclasses.asdict(self.config),
            "item": dataclasses.asdict(self.item),
            "model": getattr(self.backend, "model", ""),
            "seconds": round(time.perf_counter() - start, 3),
            "video": str(video) if video else None,
            **record.to_json(),
        }
        path.write_text(json.dumps(payload, indent=1, default=str))
        self.last = RunResult(record, path, video, self.out / "corrections.jsonl", self.item)
        return self.last

    def answer(
        self, text: str, on_plan: Callable[[int, str | list[str]], None] | None = None
    ) -> RunResult:
        """Plan again after the planner asked or declined: `text` picks one of the question's
        options ("2", "the first") without an LLM call, or else joins the instruction."""
        from robocompose.hierarchical.goal.solver import choose

        held = self.last.record.held_back if self.last is not None else None
        if held is None:
            raise ValueError("there is no question to answer: the last run did not ask.")
        question = getattr(held, "question", None)
        picked = choose(question, text) if question is not None else None
        if picked is not None:
            self.planner.choose(self.instruction, picked, held.constraints)
        else:
            self.instruction = f"{self.instruction.rstrip('.')}; {text.strip()}"
        return self.run(on_plan)

    def close(self) -> None:
        self.executor.close()
        self.world.close()


def _trace_row(trace: Any) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in trace.args.items())
    status = "ok" if trace.error is None else trace.error
    return f"| {trace.skill}({args}) | {status} | {trace.steps} | {trace.seconds:.2f} |"


def show_plan(plan: str | list[str]) -> str:
    """A program as is, a skill list one call a line (SayCan's chooses as it goes)."""
    if isinstance(plan, str):
        return plan
    return "\n".join(plan) if plan else "(chosen one call at a time as it runs)"


def describe(result: RunResult, plans: bool = True) -> str:
    """Every round's plan (unless `plans` is off) and trace table, then the outcome and where
    the files went."""
    lines = []
    for r in result.record.rounds:
        lines.append(f"\n## round {r.index}: {r.outcome}" + (f" ({r.error})" if r.error else ""))
        stats = r.planning
        if stats.get("llm_calls"):
            tokens = stats.get("prompt_tokens", 0) + stats.get("completion_tokens", 0)
            counted = f", {tokens} tokens" if "prompt_tokens" in stats else ""
            lines.append(
                f"planning: {stats['llm_calls']} LLM call(s){counted}, {stats['seconds']:.1f} s"
            )
        if plans and r.plan is not None:
            lines.append(show_plan(r.plan))
        if r.traces:
            lines += ["| call | result | steps | s |", "|---|---|---|---|"]
            lines += [_trace_row(t) for t in r.traces]
    verdict = "success" if result.success else "failed"
    lines.append(
        f"\n{verdict} after {len(result.record.rounds)} round(s); record: "
        f"{result.record_path}" + (f"; video: {result.video}" if result.video else "")
    )
    return "\n".join(lines)


def plan_and_run(instruction: str = "", backend: Any = None, **settings: Any) -> RunResult:
    """Plan `instruction` with an LLM and run it in sim; `settings` are `PlanConfig` fields
    (task, phrasing, planner, llm, repair_rounds, seed, video, out, ...); `backend`: an LLM
    backend already made (default: the one `llm` describes)."""
    runner = Runner(PlanConfig(instruction=instruction, **settings), backend)
    try:
        return runner.run()
    finally:
        runner.close()

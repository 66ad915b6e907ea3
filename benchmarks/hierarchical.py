"""Hierarchical planning: LLM planners on the long-horizon items, and repair after injected faults.

Parts (each episode appended to a JSONL under --out-dir as it ends; a rerun skips what is there,
and the LLM disk cache makes repeated planning calls free):
- plans/<model>/<planner>: every phrasing of stack_three and sort_by_colour planned by the skill
  planner (JSON under the registry's grammar) or the code planner (a program run in the
  sandbox), then up to --repair-rounds repairs. Without repair = round 0; with repair = the end.
  A valid plan = round 0's output was a plan the registry or the sandbox accepts.
- faults/<model>: the fixed reference program of an item, with a fault injected while it runs
  ("slip": the first placed block falls from the gripper while it is carried; "move": after the
  first place, that block is moved elsewhere while the next block is picked); the code planner
  repairs from the state the fault left. Recovery = task success after repair, over the
  episodes where the reference program failed.
- unseen/<model>: the goal planner on the test split under names it never saw
  (`unseen_names.py`: teal, magenta, "the mug", ...), judged on the goal it solves; the
  `unseen_names` key, shaped like `outcomes`.
- reading/<model>: the goal planner on --split under its own names, judged the same way (no
  motion: minutes, not an hour, to compare settings on the dev split); the `reading` key.
- Per planning call: prompt and completion tokens and seconds (calls answered by the cache
  are counted for tokens only).

Success rates come with their episode counts and Wilson 95% intervals; every planner and model
runs the same items (same scenes and seeds).

    python benchmarks/hierarchical.py [--parts plans,faults] [--models smollm2,qwen2.5-coder-1.5b]
        [--planners skills,code] [--items-per-task 24] [--repair-rounds 2] [--n-threads 1]
    python benchmarks/hierarchical.py --summarize   # the JSON from the episodes run so far

Parts may run in separate processes (one per model or part, each with its own --results); a
final --summarize writes the JSON from every episode file.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from common import ResultsFile, add_parts, read_jsonl
from unseen_names import NamedView, judged, names_for, reworded

import robocompose.hierarchical.planners.code  # noqa: F401 (loaded up front)
import robocompose.hierarchical.planners.skills  # noqa: F401
from robocompose.hierarchical.api import make_planner
from robocompose.hierarchical.base import LLMBackend
from robocompose.hierarchical.instructions import (
    GOAL,
    OUTCOMES,
    InstructionItem,
    category_names,
    fact_text,
    instruction_items,
    make_world,
    outcome,
    reference_plan,
    reference_program,
    unmet,
)
from robocompose.hierarchical.llm import LLMConfig, make_backend
from robocompose.hierarchical.planners.goal import GoalPlanner, readers
from robocompose.hierarchical.run.plan_executor import PlanExecutor
from robocompose.hierarchical.run.repair import RepairRecord, run_with_repair
from robocompose.hierarchical.skills.scripted import build_registry
from robocompose.hierarchical.world import FaultHook
from robocompose.stats import success_rate

RESULTS = ResultsFile("hierarchical.json", writer="hierarchical.py", indent=1)
MODELS = ("smollm2", "qwen2.5-coder-1.5b")
PLANNERS = ("skills", "code")
PARTS = ("plans", "faults", "families", "unseen", "reading")
FAULTS = ("slip", "move")
STEP_BUDGET = 2000


def _rate(flags: list[bool]) -> dict[str, Any]:
    rate = success_rate(sum(flags), len(flags))
    return {"rate": rate.rate, "ci95": [rate.ci_low, rate.ci_high], "n": len(flags),
            "text": str(rate)}  # fmt: skip


def _items(per_category: int) -> list[InstructionItem]:
    """The first `per_category` long-horizon items of each category."""
    return [i for i in instruction_items("long_horizon") if i.index < per_category]


def _done(path: Path) -> dict[str, dict[str, Any]]:
    return {row["key"]: row for row in read_jsonl(path)}


def _append(path: Path, row: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(row, default=str) + "\n")


def _calls(record: RepairRecord) -> list[dict[str, Any]]:
    return [r.planning for r in record.rounds if r.planning.get("llm_calls")]


def plan_episode(llm: Any, item: InstructionItem, planner: str, rounds: int) -> dict[str, Any]:
    """One phrasing planned and run, with up to `rounds` repairs."""
    world = make_world(item, step_budget=STEP_BUDGET)
    registry = build_registry(world)
    executor = PlanExecutor(world, registry)
    start = time.perf_counter()
    record = run_with_repair(
        item.instruction, make_planner(planner, llm, registry, world), executor, max_rounds=rounds
    )
    world.close()
    return {
        "valid_plan": record.valid_first_plan,
        "success_no_repair": record.success_first_round,
        "success": record.success,
        "outcomes": [r.outcome for r in record.rounds],
        "first_error": record.rounds[0].error,
        "first_plan": record.rounds[0].plan,
        "calls": _calls(record),
        "seconds": round(time.perf_counter() - start, 2),
    }


def fault_episode(llm: Any, item: InstructionItem, fault: str, rounds: int) -> dict[str, Any]:
    """The item's reference program with `fault` injected, repaired by the code planner."""
    world = make_world(item, step_budget=STEP_BUDGET)
    first = reference_plan(item)[1]["args"]["obj"]  # the block the first place puts down
    hook = (
        FaultHook("slip", at_call=1, at_step=3)  # carried by place: falls from the gripper
        if fault == "slip"
        else FaultHook("move", at_call=2, at_step=3, block=first)  # placed, then moved away
    )
    world.add_hook(hook)
    registry = build_registry(world)
    executor = PlanExecutor(world, registry)
    record = run_with_repair(
        item.instruction, make_planner("code", llm, registry, world), executor,
        max_rounds=rounds, first_plan=reference_program(item),
    )  # fmt: skip
    world.close()
    return {
        "injected": hook.record is not None,
        "fault": hook.record,
        "failed_without_repair": not record.success_first_round,
        "success": record.success,
        "outcomes": [r.outcome for r in record.rounds],
        "repair_plans": [r.plan for r in record.rounds[1:]],
        "calls": _calls(record),
    }


def _call_stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
    calls = [c for row in rows for c in row["calls"]]
    fresh = [c for c in calls if not c.get("cached")]
    tokens = [c["prompt_tokens"] + c["completion_tokens"] for c in calls]
    return {
        "planning_calls": len(calls),
        "mean_prompt_tokens": round(statistics.mean(c["prompt_tokens"] for c in calls), 1)
        if calls else None,
        "mean_completion_tokens": round(statistics.mean(c["completion_tokens"] for c in calls), 1)
        if calls else None,
        "mean_tokens": round(statistics.mean(tokens), 1) if tokens else None,
        "timed_calls": len(fresh),  # answered by the model, not the cache
        "mean_seconds": round(statistics.mean(c["seconds"] for c in fresh), 2) if fresh else None,
        "median_seconds": round(statistics.median(c["seconds"] for c in fresh), 2)
        if fresh else None,
    }  # fmt: skip


def summarize(out_dir: Path, settings: dict[str, Any]) -> dict[str, Any]:
    """Every part's rates from its JSONL (whatever has run so far)."""
    summary: dict[str, Any] = {"settings": settings, "plans": {}, "faults": {}}
    for path in sorted(out_dir.glob("plans_*.jsonl")):
        rows = list(_done(path).values())
        model, planner = rows[0]["model"], rows[0]["planner"]
        entry: dict[str, Any] = {}
        for category in ("stack_three", "sort_by_colour", "all"):
            sel = [r for r in rows if category in ("all", r["task"])]  # rows say "task"
            if sel:
                entry[category] = {
                    "valid_plan": _rate([r["valid_plan"] for r in sel]),
                    "success_no_repair": _rate([r["success_no_repair"] for r in sel]),
                    "success_with_repair": _rate([r["success"] for r in sel]),
                }
        entry["per_call"] = _call_stats(rows)
        entry["repair_rounds"] = sorted({r["repair_rounds"] for r in rows})
        summary["plans"].setdefault(model, {})[planner] = entry
    for path in sorted(out_dir.glob("faults_*.jsonl")):
        rows = list(_done(path).values())
        model = rows[0]["model"]
        entry = {}
        for fault in FAULTS:
            sel = [r for r in rows if r["fault_kind"] == fault and r["injected"]]
            failed = [r for r in sel if r["failed_without_repair"]]
            if sel:
                entry[fault] = {
                    "reference_success_despite_fault": _rate([not r["failed_without_repair"]
                                                              for r in sel]),
                    "recovery": _rate([r["success"] for r in failed]),
                    "success_with_repair": _rate([r["success"] for r in sel]),
                }  # fmt: skip
        entry["per_call"] = _call_stats(rows)
        entry["repair_rounds"] = sorted({r["repair_rounds"] for r in rows})
        summary["faults"][model] = entry
    more = {
        "unseen_names": summarize_reading(out_dir, "unseen_*.jsonl"),
        "reading": summarize_reading(out_dir, "reading_*.jsonl"),
    }
    return summary | summarize_categories(out_dir) | {k: v for k, v in more.items() if v}


# -- families: the goal planner and the others on the test collection's categories -------------
# (the part, its episode files and its JSON keys keep the name "families": results on disk)
CATEGORY_PLANNERS = ("goal", "code", "skills", "saycan")


class RecordingLLM(LLMBackend):
    """The real backend with every call's tokens and seconds written down (the planners keep
    only their own completions; this sees SayCan's scoring calls too)."""

    def __init__(self, backend: LLMBackend) -> None:
        self.backend = backend
        self.model = backend.model
        self.identity = getattr(backend, "identity", backend.model)
        self.calls: list[dict[str, Any]] = []

    def chat(self, messages: Any, **kwargs: Any) -> Any:
        reply = self.backend.chat(messages, **kwargs)
        self.calls.append({
            "kind": "chat",
            "prompt_tokens": reply.prompt_tokens,
            "prompt_tokens_evaluated": reply.prompt_tokens_evaluated,
            "completion_tokens": reply.completion_tokens,
            "seconds": round(reply.seconds, 3),
            "text": reply.text[:300],
        })  # fmt: skip
        return reply

    def score(self, prompt: str, continuations: Any) -> list[float]:
        start = time.perf_counter()
        scores = self.backend.score(prompt, continuations)
        self.calls.append({"kind": "score", "continuations": len(continuations),
                           "seconds": round(time.perf_counter() - start, 3)})  # fmt: skip
        return scores


def _robot_calls(record: RepairRecord) -> int:
    """Skill calls that moved the robot (a call refused or caught before motion has no steps)."""
    return sum(1 for r in record.rounds for t in r.traces if t.steps > 0)


def _caught(record: RepairRecord) -> int:
    """Rounds whose plan the check before motion sent back (no robot step in that round)."""
    return sum(
        1 for r in record.rounds
        if r.outcome in CAUGHT_OUTCOMES and not any(t.steps > 0 for t in r.traces)
    )  # fmt: skip


CAUGHT_OUTCOMES = ("precondition_failed", "caught", "check_failed")


def category_episode(
    llm: RecordingLLM,
    item: InstructionItem,
    planner: str,
    rounds: int,
    second: RecordingLLM | None = None,
    goal_options: dict[str, Any] | None = None,
) -> dict:
    """One dev or test item planned and run; the gold is checked on the world as the run left it.
    `second`: the goal planner's second reader (its calls are recorded with the first's);
    `goal_options`: `GoalPlannerConfig` fields set on the goal planner (revise, noisy_channel).

    No planner is told the gold. The executor's task check is the planner's own: the goal
    planner's solved goal holds (as `robocompose plan` runs it), for the others "every call
    ran", so their repair rounds follow failed calls only."""
    world = make_world(item, step_budget=STEP_BUDGET)
    registry = build_registry(world)
    chosen = make_planner(planner, llm, registry, world, second)
    if goal_options and isinstance(chosen, GoalPlanner):
        chosen.config = dataclasses.replace(chosen.config, **goal_options)
    reached = getattr(chosen, "reached", None)
    check = (lambda w: reached(w)) if reached is not None else (lambda w: True)
    executor = PlanExecutor(world, registry, task_check=check)
    llm.calls = []
    if second is not None:  # one list: every call in the order it was made
        second.calls = llm.calls
    start = time.perf_counter()
    record = run_with_repair(item.instruction, chosen, executor, max_rounds=rounds)
    seconds = time.perf_counter() - start
    missing = unmet(world, item.goal) if item.feasible else []
    world.close()
    calls = record.robot_calls if hasattr(record, "robot_calls") else _robot_calls(record)
    first = record.rounds[0] if record.rounds else None
    n_first = (first.planning.get("llm_calls") or 0) if first else 0
    first_calls = llm.calls[: max(1, n_first)] if llm.calls else []
    return {
        "outcome": outcome(calls, item.feasible and not missing) if item.feasible
        else ("asked_or_refused" if calls == 0 else "moved"),
        "robot_calls": calls,
        "unmet": [fact_text(f) for f in missing],
        "valid_plan": record.valid_first_plan,
        "caught_before_motion": _caught(record),
        "rounds": [r.outcome for r in record.rounds],
        "first_error": first.error if first else None,
        "first_plan": first.plan if first else None,
        "plan_seconds": first.planning.get("seconds") if first else None,
        "plan_prompt_tokens_evaluated": sum(c.get("prompt_tokens_evaluated") or 0
                                            for c in first_calls),
        "llm": llm.calls,
        "seconds": round(seconds, 2),
    }  # fmt: skip


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def _category_entry(rows: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = [r["plan_seconds"] for r in rows if r["plan_seconds"] is not None]
    evaluated = [r["plan_prompt_tokens_evaluated"] for r in rows]
    return {
        "success": _rate([r["outcome"] == "right" for r in rows]),
        "n": len(rows),
        "valid_plan": _rate([r["valid_plan"] for r in rows]),
        "caught_before_motion": sum(r["caught_before_motion"] > 0 for r in rows),
        "seconds_p50": _quantile(seconds, 0.5),
        "seconds_p90": _quantile(seconds, 0.9),
        "prompt_tokens_evaluated_per_plan": round(statistics.mean(evaluated), 1)
        if evaluated else None,
    }  # fmt: skip


def summarize_categories(out_dir: Path) -> dict[str, Any]:
    """Per model and planner: per category ("families"), refusals, outcomes, and
    test_split_success."""
    out: dict[str, Any] = {"families": {}, "refusals": {}, "outcomes": {},
                           "test_split_success": {}, "items": {}}  # fmt: skip
    for path in sorted(out_dir.glob("families_*.jsonl")):
        rows = list(_done(path).values())
        model, planner, split = rows[0]["model"], rows[0]["planner"], rows[0]["split"]
        if split != "test":
            continue
        feasible = [r for r in rows if r["expect"] == GOAL]
        infeasible = [r for r in rows if r["expect"] != GOAL]
        per = {c: _category_entry([r for r in feasible if r["family"] == c])
               for c in category_names("test", feasible_only=True)
               if any(r["family"] == c for r in feasible)}  # fmt: skip
        out["families"].setdefault(model, {})[planner] = per
        out["refusals"].setdefault(model, {})[planner] = {
            "refused_or_asked": _rate([r["robot_calls"] == 0 for r in infeasible]),
            "robot_calls": sum(r["robot_calls"] for r in infeasible),
            "items_with_robot_calls": sum(r["robot_calls"] > 0 for r in infeasible),
            "n": len(infeasible),
        }
        counts = Counter(r["outcome"] for r in feasible)
        out["outcomes"].setdefault(model, {})[planner] = {
            name: _rate([r["outcome"] == name for r in feasible]) for name in OUTCOMES
        } | {"n": len(feasible), "counts": dict(counts)}
        out["test_split_success"].setdefault(model, {})[planner] = _rate(
            [r["outcome"] == "right" for r in feasible]
            + [r["robot_calls"] == 0 for r in infeasible]
        )
        out["items"].setdefault(model, {})[planner] = {
            "feasible": len(feasible), "infeasible": len(infeasible),
            "per_family": dict(Counter(r["family"] for r in rows)),
            "repair_rounds": sorted({r["repair_rounds"] for r in rows}),
        }  # fmt: skip
    return out


def category_subset(items: list[InstructionItem], per_category: int) -> list[InstructionItem]:
    """The first `per_category` items of every category (0: all): the same stratified subset
    for every slow planner."""
    return [i for i in items if per_category <= 0 or i.index < per_category]


# the goal planner's rows by its readers (`plan goal_readings=`): "goal" is the plan verb's default
READING_LABELS = {"both": "goal", "adapted": "goal-adapted", "examples": "goal-examples"}


def run_reading(
    model: str, args: argparse.Namespace, out_dir: Path, split: str, unseen: bool
) -> None:
    """The goal planner on every item of `split` (under unseen names: `unseen`), judged on its
    solved goal."""
    config = LLMConfig(model=model, n_threads=args.n_threads, cache=False, lora=args.lora)
    first, second = readers(config, args.goal_readings)
    adapted = getattr(first, "lora", None) is not None
    label = READING_LABELS[args.goal_readings if adapted else "examples"]
    label += goal_setting_label(args, getattr(first, "lora", None))
    prefix = "unseen" if unseen else f"reading_{split}"
    path = out_dir / f"{prefix}_{model.replace('.', '_')}_{label}.jsonl"
    done = _done(path)
    for item in instruction_items(split):
        if item.key in done:
            continue
        names = names_for(item) if unseen else {}
        request = reworded(item.instruction, names)
        world = make_world(item)
        view = NamedView(world, names)
        planner = make_planner("goal", first, build_registry(world), view, second)
        planner.config = dataclasses.replace(planner.config, **goal_options(args))
        start = time.perf_counter()
        plan = planner.plan(request)
        row = judged(item, view, plan) | {"seconds": round(time.perf_counter() - start, 2)}
        world.close()
        _append(path, {"key": item.key, "model": model, "planner": label, "family": item.category,
                       "split": split, "expect": item.expect, "instruction": request,
                       "constraints": plan.constraints, **row})  # fmt: skip
        print(f"{prefix} {model} {label} {item.key}: {row['outcome']} {request!r}", flush=True)


def summarize_reading(out_dir: Path, pattern: str) -> dict[str, Any]:
    """Per model and goal-planner setting (and split, for `reading_*`), shaped like `outcomes`
    (feasible items), with the infeasible items' robot calls beside it, the outcomes per
    category and per wording kind, and what the questions asked were for."""
    out: dict[str, Any] = {}
    for path in sorted(out_dir.glob(pattern)):
        rows = list(_done(path).values())
        feasible = [r for r in rows if r["expect"] == GOAL]
        infeasible = [r for r in rows if r["expect"] != GOAL]
        node = out.setdefault(rows[0]["model"], {})
        if pattern.startswith("reading"):
            node = node.setdefault(rows[0]["split"], {})
        kinds = Counter(wording_kind(r) for r in feasible)
        node[rows[0]["planner"]] = _outcome_counts(feasible) | {
            "infeasible_moved": sum(r["robot_calls"] > 0 for r in infeasible),
            "infeasible_n": len(infeasible),
            "per_family": {c: _counts([r for r in feasible if r["family"] == c])
                           for c in dict.fromkeys(r["family"] for r in feasible)},
            "per_wording": {k: _counts([r for r in feasible if wording_kind(r) == k])
                            for k in sorted(kinds)},
            "questions": _questions(rows),
        }  # fmt: skip
    return out


def _outcome_counts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    counts = Counter(r["outcome"] for r in rows)
    return {name: _rate([r["outcome"] == name for r in rows]) for name in OUTCOMES} | {
        "n": len(rows),
        "counts": dict(counts),
    }


def _counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Items and how many were right, wrong, asked or refused (a part too small for rates)."""
    counts = Counter(r["outcome"] for r in rows)
    return {"n": len(rows)} | {name: counts[name] for name in OUTCOMES}


@functools.cache
def _item(key: str) -> InstructionItem:
    collection = key.split("/")[0]
    return {i.key: i for i in instruction_items(collection)}[key]


def wording_kind(row: dict[str, Any]) -> str:
    """The wordings collection's category (typo, other_language, self_correction); in the other
    collections "start_tower" (the request changes a tower already standing) or "plain"."""
    item = _item(row["key"])
    if item.collection == "wordings":
        return item.category
    return "start_tower" if any(f[0] == "on" for f in item.scene.start) else "plain"


def _questions(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Questions the person needed (the request cannot be done as said: ambiguous, contradicting
    itself, ...) against those the planner should have answered itself (a feasible request)."""
    if any("message" in r and "asked" not in r for r in rows):
        return None  # rows from before questions and refusals were told apart
    asked = [r for r in rows if r.get("asked")]
    needed = sum(r["expect"] != GOAL for r in asked)
    return {
        "asked": len(asked),
        "needed": needed,
        "should_have_answered": len(asked) - needed,
        "share_needed": round(needed / len(asked), 3) if asked else None,
    }


def goal_options(args: argparse.Namespace) -> dict[str, Any]:
    """The `GoalPlannerConfig` fields the command line sets on the goal planner."""
    options = {"revise": args.revise, "revise_solver": args.revise_solver,
               "noisy_channel": args.noisy_channel}  # fmt: skip
    return options | ({"orders": args.orders} if args.orders else {})


def goal_setting_label(args: argparse.Namespace, adapter: str | Path | None) -> str:
    """What sets a goal-planner run apart, for its file and row names: the adapter file it
    read with (named even when it is the shipped one, so a newly shipped adapter never resumes
    an older one's file), then the options."""
    parts = [f"lora-{Path(adapter).stem}"] if adapter else []
    parts += ["revise"] * args.revise + ["revise-solver"] * args.revise_solver
    parts += ["channel"] * args.noisy_channel + [f"orders{args.orders}"] * bool(args.orders)
    return "".join(f"+{p}" for p in parts)


def run_categories(model: str, args: argparse.Namespace, out_dir: Path) -> None:
    slug = model.replace(".", "_")
    for planner in args.family_planners.split(","):
        # the goal planner as `robocompose plan` builds it: the model's shipped adapter, if any,
        # and for "both" the plain model as the second reader
        readings = args.goal_readings if planner == "goal" else "examples"
        config = LLMConfig(model=model, n_threads=args.n_threads, cache=False, lora=args.lora)
        first, second_backend = readers(config, readings)
        llm = RecordingLLM(first)
        second = RecordingLLM(second_backend) if second_backend is not None else None
        adapter = getattr(first, "lora", None)
        items = instruction_items(args.split)
        per_category = 0 if planner == "goal" else args.slow_per_family
        subset = category_subset(items, per_category)
        label = planner
        if planner == "goal":
            label = READING_LABELS[readings if adapter else "examples"]
            label += goal_setting_label(args, adapter)
        path = out_dir / f"families_{slug}_{label}_{args.split}.jsonl"
        done = _done(path)
        for item in subset:
            if item.key in done:
                continue
            row = category_episode(
                llm, item, planner, args.repair_rounds, second, goal_options(args)
            )
            _append(path, {"key": item.key, "model": model, "planner": label,
                           "split": item.collection, "family": item.category,
                           "expect": item.expect, "why": item.why, "instruction": item.instruction,
                           "subset": f"first {per_category} per family" if per_category else "all",
                           "repair_rounds": args.repair_rounds, **row})  # fmt: skip
            print(f"families {model} {label} {item.key}: {row['outcome']} "
                  f"calls={row['robot_calls']} plan={row['plan_seconds']} s "
                  f"evaluated={row['plan_prompt_tokens_evaluated']}", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_parts(parser, PARTS)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--planners", default=",".join(PLANNERS))
    parser.add_argument("--items-per-task", type=int, default=24, help="phrasings per task")
    parser.add_argument("--fault-items-per-task", type=int, default=6)
    parser.add_argument("--repair-rounds", type=int, default=2)
    parser.add_argument("--n-threads", type=int, default=1, help="1 holds up on a busy CPU")
    parser.add_argument("--split", default="test", choices=("dev", "test", "wordings"),
                        help="families and reading")  # fmt: skip
    parser.add_argument("--family-planners", default=",".join(CATEGORY_PLANNERS))
    parser.add_argument("--slow-per-family", type=int, default=3,
                        help="families: items per category for the planners other than goal "
                        "(0: all)")  # fmt: skip
    parser.add_argument(
        "--goal-readings",
        default="both",
        choices=tuple(READING_LABELS),
        help="families: the goal planner's readers (plan goal_readings=)",
    )
    parser.add_argument("--lora", default="", help="families: an adapter file for the goal "
                        "planner's first reader (default: the model's shipped one)")  # fmt: skip
    parser.add_argument("--revise", action="store_true", help="families: the goal planner's "
                        "revision round before a question")  # fmt: skip
    parser.add_argument("--revise-solver", action="store_true", help="families: revise also "
                        "after the solver's contradiction or several goals")  # fmt: skip
    parser.add_argument("--noisy-channel", action="store_true", help="families: the goal "
                        "planner keeps the goal the request is likeliest under")  # fmt: skip
    parser.add_argument("--orders", type=int, default=0, help="families and reading: the goal "
                        "planner's rewrites that must agree (0: its readers' default)")  # fmt: skip
    parser.add_argument("--out-dir", default="benchmarks/results/hierarchical")
    parser.add_argument("--cache-dir", default="", help="LLM cache (default: the user cache)")
    parser.add_argument("--results", default=str(RESULTS.path))
    parser.add_argument("--summarize", action="store_true", help="only rewrite the JSON")
    args = parser.parse_args()
    parts, models = args.parts, args.models.split(",")
    out_dir, path = Path(args.out_dir), Path(args.results)
    results = ResultsFile(path.name, RESULTS.writer, RESULTS.indent, path.parent)
    # per part, the settings of its last run (the episodes of earlier runs keep their own
    # setting in their file and row names)
    skip = ("out_dir", "results", "summarize", "parts")
    settings = {p: s for p, s in results.read().get("settings", {}).items() if p in PARTS}
    if not args.summarize:
        settings |= dict.fromkeys(parts, {k: v for k, v in vars(args).items() if k not in skip})
    for model in [] if args.summarize else models:
        llm = make_backend("local", model=model, n_threads=args.n_threads,
                           cache_dir=args.cache_dir)  # fmt: skip
        slug = model.replace(".", "_")
        if "faults" in parts:
            path = out_dir / f"faults_{slug}.jsonl"
            done = _done(path)
            for item in _items(args.fault_items_per_task):
                for fault in FAULTS:
                    key = f"{item.category}/{item.index}/{fault}"
                    if key in done:
                        continue
                    row = fault_episode(llm, item, fault, args.repair_rounds)
                    _append(path, {"key": key, "model": model, "task": item.category,
                                   "phrasing": item.index, "fault_kind": fault,
                                   "repair_rounds": args.repair_rounds, **row})  # fmt: skip
                    print(f"faults {model} {key}: {row['outcomes']}", flush=True)
                    results.write(summarize(out_dir, settings))
        if "families" in parts:
            run_categories(model, args, out_dir)
            results.write(summarize(out_dir, settings))
        if "unseen" in parts:
            run_reading(model, args, out_dir, "test", unseen=True)
            results.write(summarize(out_dir, settings))
        if "reading" in parts:
            run_reading(model, args, out_dir, args.split, unseen=False)
            results.write(summarize(out_dir, settings))
        if "plans" in parts:
            for planner in args.planners.split(","):
                path = out_dir / f"plans_{slug}_{planner}.jsonl"
                done = _done(path)
                for item in _items(args.items_per_task):
                    key = f"{item.category}/{item.index}"
                    if key in done:
                        continue
                    row = plan_episode(llm, item, planner, args.repair_rounds)
                    _append(path, {"key": key, "model": model, "planner": planner,
                                   "task": item.category, "phrasing": item.index,
                                   "instruction": item.instruction,
                                   "repair_rounds": args.repair_rounds, **row})  # fmt: skip
                    print(f"plans {model} {planner} {key}: {row['outcomes']} "
                          f"{row['seconds']} s", flush=True)  # fmt: skip
                    results.write(summarize(out_dir, settings))
    results.write(summarize(out_dir, settings))
    print(f"wrote {results.path}")


if __name__ == "__main__":
    main()

"""What makes the small model's constraint rewrite right: the goal planner's LLM step alone.

For each dev or test item the request is rewritten into constraints (the goal prompt, the scene's
grammar, greedy), solved against the scene's facts, and the outcome judged against the gold
before anything moves: right (a feasible item's gold facts hold in the solved goal; an
infeasible item asked back or refused), wrong (another goal; an infeasible item got a goal), or
asked (a feasible item asked back or refused). Variants:

- greedy: one rewrite with the prompt as it is.
- orders: the same request under `--orders` prompts whose few-shot examples come in different
  orders (as written, reversed, rotated by half); the goal stands when every rewrite solves to
  the same goal, else the planner asks back (removes the bias to copy the example nearest the
  request).
- paraphrase: greedy, then the solved goal said back in words ("green on red, blue on green")
  and scored against the request by the model (log p(" yes") vs log p(" no")); "no" -> ask.
- with `--lora ADAPTER`: the model with that adapter and the short prompt without examples
  (`GoalPlannerConfig(prompt="adapted")`); its `--orders` list the scene's blocks and bins in
  other orders (orders 1: one rewrite, greedy = orders).
- planner: the goal planner as shipped (`GoalPlanner.plan`): names the scene lacks refused
  before the LLM, blocks the request never names asked back, `--orders` example orders that
  must agree (its rewrites are the ones above, served from a cache: no extra LLM time).
- agreement (in the summary, `AGREEMENTS`): two recorded planners (say the adapted model and
  the few-shot prompt) that ask back when their readings differ, recounted from their rows.

Rows go to benchmarks/results/goal_rewrite/<split>_<model>_<prompt version>.jsonl as items
end (a rerun resumes); the summary to benchmarks/results/goal_rewrite.json.

    python benchmarks/goal_rewrite.py --split dev [--model qwen2.5-coder-1.5b] [--categories ...]
    python benchmarks/goal_rewrite.py --summarize
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from common import RESULTS_DIR, ResultsFile, read_jsonl

from robocompose.hierarchical.goal import prompt as goal_prompt
from robocompose.hierarchical.goal.constraints import ConstraintSyntaxError, parse
from robocompose.hierarchical.goal.solver import Goal, Question, Refusal, goal_facts, solve
from robocompose.hierarchical.instructions import (
    FactView,
    category_names,
    instruction_items,
    make_world,
    unmet,
)
from robocompose.hierarchical.llm import make_backend
from robocompose.hierarchical.llm.cache import CachedLLM
from robocompose.hierarchical.planners.goal import GoalPlanner, GoalPlannerConfig
from robocompose.hierarchical.skills.scripted import build_registry
from robocompose.stats import success_rate

RESULTS = ResultsFile("goal_rewrite.json", writer="goal_rewrite.py", indent=1)
OUT_DIR = RESULTS_DIR / "goal_rewrite"
VARIANTS = ("greedy", "orders", "paraphrase", "planner")
JUDGE = (
    "Request: {request}\nThe robot will leave the blocks like this: {result}.\n"
    "Is that what the request asks for? Answer yes or no.\nAnswer:"
)


def solved(planner: GoalPlanner, text: str, facts: Any) -> Goal | Question | Refusal:
    try:
        program = parse(text, planner.scene)
    except ConstraintSyntaxError as error:
        return Refusal(f"does not parse: {error}", "unclear")
    return solve(program, facts, planner.scene, planner.operators)


def verdict(item: Any, outcome: Goal | Question | Refusal) -> str:
    """right / wrong / asked (see the module docstring)."""
    if not isinstance(outcome, Goal):
        return "asked" if item.feasible else "right"
    if not item.feasible:
        return "wrong"
    return "right" if not unmet(FactView(goal_facts(outcome)), item.goal) else "wrong"


def _same(a: Goal | Question | Refusal, b: Goal | Question | Refusal) -> bool:
    if isinstance(a, Goal) and isinstance(b, Goal):
        return goal_facts(a) == goal_facts(b)
    return not isinstance(a, Goal) and not isinstance(b, Goal)


def item_row(llm: Any, item: Any, args: argparse.Namespace) -> dict[str, Any]:
    world = make_world(item)
    prompt = "adapted" if args.lora else "examples"
    config = GoalPlannerConfig(orders=args.orders, prompt=prompt)
    planner = GoalPlanner(llm, build_registry(world), world, config)
    facts = world.facts()
    row: dict[str, Any] = {}
    outcomes, texts, seconds = [], [], []
    chats = planner.prompts(item.instruction, facts)
    for chat in chats:
        start = time.perf_counter()
        reply = llm.chat(chat, max_tokens=planner.config.max_tokens, grammar=planner.grammar)
        seconds.append(round(time.perf_counter() - start, 3))
        texts.append(reply.text.strip().splitlines()[0] if reply.text.strip() else "")
        outcomes.append(solved(planner, texts[-1], facts))
    row["texts"], row["seconds"] = texts, seconds
    row["greedy"] = verdict(item, outcomes[0])
    agree = all(_same(outcomes[0], o) for o in outcomes[1:])
    row["orders"] = verdict(item, outcomes[0]) if agree else ("asked" if item.feasible else "right")
    row["agree"] = agree
    if isinstance(outcomes[0], Goal):
        result = outcomes[0].described()
        yes, no = llm.score(JUDGE.format(request=item.instruction, result=result), [" yes", " no"])
        row["paraphrase_result"], row["paraphrase_yes_minus_no"] = result, round(yes - no, 3)
        row["paraphrase"] = row["greedy"] if yes >= no else "asked"
    else:
        row["paraphrase"] = row["greedy"]
    plan = planner.plan(item.instruction)
    world.close()
    row["planner"] = verdict(
        item, plan.goal if plan.kind == "calls" else plan.refusal or plan.question
    )
    row["planner_kind"], row["planner_message"] = plan.kind, plan.message
    return row


def _done(path: Path, complete: bool = True) -> dict[str, dict[str, Any]]:
    """The last row of each item (`complete`: only rows with every variant; older rows are
    redone)."""
    return {r["key"]: r for r in read_jsonl(path) if not complete or all(v in r for v in VARIANTS)}


def _rate(flags: list[bool]) -> dict[str, Any]:
    rate = success_rate(sum(flags), len(flags))
    return {"rate": rate.rate, "ci95": [rate.ci_low, rate.ci_high], "n": len(flags),
            "text": str(rate)}  # fmt: skip


def agreement(first: Path, second: Path, split: str) -> dict[str, Any]:
    """Two recorded planners asking back when their readings differ (no new LLM call): the
    first's planner verdict stands when it did not plan, or when its first rewrite and the
    second's solve to the same goal; else a feasible item is asked back and an infeasible one
    stopped."""
    rows_a, rows_b = _done(first, complete=False), _done(second, complete=False)
    verdicts: list[tuple[bool, str]] = []
    for item in instruction_items(split):
        a, b = rows_a.get(item.key), rows_b.get(item.key)
        if a is None or b is None or "planner" not in a:
            continue
        if a["planner_kind"] != "calls":
            verdicts.append((item.feasible, a["planner"]))
            continue
        world = make_world(item)
        planner = GoalPlanner(None, build_registry(world), world)
        facts = world.facts()
        world.close()
        same = _same(solved(planner, a["texts"][0], facts), solved(planner, b["texts"][0], facts))
        differ = "asked" if item.feasible else "right"
        verdicts.append((item.feasible, a["planner"] if same else differ))
    feasible = [v for f, v in verdicts if f]
    infeasible = [v for f, v in verdicts if not f]
    return {
        "first": first.stem,
        "second": second.stem,
        "right_feasible": _rate([v == "right" for v in feasible]),
        "wrong_feasible": _rate([v == "wrong" for v in feasible]),
        "asked_feasible": _rate([v == "asked" for v in feasible]),
        "refused_or_asked_infeasible": _rate([v == "right" for v in infeasible]),
    }


# recorded planner pairs whose agreement `summarize` reports (first, second; stems in OUT_DIR)
AGREEMENTS = (
    ("test_qwen2_5-coder-1_5b_goal-v3_lora-goal-qwen2_5-coder-1_5b",
     "test_qwen2_5-coder-1_5b_goal-v3"),
    # the goal planner's default (goal_readings=both): two listings, then the few-shot reading
    ("test_qwen2_5-coder-1_5b_goal-v3_lora-goal-qwen2_5-coder-1_5b_orders2",
     "test_qwen2_5-coder-1_5b_goal-v3"),
)  # fmt: skip


def summarize() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for first, second in AGREEMENTS:
        paths = OUT_DIR / f"{first}.jsonl", OUT_DIR / f"{second}.jsonl"
        if all(p.is_file() for p in paths):
            split = first.split("_")[0]
            out.setdefault("agreement", {})[f"{first}+{second}"] = agreement(*paths, split)
    for path in sorted(OUT_DIR.glob("*.jsonl")):
        every = list(_done(path, complete=False).values())
        entry: dict[str, Any] = {"items": len(every)}
        for variant in VARIANTS:
            rows = [r for r in every if variant in r]
            feasible = [r for r in rows if r["feasible"]]
            infeasible = [r for r in rows if not r["feasible"]]
            if not feasible or not infeasible:
                continue
            entry[variant] = {
                "right_feasible": _rate([r[variant] == "right" for r in feasible]),
                "wrong_feasible": _rate([r[variant] == "wrong" for r in feasible]),
                "asked_feasible": _rate([r[variant] == "asked" for r in feasible]),
                "refused_or_asked_infeasible": _rate([r[variant] == "right" for r in infeasible]),
                "right_all": _rate([r[variant] == "right" for r in rows]),
                "per_family_right": {  # per category; rows and JSON keep "family"
                    c: sum(r[variant] == "right" for r in rows if r["family"] == c)
                    for c in category_names("dev")
                },
            }
        out[path.stem] = entry
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", default="dev", choices=("dev", "test"))
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--n-threads", type=int, default=2)
    parser.add_argument("--orders", type=int, default=3)
    parser.add_argument("--lora", default="", help="a LoRA adapter (.gguf): the adapted prompt")
    parser.add_argument("--categories", default=",".join(category_names("dev")))
    parser.add_argument("--per-category", type=int, default=0, help="first N of each (0: all)")
    parser.add_argument("--summarize", action="store_true")
    args = parser.parse_args()
    if not args.summarize:
        llm = make_backend(
            "local", model=args.model, n_threads=args.n_threads, cache=False, lora=args.lora
        )
        llm = CachedLLM(llm, tempfile.mkdtemp(prefix="goal-rewrite-"))  # the planner's rewrites
        slug = f"{args.split}_{args.model.replace('.', '_')}_{goal_prompt.PROMPT_VERSION}"
        if args.lora:
            slug += f"_lora-{Path(args.lora).stem.replace('.', '_')}"
        path = OUT_DIR / f"{slug}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        done = _done(path)
        for item in instruction_items(args.split, args.categories.split(",")):
            if item.key in done or (args.per_category and item.index >= args.per_category):
                continue
            row = {"key": item.key, "family": item.category, "feasible": item.feasible,
                   "instruction": item.instruction, **item_row(llm, item, args)}  # fmt: skip
            with path.open("a") as f:
                f.write(json.dumps(row) + "\n")
            verdicts = " ".join(f"{v} {row[v]}" for v in VARIANTS)
            print(f"{item.key}: {verdicts} {row['texts']}", flush=True)
    RESULTS.write(summarize())
    print(f"wrote {RESULTS.path}")


if __name__ == "__main__":
    main()

"""Corrections become data (Yell At Your Robot): the skill planner before and after a prompt bank
built from a simulated person's corrections, on the same evaluation items and seeds.

1. train: the skill planner (no repair) plans every training item, the long-horizon items as
   `hierarchical/instructions/data/long_horizon.yaml` ships them; a `SimulatedUser` who knows
   the item's goal watches each run and says the right call in words whenever the announced
   one is wrong ("no, put the red block on the green block"). The corrections go through the
   ordinary queue, parser, executor and `CorrectionLog` (one log per item under --out-dir).
2. before / after: the evaluation items, disjoint from the training ones (stack_three: each
   phrasing with another order, order k+3, and another scene, seed 3000+k; sort_by_colour: each
   phrasing on another scene seed, 4000+k), planned without corrections by the plain planner
   (before) and by the planner with the bank of corrected plans (after), same seeds.
   Splits: "same_phrasings": the bank from every training item; "unseen_phrasings": the bank
   from the even phrasings only, evaluated on the odd ones (instructions worded as no
   correction was).

Success is the env's own check after the single plan ran (no repair, nobody correcting).
Rates come with Wilson 95% intervals, the after-minus-before difference with Newcombe's paired
interval. Episodes are appended to JSONL under --out-dir as they end; a rerun resumes, and the
LLM disk cache makes repeated planning calls free.

    python benchmarks/corrections_finetune.py [--model qwen2.5-coder-1.5b] [--k 3]
        [--tasks stack_three,sort_by_colour] [--unseen-tasks stack_three] [--items-per-task 24]
        [--n-threads 1]

Writes `corrections_finetune` (per model) into benchmarks/results/skills.json, the one key of
that shared file this script owns (common.KEY_OWNERS; skills.py and language_to_rewards.py own
the others).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import time
from pathlib import Path
from typing import Any

from common import RUNS_DIR, ResultsFile, read_jsonl

from robocompose.hierarchical.api import PlanConfig, Runner
from robocompose.hierarchical.instructions import (
    STACK_THREE,
    InstructionItem,
    category_names,
    instruction_items,
    with_order,
)
from robocompose.hierarchical.instructions.simulated_user import SimulatedUser
from robocompose.hierarchical.llm import LLMConfig, make_backend
from robocompose.hierarchical.run.correction_bank import corrected_plans, read_pairs
from robocompose.stats import paired_outcomes, success_rate

RESULTS = ResultsFile("skills.json", writer="corrections_finetune.py")
EPISODES = RUNS_DIR / "corrections"
KEY = "corrections_finetune"
SPLITS = {
    "same_phrasings": "bank from every training item; evaluated on every phrasing with other "
    "colours (stack_three: order k+3) and other scenes (seeds)",
    "unseen_phrasings": "bank from the even phrasings' training items; evaluated on the odd "
    "phrasings only (wordings no correction was given for), other colours and scenes",
}


def training_items(
    categories: list[str], per_category: int
) -> list[tuple[str, int, InstructionItem]]:
    """(name, phrasing, item) of the first `per_category` long-horizon items of each category as
    shipped: its own order (stacking), scene and seed."""
    items = instruction_items("long_horizon", categories)
    return [(f"{i.category}/{i.index}", i.index, i) for i in items if i.index < per_category]


def evaluation_item(k: int, item: InstructionItem) -> InstructionItem:
    """The phrasing `k` on another scene: stacking in order k+3 of the shipped orders, worded
    for it (so other colours where the wording names them), sorting on a fresh seed."""
    if item.category == STACK_THREE:
        stacks = instruction_items("long_horizon", [STACK_THREE])
        orders = list(dict.fromkeys(i.scene.order for i in stacks))
        reworded = with_order(item, orders[(k + 3) % len(orders)], reword=True)
        return dataclasses.replace(reworded, seed=3000 + k)
    return dataclasses.replace(item, seed=4000 + k)


def _config(k: int, item: InstructionItem, out: Path, args: argparse.Namespace, **more) -> Any:
    return PlanConfig(
        instruction=item.instruction,
        task=item.scene.env,
        phrasing=k,
        order=list(item.scene.order),
        seed=item.seed,
        planner="skills",
        llm=LLMConfig(model=args.model, n_threads=args.n_threads),
        repair_rounds=0,
        video=False,
        corrections=False,
        out=str(out),
        **more,
    )


def _episode(config: PlanConfig, llm: Any, watch: bool) -> dict[str, Any]:
    """One run: plan once and execute (watched by the simulated person in training)."""
    runner = Runner(config, llm)
    user = SimulatedUser(runner.item, runner.world, runner.queue) if watch else None
    runner.executor.on_call = user
    try:
        result = runner.run()
    finally:
        runner.close()
    first = result.record.rounds[0]
    return {
        "instruction": runner.item.instruction,
        "seed": runner.item.seed,
        "success": bool(runner.world.success()),
        "valid_plan": result.record.valid_first_plan,
        "outcome": first.outcome,
        "plan": first.plan,
        "said": user.said if user else [],
        "planning": first.planning,
    }


def _done(path: Path) -> dict[str, dict[str, Any]]:
    return {row["key"]: row for row in read_jsonl(path)}


def _run_phase(phase: str, jobs: list[tuple[str, Any, bool]], llm: Any, out: Path) -> dict:
    """Run (key, config, watched) jobs not yet in the phase's JSONL; every record by key."""
    path = out / f"{phase}.jsonl"
    done = _done(path)
    for key, config, watch in jobs:
        if key in done:
            continue
        shutil.rmtree(config.out, ignore_errors=True)  # a half-written log of a crashed run
        start = time.perf_counter()
        row = {"key": key, "phase": phase, **_episode(config, llm, watch)}
        row["seconds"] = round(time.perf_counter() - start, 2)
        with path.open("a") as f:
            f.write(json.dumps(row, default=str) + "\n")
        done[key] = row
        print(phase, key, row["success"], f"{row['seconds']:.1f} s", row["said"], flush=True)
    return done


def _rate(flags: list[bool]) -> dict[str, Any]:
    rate = success_rate(sum(flags), len(flags))
    return {"rate": rate.rate, "ci95": [rate.ci_low, rate.ci_high], "n": len(flags),
            "text": str(rate)}  # fmt: skip


def _compare(before: list[bool], after: list[bool]) -> dict[str, Any]:
    paired = paired_outcomes(after, before)
    return {
        "before": _rate(before),
        "after": _rate(after),
        "paired_difference": {
            "points": 100 * paired.difference,
            "ci95_points": [100 * paired.ci_low, 100 * paired.ci_high],
            "only_after": paired.only_a,
            "only_before": paired.only_b,
            "text": paired.format(),
        },
    }


def _summary(keys: list[str], before: dict, after: dict) -> dict[str, Any]:
    """Overall and per category, paired on the same evaluation items and seeds."""
    out = {
        "all": _compare([before[k]["success"] for k in keys], [after[k]["success"] for k in keys])
    }
    for category in sorted({k.split("/")[0] for k in keys}):
        mine = [k for k in keys if k.startswith(f"{category}/")]
        out[category] = _compare(
            [before[k]["success"] for k in mine], [after[k]["success"] for k in mine]
        )
    return out


def _store(model: str, value: dict[str, Any]) -> None:
    """Replace only this benchmark's entry for `model` in skills.json."""
    RESULTS.set([KEY, model], value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--k", type=int, default=3, help="corrected plans per prompt")
    # the flags and the JSON keep "tasks": the long-horizon categories
    parser.add_argument("--tasks", default=",".join(category_names("long_horizon")))
    parser.add_argument("--items-per-task", type=int, default=24, help="phrasings per category")
    parser.add_argument(
        "--unseen-tasks",
        default="",
        help="categories the unseen_phrasings split runs ('' -> --tasks)",
    )
    parser.add_argument("--n-threads", type=int, default=1)
    parser.add_argument("--out-dir", type=Path, default=EPISODES)
    args = parser.parse_args()
    tasks = args.tasks.split(",")
    unseen_tasks = args.unseen_tasks.split(",") if args.unseen_tasks else tasks
    out = args.out_dir / args.model
    out.mkdir(parents=True, exist_ok=True)
    llm = make_backend("local", model=args.model, n_threads=args.n_threads)
    start = time.perf_counter()

    train = training_items(tasks, args.items_per_task)
    logs = {name: out / "train" / name / "corrections.jsonl" for name, _, _ in train}
    jobs = [(name, _config(k, item, logs[name].parent, args), True) for name, k, item in train]
    trained = _run_phase("train", jobs, llm, out)

    evaluation = [(name, k, evaluation_item(k, item)) for name, k, item in train]
    odd = {name for name, k, _ in train if k % 2 == 1}
    corrected = [name for name in logs if logs[name].is_file()]  # a log exists once one is said
    banks = {
        "same_phrasings": [logs[name] for name in corrected],
        "unseen_phrasings": [logs[name] for name in corrected if name not in odd],
    }
    evaluated = {
        "same_phrasings": [name for name, _, _ in evaluation],
        "unseen_phrasings": [
            name for name, _, _ in evaluation if name in odd and name.split("/")[0] in unseen_tasks
        ],
    }
    jobs = [
        (name, _config(k, item, out / "before" / name, args), False) for name, k, item in evaluation
    ]
    before = _run_phase("before", jobs, llm, out)
    splits = {}
    for split, bank in banks.items():
        more = {"correction_logs": [str(p) for p in bank], "correction_examples": args.k}
        jobs = [
            (name, _config(k, item, out / split / name, args, **more), False)
            for name, k, item in evaluation
            if name in evaluated[split]
        ]
        after = _run_phase(f"after_{split}", jobs, llm, out)
        pairs = read_pairs(bank)
        splits[split] = {
            "description": SPLITS[split],
            "training_runs_in_bank": len(bank),
            "corrections": len(pairs),
            "corrected_plans": len(corrected_plans(pairs)),
            **_summary(evaluated[split], before, after),
        }
    said = [len(row["said"]) for row in trained.values()]
    value = {
        "model": args.model,
        "planner": "skills (grammar-constrained JSON), no repair",
        "k": args.k,
        "tasks": tasks,
        "unseen_tasks": unseen_tasks,
        "training": {
            "items": len(train),
            "runs_corrected": sum(1 for n in said if n),
            "spoken": sum(said),
            "success_when_corrected": _rate([row["success"] for row in trained.values()]),
        },
        "splits": splits,
        "seconds": round(time.perf_counter() - start, 1),
    }
    _store(args.model, value)
    print(json.dumps(value, indent=1))


if __name__ == "__main__":
    main()

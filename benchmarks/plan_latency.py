"""How long a plan takes from the shell: one fresh process per plan, as `robocompose plan` runs.

Parts (rows appended to benchmarks/results/plan_latency/*.jsonl as they end; a rerun resumes):
- processes: for each planner and `n_threads` (1, 2), fresh processes that each plan
  `--plans-per-process` dev-split items in turn (no robot motion: planning only). The first
  plan of a process pays the cold start (imports, model load, the prompt); later plans reuse
  the process. "process seconds" = from spawning the process to its first plan being ready (what
  a person at the shell waits); "plan seconds" = the planning call alone. The local model's
  fixed prompt part is kept on disk as a KV state (`llm.prefix_state`): one unrecorded process
  per configuration saves it first; `state=none` runs the goal planner with it off (the cold
  start every process paid before). SayCan chooses calls while the plan runs, so its "plan" is
  one step: the choice of the first call.
- prompt_lookup: the goal prompt decoded greedily with and without llama-cpp-python's
  prompt-lookup drafts (`LlamaPromptLookupDecoding`) in one process, prefix held, same requests,
  the two timed in turn on each request.

    python benchmarks/plan_latency.py [--planners goal,code,skills,saycan] [--threads 1,2]
        [--processes 5] [--plans-per-process 3] [--parts processes,prompt_lookup]
    python benchmarks/plan_latency.py --summarize

Seconds are wall clock on this machine as it was (its load average is recorded per row).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from common import RESULTS_DIR, ResultsFile, add_parts, cpu_model, read_jsonl

RESULTS = ResultsFile("plan_latency.json", writer="plan_latency.py", indent=1)
OUT_DIR = RESULTS_DIR / "plan_latency"
PLANNERS = ("goal", "code", "skills", "saycan")
PARTS = ("processes", "prompt_lookup")
MODEL = "qwen2.5-coder-1.5b"


def _items(count: int, offset: int) -> list[Any]:
    """Feasible dev items spread over the categories (never the test collection)."""
    from robocompose.hierarchical.instructions import instruction_items

    items = [i for i in instruction_items("dev") if i.feasible]
    return [items[(offset + 7 * k) % len(items)] for k in range(count)]


def child(args: argparse.Namespace) -> None:
    """One process: load the model, plan `plans` items in turn, print one JSON row per plan."""
    from robocompose.hierarchical.api import make_planner
    from robocompose.hierarchical.instructions import make_world
    from robocompose.hierarchical.llm import LLMConfig
    from robocompose.hierarchical.planners.goal import readers
    from robocompose.hierarchical.skills.scripted import build_registry

    readings = args.goal_readings if args.planner == "goal" else "examples"
    load = time.perf_counter()
    config = LLMConfig(model=args.model, n_threads=args.n_threads, cache=False,
                       prefix_state=args.state != "none", state_dir=args.state_dir,
                       lora=args.lora)  # fmt: skip
    llm, second = readers(config, readings)  # as `robocompose plan` makes them
    adapter = getattr(llm, "lora", None)
    load = time.perf_counter() - load
    for index, item in enumerate(_items(args.plans_per_process, args.offset)):
        world = make_world(item)
        registry = build_registry(world)
        start = time.perf_counter()
        if args.planner == "saycan":
            from robocompose.hierarchical.planners.saycan import SayCanPlanner

            SayCanPlanner(llm, registry).step(item.instruction, [], world)
            completions: tuple[Any, ...] = ()
        else:
            planner = make_planner(args.planner, llm, registry, world, second)
            if args.planner == "goal" and (adapter is None or args.goal_orders is not None):
                planner.config = replace(planner.config, orders=_orders(args))
            completions = planner.plan(item.instruction, world.snapshot(), None).completions
        seconds = time.perf_counter() - start
        ready = time.time()
        world.close()
        row = {
            "index": index,
            "item": item.key,
            "plan_seconds": round(seconds, 3),
            "ready_at": ready,
            "load_seconds": round(load, 3),
            "llm_calls": len(completions),
            "prompt_tokens": sum(c.prompt_tokens for c in completions),
            "prompt_tokens_evaluated": sum(c.prompt_tokens_evaluated or 0 for c in completions),
            "completion_tokens": sum(c.completion_tokens for c in completions),
        }
        print("ROW " + json.dumps(row), flush=True)


def _spawn(planner: str, threads: int, state: str, args: argparse.Namespace,
           offset: int) -> list[dict[str, Any]]:  # fmt: skip
    command = [sys.executable, __file__, "--child", "--planner", planner, "--n-threads",
               str(threads), "--state", state, "--state-dir", args.state_dir, "--model",
               args.model, "--plans-per-process", str(args.plans_per_process),
               "--offset", str(offset), "--goal-readings", args.goal_readings,
               "--lora", args.lora]  # fmt: skip
    if args.goal_orders is not None:
        command += ["--goal-orders", str(args.goal_orders)]
    spawned = time.time()
    out = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"{planner} process failed: {out.stderr.strip()[-600:]}")
    rows = [json.loads(line[4:]) for line in out.stdout.splitlines() if line.startswith("ROW ")]
    for row in rows:
        row["process_seconds"] = (
            round(row.pop("ready_at") - spawned, 3) if row["index"] == 0 else None
        )
    return rows


def _done(path: Path) -> set[str]:
    return {row["key"] for row in read_jsonl(path)}


def _goal_fields(planner: str, args: argparse.Namespace) -> dict[str, Any]:
    """What sets a goal planner's rows apart: the adapter (and the second reader, and the
    scene orders when `--goal-orders` sets them), or the number of example orders (rows with
    neither: one rewrite per plan)."""
    if planner != "goal":
        return {}
    if args.goal_readings in ("both", "adapted"):
        from robocompose.hierarchical.llm.models import goal_adapter

        adapter = Path(args.lora) if args.lora else goal_adapter(args.model)
        fields = {"adapter": True, "adapter_file": adapter.stem if adapter else None}
        fields |= {"orders": args.goal_orders} if args.goal_orders is not None else {}
        return fields | ({"second_reader": True} if args.goal_readings == "both" else {})
    orders = _orders(args)
    return {"orders": orders} if orders != 1 else {}


def _orders(args: argparse.Namespace) -> int:
    """Scene listings a plan reads: `--goal-orders`, else the goal planner's default."""
    from robocompose.hierarchical.planners.goal import GoalPlannerConfig

    return args.goal_orders or GoalPlannerConfig().orders


def _record(
    path: Path, key: str, planner: str, threads: int, state: str, rows: list, fields: dict
) -> None:
    row = {"key": key, "planner": planner, "n_threads": threads, "state": state,
           "load_avg_1min": round(os.getloadavg()[0], 2), "cpu": cpu_model(), "plans": rows,
           **fields}  # fmt: skip
    with path.open("a") as f:
        f.write(json.dumps(row) + "\n")
    first = rows[0]
    print(
        f"{planner} t={threads} {state} {key}: process {first['process_seconds']} s, plan "
        f"{first['plan_seconds']} s, evaluated {first['prompt_tokens_evaluated']}"
        f"/{first['prompt_tokens']}",
        flush=True,
    )


def run_processes(args: argparse.Namespace) -> None:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for planner in args.planners.split(","):
        states = args.states.split(",") if planner == "goal" else ("disk",)
        fields = _goal_fields(planner, args)
        if "adapter" in fields:
            prefix = f"lora-{fields['adapter_file']}_".replace(".", "_")
            prefix += "both_" * ("second_reader" in fields)
            prefix += f"o{fields['orders']}_" if "orders" in fields else ""
        else:
            prefix = "".join(f"o{n}_" for n in fields.values())
        if args.machine:  # rows of another machine go to their own files
            prefix = f"{args.machine}_{prefix}"
            fields = {**fields, "machine": args.machine}
        for threads in [int(t) for t in args.threads.split(",")]:
            for state in states:
                path = OUT_DIR / f"{planner}_{prefix}t{threads}_{state}.jsonl"
                done = _done(path)
                todo = [p for p in range(args.processes) if f"p{p}" not in done]
                if todo and state == "disk" and not done:
                    _spawn(planner, threads, state, args, offset=99)  # saves the prefix state
                for p in todo:
                    rows = _spawn(planner, threads, state, args, offset=p)
                    _record(path, f"p{p}", planner, threads, state, rows, fields)


def prompt_lookup(args: argparse.Namespace) -> dict[str, Any]:
    """The goal prompt decoded with and without prompt-lookup drafts, both models in one process
    and timed in turn on every request (which goes first alternates), so load changes hit both
    alike; each model's first request evaluates the fixed part and is not timed."""
    import llama_cpp
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    from robocompose.hierarchical.goal import prompt as goal_prompt
    from robocompose.hierarchical.goal.facts import SceneNames
    from robocompose.hierarchical.goal.grammar import gbnf
    from robocompose.hierarchical.instructions import make_world
    from robocompose.hierarchical.llm.models import resolve_model

    path = str(resolve_model(args.model))
    items = _items(args.lookup_requests, 0)
    lookup = LlamaPromptLookupDecoding(num_pred_tokens=args.draft_tokens)
    drafts = {"plain": None, "prompt_lookup": lookup}
    models = {name: llama_cpp.Llama(model_path=path, n_ctx=4096, n_threads=2, n_threads_batch=2,
                                    seed=0, verbose=False, draft_model=draft,
                                    logits_all=draft is not None)
              for name, draft in drafts.items()}  # fmt: skip
    seconds: dict[str, list[float]] = {name: [] for name in models}
    tokens: dict[str, list[int]] = {name: [] for name in models}
    texts: dict[str, list[str]] = {name: [] for name in models}
    for k, item in enumerate(items):
        world = make_world(item)
        scene = SceneNames.of(world)
        world.close()
        chat = goal_prompt.messages(scene, item.instruction)
        for name in list(models)[:: 1 if k % 2 else -1]:
            grammar = llama_cpp.LlamaGrammar.from_string(gbnf(scene), verbose=False)
            start = time.perf_counter()
            reply = models[name].create_chat_completion(
                messages=chat, max_tokens=48, temperature=0.0, seed=0, grammar=grammar)  # fmt: skip
            if k:
                seconds[name].append(time.perf_counter() - start)
                tokens[name].append(reply["usage"]["completion_tokens"])
            texts[name].append(reply["choices"][0]["message"]["content"])
    for llama in models.values():
        llama.close()
    out: dict[str, Any] = {"requests": len(items), "timed": len(items) - 1,
                           "load_avg_1min": round(os.getloadavg()[0], 2)}  # fmt: skip
    for name in models:
        out[name] = {"mean_seconds": round(statistics.mean(seconds[name]), 3),
                     "median_seconds": round(statistics.median(seconds[name]), 3),
                     "mean_completion_tokens": round(statistics.mean(tokens[name]), 1)}  # fmt: skip
    ratios = [a / b for a, b in zip(seconds["prompt_lookup"], seconds["plain"], strict=True)]
    out["median_ratio_lookup_to_plain"] = round(statistics.median(ratios), 3)
    out["same_outputs"] = texts["plain"] == texts["prompt_lookup"]
    out["draft_tokens"] = args.draft_tokens
    out["faster"] = out["median_ratio_lookup_to_plain"] < 1
    return out


def _quantiles(rows: list[dict[str, Any]], key: str) -> dict[str, float | None]:
    values = sorted(r[key] for r in rows if r.get(key) is not None)
    if not values:
        return {f"{key}_p50": None, f"{key}_p90": None}
    at = {q: values[min(len(values) - 1, int(q * len(values)))] for q in (0.5, 0.9)}
    return {f"{key}_p50": round(at[0.5], 2), f"{key}_p90": round(at[0.9], 2)}


def _mean(rows: list[dict[str, Any]], key: str) -> float | None:
    return round(statistics.mean(r[key] for r in rows), 1) if rows else None


def summarize() -> dict[str, Any]:
    """Per planner and (n_threads, state): first plans (process and plan seconds) and later ones."""
    summary: dict[str, Any] = {}
    for path in sorted(OUT_DIR.glob("*.jsonl")):
        procs = read_jsonl(path)
        first = [p["plans"][0] for p in procs]
        later = [r for p in procs for r in p["plans"][1:]]
        entry = {
            "processes": len(procs),
            "first_plan": {
                **_quantiles(first, "process_seconds"),
                **_quantiles(first, "plan_seconds"),
                "model_load_seconds_p50": _quantiles(first, "load_seconds")["load_seconds_p50"],
                "prompt_tokens_evaluated_mean": _mean(first, "prompt_tokens_evaluated"),
                "prompt_tokens_mean": _mean(first, "prompt_tokens"),
            },
            "later_plans": {
                "n": len(later),
                **_quantiles(later, "plan_seconds"),
                "prompt_tokens_evaluated_mean": _mean(later, "prompt_tokens_evaluated"),
            },
            "load_avg_1min": [p["load_avg_1min"] for p in procs],
        }
        config = f"n_threads={procs[0]['n_threads']},state={procs[0]['state']}"
        if "orders" in procs[0]:
            config += f",orders={procs[0]['orders']}"
        if procs[0].get("adapter"):  # rows from before adapters were named: the first one's
            config += f",adapter={procs[0].get('adapter_file', 'goal-qwen2.5-coder-1.5b')}"
        if procs[0].get("second_reader"):
            config += ",second_reader"
        if procs[0].get("machine"):
            config += f",machine={procs[0]['machine']}"
        summary.setdefault(procs[0]["planner"], {})[config] = entry
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_parts(parser, PARTS)
    parser.add_argument("--planners", default=",".join(PLANNERS))
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--states", default="disk,none", help="goal: prompt state kept or not")
    parser.add_argument("--goal-orders", type=int, default=None,
                        help="goal: rewrites under that many example (or, with an adapter, "
                        "scene) orders (default: the planner's)")  # fmt: skip
    parser.add_argument(
        "--goal-readings",
        default="both",
        choices=("examples", "adapted", "both"),
        help="goal: its readers (plan goal_readings=): the few-shot model, the "
        "shipped LoRA adapter, or the adapter checked by the few-shot model",
    )
    parser.add_argument("--plans-per-process", type=int, default=3)
    parser.add_argument("--machine", default="",
                        help="a tag for rows measured on another machine (their own files and "
                        "summary keys)")  # fmt: skip
    parser.add_argument("--model", default=MODEL)
    parser.add_argument(
        "--state-dir", default=str(Path(tempfile.gettempdir()) / "robocompose-plan-latency-kv")
    )
    parser.add_argument("--lora", default="", help="goal: an adapter file for the first reader "
                        "(default: the model's shipped one)")  # fmt: skip
    parser.add_argument("--lookup-requests", type=int, default=9)
    parser.add_argument("--draft-tokens", type=int, default=4)
    parser.add_argument("--summarize", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--planner", default="goal", help=argparse.SUPPRESS)
    parser.add_argument("--n-threads", type=int, default=2, help=argparse.SUPPRESS)
    parser.add_argument("--state", default="disk", help=argparse.SUPPRESS)
    parser.add_argument("--offset", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    parts = () if args.summarize else args.parts
    if "processes" in parts:
        run_processes(args)
    if "prompt_lookup" in parts:
        RESULTS.set(["prompt_lookup"], prompt_lookup(args))
    RESULTS.update(lambda doc: doc.update(processes=summarize(), model=args.model))
    print(f"wrote {RESULTS.path}")


if __name__ == "__main__":
    main()

"""The skill layer's figures: the SortBins expert, each primitive, the long-horizon reference plans,
and place_in run by scripts, by shipped PickPlace policies and by their composition.

Parts (each episode appended to a JSONL under --out-dir, runs/benchmarks/skills by default, as
it finishes; a rerun resumes):
- sort_bins_expert: the scripted SortBins expert over `--seeds` seeds (env success).
- primitives: pick, place (on a block), place_at, push (each direction) on seeded Stack scenes.
- reference_plans: every long-horizon item's reference plan with the scripted skills.
- place_in/<implementation>: place_in(block, its bin) for every block of a seeded SortBins scene,
  in the scene's order; per-call success and whole-scene success, on the same seeds for every
  implementation.

Success rates come with their episode counts and Wilson 95% intervals.

    python benchmarks/skills.py [--seeds 50] [--parts all] [--implementations "scripted;..."]

On a busy machine run it with OMP_NUM_THREADS=1: with torch's default threads the diffusion
UNet's place_in took ~95 s per scene here under load, ~3 s with one thread.

A part's figures replace its old ones in skills.json; place_in's are kept per implementation, so
slow implementations can run on fewer seeds in a separate call.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from robocompose.hierarchical.learned_skills import registry_for
from robocompose.hierarchical.skills import DIRECTIONS, build_registry
from robocompose.hierarchical.tasks import (
    long_horizon_tasks,
    make_world,
    reference_plan,
    task_success,
)
from robocompose.hierarchical.world import SimWorld
from robocompose.sim.tasks import get_task, make_env, make_expert
from robocompose.stats import success_rate

RESULTS = Path(__file__).parent / "results" / "skills.json"
EPISODES = Path(__file__).resolve().parent.parent / "runs" / "benchmarks" / "skills"  # resumable
IMPLEMENTATIONS = (
    "scripted",
    "policy:PickPlace_flow_mlp",
    "policy:PickPlace_diffusion_unet",
    "composed:PickPlace_diffusion_unet+PickPlace_flow_mlp:convex:0.5,0.5",
)
PARTS = ("sort_bins_expert", "primitives", "reference_plans", "place_in")


def _resume(path: Path, keys: Iterable[str], run: Callable[[str], dict]) -> list[dict]:
    """Records of `path` by key; missing keys are run and appended one by one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    done = {}
    if path.exists():
        for line in path.read_text().splitlines():
            record = json.loads(line)
            done[record["key"]] = record
    with path.open("a") as f:
        for key in keys:
            if key not in done:
                done[key] = {"key": key, **run(key)}
                f.write(json.dumps(done[key]) + "\n")
                f.flush()
    return [done[k] for k in keys]


def _rate(records: list[dict], field: str = "success") -> dict[str, Any]:
    rate = success_rate(sum(bool(r[field]) for r in records), len(records))
    return {
        "rate": rate.rate,
        "ci95": [rate.ci_low, rate.ci_high],
        "n": rate.episodes,
        "text": str(rate),
    }


def sort_bins_expert(seeds: list[int], out: Path) -> dict:
    env, expert = make_env("SortBins"), make_expert("SortBins")
    limit = get_task("SortBins").max_episode_steps

    def run(key: str) -> dict:
        seed = int(key)
        env.reset(seed=seed)
        expert.reset(env, np.random.default_rng(seed))
        steps, terminated = 0, False
        while steps < limit and not terminated:
            _, _, terminated, _, info = env.step(expert.act(env))
            steps += 1
        return {"success": bool(info["success"]), "steps": steps}

    records = _resume(out / "sort_bins_expert.jsonl", [str(s) for s in seeds], run)
    return {
        **_rate(records),
        "mean_steps": float(np.mean([r["steps"] for r in records])),
        "seeds": len(seeds),
    }


def primitives(seeds: list[int], out: Path) -> dict:
    world = SimWorld("Stack")
    registry = build_registry(world)
    cases: dict[str, list[tuple]] = {
        "pick": [("pick", "red_block")],
        "place": [("pick", "red_block"), ("place", "red_block", "blue_block")],
        "place_at": [("pick", "green_block"), ("place_at", "green_block")],
        **{f"push_{d}": [("push", "blue_block", d, 0.05)] for d in DIRECTIONS},
    }

    def run(key: str) -> dict:
        name, seed = key.rsplit("/", 1)
        world.reset(int(seed))
        trace = None
        for call in cases[name]:
            if call[0] == "place_at":
                call = (*call, *map(float, world.free_spot(avoid=[call[1]])))
            trace = registry.call(world, *call)
            if not trace.success_check:
                break
        return {"success": bool(trace.success_check), "error": trace.error, "steps": world.steps}

    keys = [f"{name}/{s}" for name in cases for s in seeds]
    records = _resume(out / "primitives.jsonl", keys, run)
    return {name: _rate([r for r in records if r["key"].startswith(name + "/")]) for name in cases}


def reference_plans(out: Path) -> dict:
    items = long_horizon_tasks()

    def run(key: str) -> dict:
        item = items[int(key)]
        world = make_world(item)
        registry = build_registry(world)
        error = None
        for call in reference_plan(item):
            trace = registry.call(world, call["skill"], **call["args"])
            if not trace.success_check:
                error = f"{call}: {trace.error}"
                break
        record = {
            "task": item.task,
            "success": task_success(world),
            "error": error,
            "steps": world.steps,
        }
        world.close()
        return record

    records = _resume(out / "reference_plans.jsonl", [str(i) for i in range(len(items))], run)
    tasks = sorted({r["task"] for r in records})
    return {task: _rate([r for r in records if r["task"] == task]) for task in tasks}


def place_in(seeds: list[int], out: Path, implementation: str) -> dict:
    world = SimWorld("SortBins")
    registry = registry_for(world, {"place_in": implementation})

    def run(key: str) -> dict:
        world.reset(int(key))
        calls, start = [], time.perf_counter()
        for block in world.objects():
            trace = registry.call(world, "place_in", block, block.replace("_block", "_bin"))
            calls.append(
                {
                    "block": block,
                    "success": bool(trace.success_check),
                    "steps": trace.steps,
                    "error": trace.error,
                }
            )
        return {
            "calls": calls,
            "scene_success": task_success(world),
            "seconds": time.perf_counter() - start,
        }

    safe = implementation.replace(":", "_").replace("+", "_").replace(",", "_")
    records = _resume(out / f"place_in_{safe}.jsonl", [str(s) for s in seeds], run)
    calls = [c for r in records for c in r["calls"]]
    return {
        "kind": registry["place_in"].kind,
        "seeds": len(seeds),
        "calls": _rate(calls),
        "scenes": _rate(records, "scene_success"),
        "mean_steps_per_call": float(np.mean([c["steps"] for c in calls])),
        "seconds_per_scene": float(np.mean([r["seconds"] for r in records])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--parts", default="all", help=f"comma list of {PARTS} or 'all'")
    parser.add_argument(
        "--implementations",
        default=";".join(IMPLEMENTATIONS),
        help="place_in implementations, ';'-separated (composed specs hold commas)",
    )
    parser.add_argument("--out-dir", type=Path, default=EPISODES)
    args = parser.parse_args()
    parts = PARTS if args.parts == "all" else tuple(args.parts.split(","))
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part {unknown[0]!r}; choose from {PARTS}")
    seeds = list(range(args.seeds))
    result = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    for part in parts:
        start = time.perf_counter()
        if part == "sort_bins_expert":
            result[part] = sort_bins_expert(seeds, args.out_dir)
        elif part == "primitives":
            result[part] = primitives(seeds, args.out_dir)
        elif part == "reference_plans":
            result[part] = reference_plans(args.out_dir)
        else:
            for impl in args.implementations.split(";"):
                result.setdefault(part, {})[impl] = place_in(seeds, args.out_dir, impl)
                RESULTS.write_text(json.dumps(result, indent=2) + "\n")
        print(part, f"{time.perf_counter() - start:.0f} s", json.dumps(result[part]), flush=True)
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()

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
- skill_policies: the skill-conditioned diffusion and flow policies (`make train-skills`) and
  their best composition, per skill case: pick (a Stack block), place_on (a held Stack block
  onto another), place_on_stack (onto a two-block tower), place_in (a held SortBins block into
  its bin); the scenes before the measured call are built by the scripted skills. The
  composition (convex weights on a grid, or the product of experts) is chosen per case on
  `--search-seeds` seeds, then all three run on `--skill-seeds` fresh seeds, paired against the
  better single policy.
- skill_policies_flow_pair: the same for two flow skill policies of one recipe trained from
  different seeds (`Tabletop_skills_flow_mlp` and `_b`).
- skill_language: the flow skill policy with learned token embeddings (shipped) against the same
  policy trained with all-MiniLM-L6-v2 sentence embeddings (`make train-skills-minilm`), per
  skill case on the fresh seeds, paired.
- planner_learned_skills: every long-horizon item planned by the skills planner (the local
  Qwen model, repair rounds as `robocompose plan`) with pick and place by `--learned`.
- long_horizon_skills: every long-horizon item's reference plan with scripted, learned (pick and
  place by `--learned`), learned_composed (each skill by the composition chosen for it)
  and mixed (learned pick, scripted place) skills, on the items' own seeds.

Success rates come with their episode counts and Wilson 95% intervals.

    python benchmarks/skills.py [--seeds 50] [--parts all] [--implementations "scripted;..."]

On a busy machine run it with OMP_NUM_THREADS=1: torch's default thread pool fights the other
jobs for the cores, and the diffusion UNet's place_in slows down most.

A part's figures replace its old ones in skills.json; place_in's are kept per implementation, so
slow implementations can run on fewer seeds in a separate call. skills.json is shared: this
script owns every key but `language_to_rewards` (language_to_rewards.py) and
`corrections_finetune` (corrections_finetune.py); common.KEY_OWNERS refuses a write to theirs.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import RUNS_DIR, ResultsFile, add_parts, resume_records
from skill_policies import (
    FRESH_SEED_START,
    MINILM,
    PAIRS,
    SEARCH_SEED_START,
    SKILL_CASES,
    SKILL_PARENTS,
    rate_of,
    safe_name,
    skill_language,
    skill_policies,
)

from robocompose.hierarchical.api import ENV_CATEGORIES, plan_and_run
from robocompose.hierarchical.instructions import (
    InstructionItem,
    instruction_items,
    make_world,
    reference_plan,
)
from robocompose.hierarchical.llm import LLMConfig
from robocompose.hierarchical.skills.learned import registry_for
from robocompose.hierarchical.skills.scripted import DIRECTIONS, build_registry
from robocompose.hierarchical.world import SimWorld
from robocompose.sim.tasks import get_task, make_env, make_expert
from robocompose.stats import paired_outcomes

RESULTS = ResultsFile("skills.json", writer="skills.py")
EPISODES = RUNS_DIR / "skills"  # resumable
IMPLEMENTATIONS = (
    "scripted",
    "policy:PickPlace_flow_mlp",
    "policy:PickPlace_diffusion_unet",
    "composed:PickPlace_diffusion_unet+PickPlace_flow_mlp:convex:0.5,0.5",
)
PARTS = (
    "sort_bins_expert",
    "primitives",
    "reference_plans",
    "place_in",
    "skill_policies",
    "skill_policies_flow_pair",
    "skill_language",
    "long_horizon_skills",
    "planner_learned_skills",
)


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

    records = resume_records(out / "sort_bins_expert.jsonl", [str(s) for s in seeds], run)
    return {
        **rate_of(records),
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
    records = resume_records(out / "primitives.jsonl", keys, run)
    return {
        name: rate_of([r for r in records if r["key"].startswith(name + "/")]) for name in cases
    }


def _reference_plan_episode(item: InstructionItem, skills: dict[str, str]) -> dict:
    """The item's reference plan on its own seed, with `skills` (skill -> spec; the rest
    scripted); it stops at the first call whose success check fails."""
    world = make_world(item)
    registry = registry_for(world, skills)
    error = None
    start = time.perf_counter()
    for call in reference_plan(item):
        trace = registry.call(world, call["skill"], **call["args"])
        if not trace.success_check:
            error = f"{call}: {trace.error}"
            break
    record = {
        "task": item.category,  # the episode files' key
        "success": world.success(),
        "error": error,
        "steps": world.steps,
        "seconds": time.perf_counter() - start,
    }
    world.close()
    return record


def reference_plans(out: Path) -> dict:
    items = instruction_items("long_horizon")

    def run(key: str) -> dict:
        return _reference_plan_episode(items[int(key)], {})

    records = resume_records(
        out / "reference_plans.jsonl", [str(i) for i in range(len(items))], run
    )
    tasks = sorted({r["task"] for r in records})
    return {task: rate_of([r for r in records if r["task"] == task]) for task in tasks}


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
            "scene_success": world.success(),
            "seconds": time.perf_counter() - start,
        }

    safe = implementation.replace(":", "_").replace("+", "_").replace(",", "_")
    records = resume_records(out / f"place_in_{safe}.jsonl", [str(s) for s in seeds], run)
    calls = [c for r in records for c in r["calls"]]
    return {
        "kind": registry["place_in"].kind,
        "seeds": len(seeds),
        "calls": rate_of(calls),
        "scenes": rate_of(records, "scene_success"),
        "mean_steps_per_call": float(np.mean([c["steps"] for c in calls])),
        "seconds_per_scene": float(np.mean([r["seconds"] for r in records])),
    }


def long_horizon_skills(out: Path, learned: str, searched: dict[str, str]) -> dict:
    """The reference plans with scripted, learned, learned-composed and mixed skills."""
    modes = {
        "scripted": {},
        "learned": {"pick": learned, "place": learned},
        "learned_composed": searched,
        "mixed": {"pick": learned},
    }
    items = instruction_items("long_horizon")

    def run(mode: str, key: str) -> dict:
        return _reference_plan_episode(items[int(key)], modes[mode])

    keys = [str(i) for i in range(len(items))]
    result: dict[str, Any] = {"specs": modes}
    records = {}
    for mode in modes:
        specs = "__".join(safe_name(modes[mode].get(s, "scripted")) for s in ("pick", "place"))
        path = out / "long_horizon_skills" / f"{mode}__{specs}.jsonl"  # a new spec runs anew
        records[mode] = resume_records(path, keys, lambda key, mode=mode: run(mode, key))
        tasks = sorted({r["task"] for r in records[mode]})
        result[mode] = {t: rate_of([r for r in records[mode] if r["task"] == t]) for t in tasks}
        result[mode]["all"] = rate_of(records[mode])
    for mode in ("learned", "learned_composed", "mixed"):
        paired = paired_outcomes(
            [r["success"] for r in records[mode]], [r["success"] for r in records["scripted"]]
        )
        result[f"{mode}_minus_scripted"] = {
            "difference": paired.difference,
            "ci95": [paired.ci_low, paired.ci_high],
        }
    return result


def planner_learned_skills(out: Path, learned: str) -> dict:
    """Each long-horizon item planned by the LLM's skills planner and run on learned skills."""
    skills = {"pick": learned, "place": learned}
    items = instruction_items("long_horizon")
    envs = {category: env for env, category in ENV_CATEGORIES.items()}

    def run(key: str) -> dict:
        item = items[int(key)]
        start = time.perf_counter()
        found = plan_and_run(
            task=envs[item.category],
            phrasing=item.index,  # within its category, as `plan phrasing=` counts
            planner="skills",
            skills=skills,
            llm=LLMConfig(n_threads=1),
            video=False,
            corrections=False,
            out=str(out / "planner_learned_skills" / "runs"),
        )
        rounds = found.record.rounds
        return {
            "task": item.category,
            "success": found.success,
            "rounds": len(rounds),
            "plan": rounds[0].plan if rounds else [],
            "seconds": time.perf_counter() - start,
        }

    path = out / "planner_learned_skills" / f"{safe_name(learned)}.jsonl"
    records = resume_records(path, [str(i) for i in range(len(items))], run)
    result: dict[str, Any] = {"skills": skills, "planner": "skills"}
    for task in sorted({r["task"] for r in records}):
        result[task] = rate_of([r for r in records if r["task"] == task])
    result["all"] = rate_of(records)
    return result


def _searched_specs() -> dict[str, str]:
    """Per skill the composition skill_policies chose (place: its place_on case)."""
    stored = RESULTS.read().get("skill_policies")
    if not stored:
        raise SystemExit("long_horizon_skills needs the skill_policies part first.")
    return {
        "pick": stored["pick"]["composed_spec"],
        "place": stored["place_on"]["composed_spec"],
    }


def _update(key: str, value: Any, merge: bool = False) -> None:
    """Replace only `key` of skills.json (`merge`: update its mapping)."""
    if merge:
        RESULTS.update(lambda result: result.setdefault(key, {}).update(value))
    else:
        RESULTS.set([key], value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=50)
    add_parts(parser, PARTS)
    parser.add_argument(
        "--implementations",
        default=";".join(IMPLEMENTATIONS),
        help="place_in implementations, ';'-separated (composed specs hold commas)",
    )
    parser.add_argument("--out-dir", type=Path, default=EPISODES)
    parser.add_argument("--skill-seeds", type=int, default=200, help="fresh seeds per policy")
    parser.add_argument("--search-seeds", type=int, default=50, help="per searched weight")
    parser.add_argument("--skill-cases", default=",".join(SKILL_CASES), help="comma list")
    parser.add_argument("--learned", default=f"learned:{SKILL_PARENTS[1]}")
    parser.add_argument("--minilm", default=MINILM, help="skill_language's MiniLM checkpoint")
    args = parser.parse_args()
    seeds = list(range(args.seeds))
    fresh = list(range(FRESH_SEED_START, FRESH_SEED_START + args.skill_seeds))
    for part in args.parts:
        start = time.perf_counter()
        if part in PAIRS:
            search = list(range(SEARCH_SEED_START, SEARCH_SEED_START + args.search_seeds))
            cases = args.skill_cases.split(",")
            value = skill_policies(fresh, search, args.out_dir, PAIRS[part], cases)
        elif part == "skill_language":
            value = skill_language(fresh, args.out_dir, args.minilm)
        elif part == "planner_learned_skills":
            value = planner_learned_skills(args.out_dir, args.learned)
        elif part == "long_horizon_skills":
            value = long_horizon_skills(args.out_dir, args.learned, _searched_specs())
        elif part == "sort_bins_expert":
            value = sort_bins_expert(seeds, args.out_dir)
        elif part == "primitives":
            value = primitives(seeds, args.out_dir)
        elif part == "reference_plans":
            value = reference_plans(args.out_dir)
        else:  # place_in: kept per implementation, so slow ones can run in a call of their own
            value = {
                impl: place_in(seeds, args.out_dir, impl)
                for impl in args.implementations.split(";")
            }
        _update(part, value, merge=part == "place_in")
        print(part, f"{time.perf_counter() - start:.0f} s", json.dumps(value), flush=True)


if __name__ == "__main__":
    main()

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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from common import RUNS_DIR, ResultsFile, add_parts, resume_records

from robocompose.hierarchical.api import LONG_TASKS, plan_and_run
from robocompose.hierarchical.skills.learned import registry_for
from robocompose.hierarchical.skills.scripted import DIRECTIONS, build_registry
from robocompose.hierarchical.tasks import (
    LongHorizonItem,
    long_horizon_tasks,
    make_world,
    reference_plan,
    task_success,
)
from robocompose.hierarchical.world import SimWorld
from robocompose.sim.stack import STACK_XY_TOL_M
from robocompose.sim.tasks import get_task, make_env, make_expert
from robocompose.stats import paired_outcomes, success_rate

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
MINILM = "runs/skills_language/Tabletop_skills_flow_mlp_minilm"
SKILL_PARENTS = ("Tabletop_skills_diffusion_mlp", "Tabletop_skills_flow_mlp")
# the pair each skill_policies part composes: label -> checkpoint (the first is weighted first)
PAIRS: dict[str, dict[str, str]] = {
    "skill_policies": dict(zip(("diffusion", "flow"), SKILL_PARENTS, strict=True)),
    # two flow policies of one recipe, trained from different seeds
    "skill_policies_flow_pair": {
        "flow": "Tabletop_skills_flow_mlp",
        "flow_b": "Tabletop_skills_flow_mlp_b",
    },
}
SKILL_CASES = ("pick", "place_on", "place_on_stack", "place_in")
# the compositions searched per skill case: convex weights (first parent, second) and the
# product of experts
SEARCH_CANDIDATES: tuple[tuple[str, tuple[float, float]], ...] = (
    *(("convex", (w, 1 - w)) for w in (0.1, 0.3, 0.5, 0.7, 0.9)),
    ("weighted_sum", (1.0, 1.0)),
)
FRESH_SEED_START, SEARCH_SEED_START = 10_000, 20_000  # disjoint from the demos' and each other


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

    records = resume_records(out / "sort_bins_expert.jsonl", [str(s) for s in seeds], run)
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
    records = resume_records(out / "primitives.jsonl", keys, run)
    return {name: _rate([r for r in records if r["key"].startswith(name + "/")]) for name in cases}


def _reference_plan_episode(item: LongHorizonItem, skills: dict[str, str]) -> dict:
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
        "task": item.task,
        "success": task_success(world),
        "error": error,
        "steps": world.steps,
        "seconds": time.perf_counter() - start,
    }
    world.close()
    return record


def reference_plans(out: Path) -> dict:
    items = long_horizon_tasks()

    def run(key: str) -> dict:
        return _reference_plan_episode(items[int(key)], {})

    records = resume_records(
        out / "reference_plans.jsonl", [str(i) for i in range(len(items))], run
    )
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
    records = resume_records(out / f"place_in_{safe}.jsonl", [str(s) for s in seeds], run)
    calls = [c for r in records for c in r["calls"]]
    return {
        "kind": registry["place_in"].kind,
        "seeds": len(seeds),
        "calls": _rate(calls),
        "scenes": _rate(records, "scene_success"),
        "mean_steps_per_call": float(np.mean([c["steps"] for c in calls])),
        "seconds_per_scene": float(np.mean([r["seconds"] for r in records])),
    }


def _composed(
    operator: str, weights: tuple[float, float], parents: tuple[str, ...] = SKILL_PARENTS
) -> str:
    return f"learned:{'+'.join(parents)}:{operator}:{weights[0]:g},{weights[1]:g}"


def _safe(spec: str) -> str:
    return spec.replace(":", "_").replace("+", "_").replace(",", "_")


def _skill_episode(worlds: dict[str, SimWorld], spec: str, case: str, seed: int) -> dict:
    """One call of the case's skill by `spec` on a seeded scene (the same scene, arguments and
    scripted setup for every spec of a seed)."""
    world = worlds["SortBins" if case == "place_in" else "Stack"]
    world.reset(seed)
    blocks = world.objects()
    rng = np.random.default_rng((seed, 7))
    obj, other, third = (blocks[i] for i in rng.permutation(len(blocks)))
    setup_calls = {
        "pick": [],
        "place_on": [("pick", obj)],
        "place_in": [("pick", obj)],
        # the tower's second storey, as stack_three's last place meets it
        "place_on_stack": [("pick", other), ("place", other, third), ("pick", obj)],
    }
    scripted = build_registry(world)
    for call in setup_calls[case]:
        setup = scripted.call(world, *call)
        if not setup.success_check:
            return {"success": False, "setup_failed": True, "steps": 0, "error": setup.error}
    skill = "pick" if case == "pick" else "place"
    registry = registry_for(world, {skill: spec})
    args = {
        "pick": (obj,),
        "place_on": (obj, other),
        "place_on_stack": (obj, other),
        "place_in": (obj, obj[: -len("block")] + "bin"),
    }
    trace = registry.call(world, skill, *args[case])
    record = {
        "success": bool(trace.success_check),
        "setup_failed": False,
        "steps": trace.steps,
        "error": trace.error,
    }
    if case != "pick":  # how far from the target's centre it came to rest, in xy
        offset = np.subtract(world.position(obj)[:2], world.position(args[case][1])[:2])
        record["xy_error_m"] = float(np.hypot(*offset))
    return record


def _skill_runs(
    worlds: dict[str, SimWorld], spec: str, case: str, seeds: list[int], out: Path
) -> list[dict]:
    return resume_records(
        out / "skill_policies" / f"{case}_{_safe(spec)}.jsonl",
        [str(s) for s in seeds],
        lambda key: _skill_episode(worlds, spec, case, int(key)),
    )


def skill_policies(
    fresh: list[int], search: list[int], out: Path, pair: dict[str, str], cases: Sequence[str]
) -> dict:
    """Per case: the composition chosen on the search seeds, then each parent of `pair` (label
    -> checkpoint) and the composition on fresh seeds."""
    worlds = {task: SimWorld(task) for task in ("Stack", "SortBins")}
    singles = {label: f"learned:{ckpt}" for label, ckpt in pair.items()}
    parents = tuple(pair.values())

    def composed(candidate: tuple[str, tuple[float, float]]) -> str:
        return _composed(*candidate, parents=parents)

    result: dict[str, Any] = {"pair": pair}
    for case in cases:
        grid = {
            candidate: _rate(_skill_runs(worlds, composed(candidate), case, search, out))
            for candidate in SEARCH_CANDIDATES
        }
        # ties go to the convex weights nearest (0.5, 0.5)
        best = max(
            SEARCH_CANDIDATES,
            key=lambda c: (grid[c]["rate"], c[0] == "convex", -abs(c[1][0] - 0.5)),
        )
        runs = {name: _skill_runs(worlds, spec, case, fresh, out) for name, spec in singles.items()}
        runs["composed"] = _skill_runs(worlds, composed(best), case, fresh, out)
        rates = {name: _rate(r) for name, r in runs.items()}
        if case.startswith("place_on"):  # the Stack env's own tolerance, stricter than the skill's
            rates |= {
                f"{name}_within_stack_tol": _rate(
                    [{"ok": r["success"] and r["xy_error_m"] < STACK_XY_TOL_M} for r in v], "ok"
                )
                for name, v in runs.items()
            }
        better = max(singles, key=lambda name: rates[name]["rate"])
        paired = paired_outcomes(
            [r["success"] for r in runs["composed"]], [r["success"] for r in runs[better]]
        )
        result[case] = {
            **rates,
            "search": {composed(c): grid[c] for c in SEARCH_CANDIDATES},
            "composed_operator": best[0],
            "composed_weights": list(best[1]),
            "composed_spec": composed(best),
            "better_single": better,
            "composed_minus_better": {
                "difference": paired.difference,
                "ci95": [paired.ci_low, paired.ci_high],
                "only_composed": paired.only_a,
                "only_better": paired.only_b,
            },
            "setup_failures": sum(r["setup_failed"] for r in runs["composed"]),
            "mean_steps": {n: float(np.mean([r["steps"] for r in v])) for n, v in runs.items()},
        }
    result["composition_matches_or_beats"] = sum(
        result[c]["composed"]["rate"] >= result[c][result[c]["better_single"]]["rate"]
        for c in cases
    )
    result["seeds"] = {"fresh": len(fresh), "search": len(search)}
    for world in worlds.values():
        world.close()
    return result


def skill_language(fresh: list[int], out: Path, minilm: str) -> dict:
    """Token embeddings against sentence embeddings, the flow policy, per case, paired."""
    worlds = {task: SimWorld(task) for task in ("Stack", "SortBins")}
    specs = {"tokens": f"learned:{SKILL_PARENTS[1]}", "minilm": f"learned:{minilm}"}
    result: dict[str, Any] = {"checkpoints": specs, "seeds": len(fresh)}
    for case in SKILL_CASES:
        runs = {name: _skill_runs(worlds, spec, case, fresh, out) for name, spec in specs.items()}
        paired = paired_outcomes(
            [r["success"] for r in runs["minilm"]], [r["success"] for r in runs["tokens"]]
        )
        result[case] = {
            **{name: _rate(r) for name, r in runs.items()},
            "minilm_minus_tokens": {
                "difference": paired.difference,
                "ci95": [paired.ci_low, paired.ci_high],
            },
        }
    for world in worlds.values():
        world.close()
    return result


def long_horizon_skills(out: Path, learned: str, searched: dict[str, str]) -> dict:
    """The reference plans with scripted, learned, learned-composed and mixed skills."""
    modes = {
        "scripted": {},
        "learned": {"pick": learned, "place": learned},
        "learned_composed": searched,
        "mixed": {"pick": learned},
    }
    items = long_horizon_tasks()

    def run(mode: str, key: str) -> dict:
        return _reference_plan_episode(items[int(key)], modes[mode])

    keys = [str(i) for i in range(len(items))]
    result: dict[str, Any] = {"specs": modes}
    records = {}
    for mode in modes:
        specs = "__".join(_safe(modes[mode].get(s, "scripted")) for s in ("pick", "place"))
        path = out / "long_horizon_skills" / f"{mode}__{specs}.jsonl"  # a new spec runs anew
        records[mode] = resume_records(path, keys, lambda key, mode=mode: run(mode, key))
        tasks = sorted({r["task"] for r in records[mode]})
        result[mode] = {t: _rate([r for r in records[mode] if r["task"] == t]) for t in tasks}
        result[mode]["all"] = _rate(records[mode])
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
    items = long_horizon_tasks()
    envs = {task: env for env, task in LONG_TASKS.items()}
    phrasing = {}  # item index -> its index within its task, as `plan phrasing=` counts
    for i, item in enumerate(items):
        phrasing[i] = sum(other.task == item.task for other in items[:i])

    def run(key: str) -> dict:
        item = items[int(key)]
        start = time.perf_counter()
        found = plan_and_run(
            task=envs[item.task],
            phrasing=phrasing[int(key)],
            planner="skills",
            skills=skills,
            n_threads=1,
            video=False,
            corrections=False,
            out=str(out / "planner_learned_skills" / "runs"),
        )
        rounds = found.record.rounds
        return {
            "task": item.task,
            "success": found.success,
            "rounds": len(rounds),
            "plan": rounds[0].plan if rounds else [],
            "seconds": time.perf_counter() - start,
        }

    path = out / "planner_learned_skills" / f"{_safe(learned)}.jsonl"
    records = resume_records(path, [str(i) for i in range(len(items))], run)
    result: dict[str, Any] = {"skills": skills, "planner": "skills"}
    for task in sorted({r["task"] for r in records}):
        result[task] = _rate([r for r in records if r["task"] == task])
    result["all"] = _rate(records)
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

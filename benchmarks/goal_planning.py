"""How fast the planning libraries find the goal planner's calls on the scenes' domains.

For each scene (Stack with 2 to 5 blocks, SortBins with 3 blocks and 3 bins) and each
(start, goal) pair drawn from its configurations (towers, blocks in bins, rebuilt towers), both
engines of `goal.search` find a plan from the skills' declared operators: pyperplan's
breadth-first search in process, and Fast Downward (optimal) through unified-planning. Reported
per engine and scene: plan seconds (median, p90, max), plan length agreement with the exact
shortest length (the solver's breadth-first sweep), and the first call's seconds in a process
(imports, and Fast Downward's subprocess start). Also the solver's own seconds per scene.

    python benchmarks/goal_planning.py [--pairs 20] [--out benchmarks/results/goal_planning.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from pathlib import Path

from common import ResultsFile

from robocompose.hierarchical.goal.constraints import Program, Statement
from robocompose.hierarchical.goal.facts import SceneNames, state_of
from robocompose.hierarchical.goal.search import ENGINES, find_plan
from robocompose.hierarchical.goal.solver import configurations, distances, solve
from robocompose.hierarchical.goal.strips import ground
from robocompose.hierarchical.skills.declarations import PICK, PLACE, PLACE_AT

RESULTS = ResultsFile("goal_planning.json", writer="goal_planning.py", indent=1)

OPS = PICK + PLACE + PLACE_AT
COLOURS = ("red", "green", "blue", "yellow", "purple")
SCENES = {
    "stack_2": SceneNames(tuple(f"{c}_block" for c in COLOURS[:2])),
    "stack_3": SceneNames(tuple(f"{c}_block" for c in COLOURS[:3])),
    "stack_4": SceneNames(tuple(f"{c}_block" for c in COLOURS[:4])),
    "stack_5": SceneNames(tuple(f"{c}_block" for c in COLOURS[:5])),
    "sort_3x3": SceneNames(
        tuple(f"{c}_block" for c in COLOURS[:3]), tuple(f"{c}_bin" for c in COLOURS[:3])
    ),
}


def _quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return {
        "median_s": round(statistics.median(ordered), 5),
        "p90_s": round(p90, 5),
        "max_s": round(ordered[-1], 5),
    }


def measure(name: str, scene: SceneNames, pairs: int, rng: random.Random) -> dict:
    configs = list(configurations(scene))
    drawn = [(rng.choice(configs), rng.choice(configs)) for _ in range(pairs)]
    out: dict = {"configurations": len(configs), "pairs": len(drawn), "engines": {}}
    exact = []
    solver_s = []
    for start, goal in drawn:
        begin = state_of(start, scene)
        t0 = time.perf_counter()
        dist = distances(begin, ground(OPS, scene.objects))
        target = state_of(goal, scene)
        exact.append(dist[target])
        program = Program(tuple(Statement("stay", (b,)) for b in scene.blocks))
        solve(program, begin, scene, OPS)  # the solver on a full configuration request
        solver_s.append(time.perf_counter() - t0)
    out["solver"] = _quantiles(solver_s)
    for engine in ENGINES:
        seconds, agree = [], 0
        for (start, goal), shortest in zip(drawn, exact, strict=True):
            t0 = time.perf_counter()
            plan = find_plan(state_of(start, scene), state_of(goal, scene), OPS, scene, engine)
            seconds.append(time.perf_counter() - t0)
            agree += plan is not None and len(plan) == shortest
        out["engines"][engine] = {**_quantiles(seconds), "shortest": f"{agree}/{len(drawn)}"}
        print(name, engine, out["engines"][engine], flush=True)
    return out


def first_call_seconds() -> dict[str, float]:
    """Each engine's first plan in this process (imports, subprocess start) on stack_3."""
    scene = SCENES["stack_3"]
    flat = {b: "table" for b in scene.blocks}
    tower = {b: ("table" if k == 0 else scene.blocks[k - 1]) for k, b in enumerate(scene.blocks)}
    out = {}
    for engine in ENGINES:
        t0 = time.perf_counter()
        find_plan(state_of(flat, scene), state_of(tower, scene), OPS, scene, engine)
        out[engine] = round(time.perf_counter() - t0, 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=20, help="(start, goal) pairs per scene")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS.path))
    args = parser.parse_args()
    first = first_call_seconds()  # before anything else imports the engines
    rng = random.Random(args.seed)
    scenes = {name: measure(name, scene, args.pairs, rng) for name, scene in SCENES.items()}
    result = {
        "first_call_s": first,
        "scenes": scenes,
        "pairs_per_scene": args.pairs,
        "load_average_1min": round(os.getloadavg()[0], 2),  # the machine was not idle if > 2
    }
    out = Path(args.out)  # the script owns every key of its file: the run replaces it
    ResultsFile(out.name, writer=RESULTS.writer, indent=1, folder=out.parent).write(result)
    print(json.dumps(first))


if __name__ == "__main__":
    main()

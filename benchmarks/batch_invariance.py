"""Does an episode's outcome depend on `num_envs`? Per-episode against batched inference.

Subjects: two shipped checkpoints (a UNet and an MLP) and the demo's kind of composition (Stack's
diffusion and flow MLPs, convex 0.5/0.5), whose Python sampling loop pays most per call. For
each, the same seeds run with per-episode inference (the default) at num_envs 1, 2
and 8, and with batched inference at num_envs 2 and 8 (batched at 1 is per-episode by
construction). Per-episode runs must give identical records; for batched runs we count the seeds
whose record (success, score, return, length) differs from per-episode's, and those whose success
differs. Time per episode compares the two at num_envs 8 on one torch thread: they run in
alternation `--rounds` times and the fastest round of each counts, in wall time and in this
process's CPU time (other processes sharing the machine slow single rounds by up to several
times; CPU time, all of it on one thread, is what they disturb least).

    python benchmarks/batch_invariance.py [--episodes 20] [--rounds 3] [--only PushT_flow_unet]

Writes benchmarks/results/batch_invariance.json after every run; a rerun skips the runs already
there (a killed run redoes only the run it was in, so its wall time stays whole).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from common import CHECKPOINTS, ResultsFile

from robocompose.composition.api import compose, load
from robocompose.composition.composed_policy import ComposedPolicy
from robocompose.evaluation import evaluate
from robocompose.records import EvalResult

COMPOSED = "Stack_convex_0.5_0.5"
SUBJECTS = ("PushT_flow_unet", "Stack_flow_mlp", COMPOSED)
SEED_START = 100_000
RUN_MODES = ("per-episode", "batched")
RUNS = (("per-episode", 1), ("per-episode", 2), ("per-episode", 8), ("batched", 2), ("batched", 8))
FIELDS = ("success", "score", "return", "length")
RESULTS = ResultsFile("batch_invariance.json", writer="batch_invariance.py")


def outcome(record: dict) -> list:
    return [record[k] for k in FIELDS]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3, help="timing rounds at num_envs 8")
    parser.add_argument("--only", default="", help=f"comma-separated of {', '.join(SUBJECTS)}")
    args = parser.parse_args()
    torch.set_num_threads(1)
    seeds = list(range(SEED_START, SEED_START + args.episodes))
    saved = RESULTS.read()
    if saved.get("seeds") != seeds:
        saved = {}
    results = saved.get("checkpoints", {})
    only = {s for s in args.only.split(",") if s}
    for name in SUBJECTS:
        if only and name not in only:
            continue
        runs = results.setdefault(name, {}).setdefault("runs", {})
        for mode, num_envs in RUNS:
            key = f"{mode}-{num_envs}"
            if key in runs:
                continue
            result, seconds, _ = timed_run(name, seeds, mode, num_envs)
            runs[key] = {
                "mode": mode,
                "num_envs": num_envs,
                "success": str(result.success),
                "outcomes": {str(r["seed"]): outcome(r) for r in result.records},
                "seconds_per_episode": seconds / len(seeds),
            }
            print(f"{name} {key}: {result.success}", flush=True)
            results[name].update(compare(runs))
            RESULTS.write({"seeds": seeds, "checkpoints": results})
        timing = results[name].setdefault("timing_at_8", {m: [] for m in RUN_MODES})
        while len(timing["batched"]) < args.rounds:
            for mode in RUN_MODES:
                _, wall, cpu = timed_run(name, seeds, mode, 8)
                timing[mode].append({"wall_s": wall / len(seeds), "cpu_s": cpu / len(seeds)})
            for clock in ("wall_s", "cpu_s"):
                best = {m: min(t[clock] for t in timing[m]) for m in RUN_MODES}
                timing[f"fastest_{clock}_per_episode"] = best
                timing[f"per_episode_over_batched_{clock}"] = best["per-episode"] / best["batched"]
            print(f"{name} timing at 8: {timing['fastest_cpu_s_per_episode']} (cpu)", flush=True)
            RESULTS.write({"seeds": seeds, "checkpoints": results})


def subject(name: str) -> Path | ComposedPolicy:
    """A checkpoint folder, or the composition built afresh (a run moves it to its device)."""
    if name != COMPOSED:
        return CHECKPOINTS / name
    parents = [load(CHECKPOINTS / f"Stack_{kind}_mlp") for kind in ("diffusion", "flow")]
    return compose(parents, "convex", (0.5, 0.5))


def timed_run(
    name: str, seeds: list[int], mode: str, num_envs: int
) -> tuple[EvalResult, float, float]:
    """The run's result, wall seconds and this process's CPU seconds."""
    start, cpu = time.perf_counter(), time.process_time()
    result = evaluate(
        subject(name),
        seeds,
        num_envs=num_envs,
        device="cpu",
        batch_invariant=mode == "per-episode",
        progress=False,
    )
    return result, time.perf_counter() - start, time.process_time() - cpu


def compare(runs: dict) -> dict:
    """Seeds whose outcome differs from per-episode inference at num_envs 1."""
    reference = runs.get("per-episode-1")
    if reference is None:
        return {}
    out: dict = {"differ_from_per_episode_1": {}, "success_differs_from_per_episode_1": {}}
    for key, run in runs.items():
        seeds = [s for s, o in run["outcomes"].items() if o != reference["outcomes"].get(s)]
        flips = [s for s in seeds if run["outcomes"][s][0] != reference["outcomes"][s][0]]
        out["differ_from_per_episode_1"][key] = len(seeds)
        out["success_differs_from_per_episode_1"][key] = len(flips)
    return out


if __name__ == "__main__":
    main()

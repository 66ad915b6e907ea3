"""GymPushT (gym-pusht, the original pymunk PushT) as an external task: key `GymPushT` of
external.json.

Parts (episodes appended to JSONL files under runs/benchmarks/external/GymPushT as they end; a
rerun resumes):
- expert: the MPC expert (robocompose.sim.experts.gym_pusht) on `--fresh` fresh seeds, the env's
  own success rule (coverage > 0.95) and LeRobot's 300-step limit, with seconds per episode and
  ms per step; plus what the demo collection of data/GymPushT.hdf5 attempted (its seeds).
- policies: the MLP parent pair (GymPushT_*_mlp) on the fresh seeds; `search` (every searchable
  operator, convex weights on grid step `--step`, and each parent alone, in one successive-
  halving pool) on `--search` search seeds disjoint from them; then its choice, its best convex
  weights and the product of experts (weighted sum, w = (1, 1)) on the same fresh seeds, each
  paired seed by seed against both parents (difference with Newcombe's paired 95% interval).
- flow_unet: the flow UNet (GymPushT_flow_unet, `make train-GymPushT-unet`) on the
  same fresh seeds, paired against each MLP parent: is the task learnable from these demos by
  the backbone that does best on our PushT?
- policies_unet: `policies` for the UNet pair (a v-prediction diffusion UNet and the flow UNet;
  its search in search_policies_unet/).
- vertex_unet: each UNet parent's vertex of the composition (weights one-hot) against the parent
  on its own sampler, paired on the fresh seeds (key policies_unet.vertex_gap).
- selector, selector_unet: the selector composition of the MLP (UNet) pair, by
  `--selector-score`, on the fresh seeds against the better parent and the per-seed oracle (key
  policies.selector or policies_unet.selector, another score's under its selector_by_score).
- verifier, verifier_unet: the selector of the MLP (UNet) pair by a chunk verifier learned from
  its search's chunk logs and rounds of its own episodes (external.py's `verifier` part) on the
  fresh seeds; key policies.selector (policies_unet.selector), the agreement run it replaces
  moved to selector_by_score.agreement.
- compare: our MuJoCo PushT's figures beside these (from sim.json, policies.json and
  composition.json) and what differs between the two tasks.

    python benchmarks/external_pusht.py [--parts expert,policies,compare] [--fresh 200]

external.json's headlines over every pair (these two included) are external.py's keys:
`python benchmarks/external.py --parts headlines` recomputes them after a run of this script.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np
from common import (
    CHECKPOINTS,
    ROOT,
    RUNS_DIR,
    ResultsFile,
    add_parts,
    resume_records,
    task_preset,
)
from composition_parts.selector import add_selector_args, selector_versus
from composition_parts.verifier import add_verifier_args
from composition_parts.vertex import vertex_gap
from external import (
    APART,
    chosen_candidate,
    pair_search,
    pair_verifier,
    selector_key,
    store_learned,
)
from search_replay import best_convex

from robocompose.compare import compare
from robocompose.composition.api import candidate_label, compose
from robocompose.policies.checkpoint import load_policy
from robocompose.sim.collect import run_expert_episode
from robocompose.sim.tasks import make_env, make_expert
from robocompose.stats import success_rate

TASK = "GymPushT"
PARENTS = ("GymPushT_diffusion_mlp", "GymPushT_flow_mlp")
UNET_PARENTS = ("GymPushT_diffusion_unet_v", "GymPushT_flow_unet")
OUT = RUNS_DIR / "external" / TASK
RESULTS = ResultsFile("external.json", writer="external_pusht.py")
# the demos use seeds from 0 upwards; fresh and search seeds are disjoint from them and each other
SEARCH_SEED_START, FRESH_SEED_START = 100_000, 300_000
UNET = "GymPushT_flow_unet"
PAIRS = {"policies": PARENTS, "policies_unet": UNET_PARENTS}
# each pair's prefix on its episode files; the MLP pair's files kept their first names
FILE_TAGS = {"policies": "", "policies_unet": "unet_"}
SELECTOR_PARTS = {"selector": "policies", "selector_unet": "policies_unet"}
VERIFIER_PARTS = {"verifier": "policies", "verifier_unet": "policies_unet"}
PARTS = (
    "expert",
    "policies",
    "flow_unet",
    "policies_unet",
    "compare",
    "vertex_unet",
    "selector",
    "selector_unet",
    "verifier",
    "verifier_unet",
)


def search_folder(pair: str) -> Path:
    """Where a pair's search (episodes, chunk logs, search.json) goes."""
    return OUT / (f"search_{pair}" if FILE_TAGS[pair] else "search")


def _rate(successes: int, episodes: int) -> dict[str, Any]:
    rate = success_rate(successes, episodes)
    return {
        "rate": rate.rate,
        "ci95": [rate.ci_low, rate.ci_high],
        "n": episodes,
        "text": str(rate),
    }


def collection_attempts(dataset: Path) -> dict[str, Any]:
    """How many seeds the collection tried for its demos: it runs seeds upwards from 0 and keeps
    the successes, so the seeds missing below the highest kept one are the expert's failures."""
    with h5py.File(dataset, "r") as f:
        demos = [f["data"][k] for k in f["data"]]
        seeds = sorted(int(d.attrs["seed"]) for d in demos)
        steps = [int(d["actions"].shape[0]) for d in demos]
    attempted = seeds[-1] - seeds[0] + 1
    return {
        "demos": len(seeds),
        "seeds": [seeds[0], seeds[-1]],
        "success": _rate(len(seeds), attempted),
        "mean_steps": float(np.mean(steps)),
    }


def expert(fresh: list[int]) -> dict[str, Any]:
    env, mpc = make_env(TASK), make_expert(TASK)

    def run(seed: int) -> dict:
        start = time.perf_counter()
        episode = run_expert_episode(env, mpc, seed)
        return {
            "success": episode.success,
            "score": episode.score,
            "steps": len(episode.actions),
            "seconds": time.perf_counter() - start,
        }

    records = resume_records(OUT / "expert.jsonl", fresh, run, key_field="seed")
    seconds = sum(r["seconds"] for r in records)
    steps = sum(r["steps"] for r in records)
    return {
        "fresh_seeds": {"start": fresh[0], "episodes": len(fresh)},
        "success": _rate(sum(r["success"] for r in records), len(records)),
        "mean_coverage": float(np.mean([r["score"] for r in records])),
        "mean_steps": steps / len(records),
        "seconds_per_episode": seconds / len(records),
        "ms_per_step": 1e3 * seconds / steps,
        "collection": collection_attempts(ROOT / "data" / f"{TASK}.hdf5"),
    }


def policies(
    pair: tuple[str, str],
    fresh: list[int],
    search_seeds: list[int],
    step: float,
    first_slice: int,
    search_dir: Path,
    tag: str,
) -> dict[str, Any]:
    """`tag` prefixes the compositions' episode files in fresh/ (the pairs share that folder)."""
    parents = [load_policy(CHECKPOINTS / name) for name in pair]
    on_fresh = compare(*parents, fresh, out_dir=OUT / "fresh", labels=pair)
    print(on_fresh.table(), flush=True)
    found = pair_search(parents, search_seeds, search_dir, first_slice, step)
    print(found.table(), flush=True)
    trials = {
        "convex": ("convex", best_convex(found)),
        "product_of_experts": ("weighted_sum", (1.0, 1.0)),
    }
    composed: dict[str, Any] = {}
    for key, (operator, weights) in trials.items():
        label = tag + candidate_label(operator, weights)
        policy = compose(parents, operator, weights)
        row: dict[str, Any] = {"operator": operator, "weights": list(weights)}
        for parent, name in zip(parents, pair, strict=True):
            versus = compare(policy, parent, fresh, out_dir=OUT / "fresh", labels=(label, name))
            row |= versus.results[0].row()
            row[f"vs_{name}"] = versus.to_dict() | {"formatted": versus.paired.format()}
            print(f"{key} - {name}: {versus.paired.format()}", flush=True)
        composed[key] = row
    rows = {n: r.row() for n, r in zip(pair, on_fresh.results, strict=True)}
    better = max(pair, key=lambda n: (rows[n]["success"], rows[n]["mean_score"]))
    chosen = chosen_candidate(
        TASK, found, parents, list(pair), better, on_fresh, fresh, OUT / "fresh", tag
    )
    return {
        "parents": list(pair),
        "chosen_candidate": chosen,
        "never_worse": chosen["minus_better_parent"]["ci95"][1] >= 0,
        "fresh_seeds": {"start": fresh[0], "episodes": len(fresh)},
        "search_seeds": {"start": search_seeds[0], "episodes": len(search_seeds)},
        "fresh": {n: r.row() for n, r in zip(pair, on_fresh.results, strict=True)},
        "complementarity": on_fresh.to_dict(),
        "search": found.to_dict(),
        "composed": composed,
    }


def flow_unet(fresh: list[int]) -> dict[str, Any]:
    unet = load_policy(CHECKPOINTS / UNET)
    row: dict[str, Any] = {}
    for name in PARENTS:
        pair = compare(
            unet, load_policy(CHECKPOINTS / name), fresh, out_dir=OUT / "fresh", labels=(UNET, name)
        )
        row |= pair.results[0].row()
        row[f"vs_{name}"] = pair.to_dict() | {"formatted": pair.paired.format()}
        print(f"{UNET} - {name}: {pair.paired.format()}", flush=True)
    return row | {"fresh_seeds": {"start": fresh[0], "episodes": len(fresh)}}


DIFFERENCES = (
    "Both: a round pusher position-servoed to a target (PD), a T of the same proportions, "
    "success = exact polygon coverage of the goal T >= 0.95, 300 steps at 10 Hz.",
    "Dynamics: gym-pusht's block has no friction with the pusher and space damping 0, so it stops "
    "the instant the pusher leaves it (quasi-static pushing) and a short push moves it by a "
    "predictable amount; ours slides with viscous damping and a little Coulomb friction, so it "
    "coasts after a push.",
    "Starts: gym-pusht draws the block's origin in [100, 400]^2 px (+-150 px around the goal, "
    "1.25 bar lengths) at any angle and the pusher in [50, 450]^2, possibly on the block; ours "
    "draws the block centre within +-0.12 m (one bar length) of the goal at any yaw, the pusher "
    "clear of it, and redraws starts already covering half the goal.",
    "Observations: gym-pusht's 18 numbers (pusher xy + the T's 8 corner keypoints, in pixels) "
    "against ours 6 (pusher xy, block centre, cos/sin yaw, in metres).",
)


def _pusht_figures() -> dict[str, Any]:
    """Our MuJoCo PushT's figures as the other benchmarks stored them."""
    sim = ResultsFile("sim.json").read()["tasks"]["robocompose/PushT-v0"]
    shipped = ResultsFile("policies.json").read()["checkpoints"]
    quality = ResultsFile("composition.json").read()["quality"]["PushT"]
    fresh = quality["fresh"]
    return {
        "expert": {
            "success": _rate(
                round(sim["expert_success"] * sim["expert_episodes"]), sim["expert_episodes"]
            ),
            "mean_steps": sim["expert_mean_steps"],
            "seconds_per_episode": sim["expert_seconds_per_episode"],
        },
        "parents": {
            r["checkpoint"]: {
                k: r[k]
                for k in ("success", "ci_low", "ci_high", "episodes", "demos", "train_steps")
            }
            for r in shipped
            if r["task"] == "robocompose/PushT-v0"
        },
        "composition_fresh": {
            "pair": quality["pair"],
            "parents": fresh["parents"],
            "convex": fresh["composed"]["convex"]["success"],
            "product_of_experts": fresh["composed"]["product_of_experts"]["success"],
            "paired_vs_better_parent": {
                k: v["formatted"] for k, v in fresh["paired_vs_better_parent"].items()
            },
        },
    }


def compare_with_pusht() -> dict[str, Any]:
    ours = RESULTS.read().get(TASK, {})
    gym_pusht: dict[str, Any] = {}
    if "expert" in ours:
        gym_pusht["expert"] = ours["expert"]["success"]
        gym_pusht["demos"] = ours["expert"]["collection"]["demos"]
    for part in PAIRS:
        if part in ours:
            gym_pusht[part] = {
                "parents": ours[part]["fresh"],
                "composed": {
                    k: {"weights": v["weights"], "success": v["success"], "episodes": v["episodes"]}
                    for k, v in ours[part]["composed"].items()
                },
            }
    if "flow_unet" in ours:
        gym_pusht[UNET] = {k: ours["flow_unet"][k] for k in ("success", "ci_low", "ci_high")}
    return {"PushT": _pusht_figures(), "GymPushT": gym_pusht, "differences": list(DIFFERENCES)}


def _store(doc: dict[str, Any], part: str, value: dict[str, Any]) -> None:
    """A part's value under GymPushT, keeping what other parts stored in a pair's row."""
    row = doc.setdefault(TASK, {})
    row[part] = value | {k: v for k, v in row.get(part, {}).items() if k in APART}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    add_parts(parser, PARTS)
    parser.add_argument("--fresh", type=int, default=200, help="fresh seeds per policy")
    parser.add_argument("--search", type=int, default=100, help="search seeds")
    parser.add_argument("--step", type=float, default=0.25, help="convex weight grid step")
    parser.add_argument("--first-slice", type=int, default=10, help="halving's first round")
    add_selector_args(parser, episodes=False)  # it runs on the --fresh seeds
    add_verifier_args(parser)
    args = parser.parse_args()
    task_preset(TASK)
    fresh = list(range(FRESH_SEED_START, FRESH_SEED_START + args.fresh))
    search_seeds = list(range(SEARCH_SEED_START, SEARCH_SEED_START + args.search))
    for part in PARTS:
        if part not in args.parts:
            continue
        start = time.perf_counter()
        if part == "expert":
            value = expert(fresh)
        elif part in PAIRS:
            tag = FILE_TAGS[part]
            search_dir = search_folder(part)
            value = policies(
                PAIRS[part], fresh, search_seeds, args.step, args.first_slice, search_dir, tag
            )
        elif part == "flow_unet":
            value = flow_unet(fresh)
        elif part == "vertex_unet":
            parents = [load_policy(CHECKPOINTS / name) for name in UNET_PARENTS]
            gap = vertex_gap(
                parents, list(UNET_PARENTS), fresh, OUT / "fresh", tag=FILE_TAGS["policies_unet"]
            )
            RESULTS.set((TASK, "policies_unet", "vertex_gap"), gap)
            print(part, f"{time.perf_counter() - start:.0f} s", json.dumps(gap)[:2000], flush=True)
            continue
        elif part in SELECTOR_PARTS:
            pair = SELECTOR_PARTS[part]
            parents = [load_policy(CHECKPOINTS / name) for name in PAIRS[pair]]
            tag, names = FILE_TAGS[pair], list(PAIRS[pair])
            run = selector_versus(parents, names, fresh, OUT / "fresh", args.selector_score, tag)
            RESULTS.set(selector_key((TASK, pair), args.selector_score), run)
            print(part, f"{time.perf_counter() - start:.0f} s", json.dumps(run)[:2000], flush=True)
            continue
        elif part in VERIFIER_PARTS:
            pair = VERIFIER_PARTS[part]
            parents = [load_policy(CHECKPOINTS / name) for name in PAIRS[pair]]
            entry = pair_verifier(
                parents,
                list(PAIRS[pair]),
                search_folder(pair),
                search_seeds,
                fresh,
                OUT / "fresh",
                args,
                FILE_TAGS[pair],
            )
            RESULTS.update(
                lambda doc, pair=pair, entry=entry: store_learned(doc[TASK][pair], entry)
            )
            print(
                part, f"{time.perf_counter() - start:.0f} s", json.dumps(entry)[:2000], flush=True
            )
            continue
        else:
            value = compare_with_pusht()
        RESULTS.update(lambda doc, part=part, value=value: _store(doc, part, value))
        print(part, f"{time.perf_counter() - start:.0f} s", json.dumps(value)[:2000], flush=True)


if __name__ == "__main__":
    main()

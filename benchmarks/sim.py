"""Task-suite figures: expert success per task, and the harness's speed against raw MuJoCo.

For each task, in one run:
- expert_success: the scripted expert over `--expert-episodes` seeds (default 100), Wilson 95% CI.
- harness_steps_per_s: env steps per second of `robocompose.sim.rollout` driving a constant
  (mid-range) policy on vector envs, state observations.
- raw_steps_per_s: control steps per second of a bare Python loop of `mujoco.mj_step` on the same
  model with the same number of physics substeps per control step.
- ratio = harness / raw.

    python benchmarks/sim.py [--expert-episodes 100] [--tasks PushT,Stack]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import mujoco
import numpy as np
from common import ResultsFile

from robocompose.sim.collect import run_expert_episode
from robocompose.sim.rollout import run_episodes
from robocompose.sim.tasks import TASKS, get_task, make_env, make_expert
from robocompose.stats import success_rate

RESULTS = ResultsFile("sim.json", writer="sim.py")


def expert_success(task: str, episodes: int) -> dict:
    env, expert = make_env(task), make_expert(task)
    successes, lengths, start = 0, [], time.perf_counter()
    for seed in range(episodes):
        episode = run_expert_episode(env, expert, seed)
        successes += episode.success
        lengths.append(len(episode.actions))
    env.close()
    rate = success_rate(successes, episodes)
    return {
        "expert_success": rate.rate,
        "expert_ci_low": rate.ci_low,
        "expert_ci_high": rate.ci_high,
        "expert_episodes": episodes,
        "expert_mean_steps": float(np.mean(lengths)),
        "expert_seconds_per_episode": (time.perf_counter() - start) / episodes,
    }


def harness_speed(task: str, episodes: int, num_envs: int, vectorization: str) -> tuple[float, int]:
    env = make_env(task)
    mid = (env.action_space.low + env.action_space.high) / 2
    env.close()

    def constant_policy(obs: dict) -> np.ndarray:
        return np.repeat(mid[None], len(obs["state"]), axis=0)

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = run_episodes(
            get_task(task).env_id,
            constant_policy,
            range(episodes),
            out=Path(tmp) / "episodes.jsonl",
            num_envs=num_envs,
            vectorization=vectorization,
            stop_on_success=False,
            progress=False,
        )
        elapsed = time.perf_counter() - start
    steps = sum(r["length"] for r in result.records)
    return steps / elapsed, steps


def raw_speed(task: str, control_steps: int) -> float:
    env = make_env(task)
    env.reset(seed=0)
    task_env = env.unwrapped
    model, data, n_substeps = task_env.model, task_env.data, task_env.n_substeps
    start = time.perf_counter()
    for _ in range(control_steps):
        for _ in range(n_substeps):
            mujoco.mj_step(model, data)
    elapsed = time.perf_counter() - start
    env.close()
    return control_steps / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--expert-episodes", type=int, default=100, help="0: keep the stored expert figures"
    )
    parser.add_argument("--speed-episodes", type=int, default=16)
    parser.add_argument("--tasks", default=",".join(TASKS))
    args = parser.parse_args()

    previous_rows = RESULTS.read().get("tasks", {})
    for task in args.tasks.split(","):
        name = get_task(task).env_id
        previous = previous_rows.get(name, {})
        if args.expert_episodes == 0 and "expert_success" in previous:
            row = {k: v for k, v in previous.items() if k.startswith("expert_")}  # speed only
        else:
            row = expert_success(task, args.expert_episodes)
        speeds = {}
        for num_envs, vectorization in ((1, "sync"), (8, "sync"), (2, "async")):
            speeds[f"{vectorization}_{num_envs}"], steps = harness_speed(
                task, args.speed_episodes, num_envs, vectorization
            )
        best = max(speeds, key=speeds.get)
        raw = raw_speed(task, steps)
        row |= {
            "harness_steps_per_s": speeds[best],
            "harness_setting": best,
            "harness_steps_per_s_by_setting": speeds,
            "raw_steps_per_s": raw,
            "ratio": speeds[best] / raw,
            "ratio_single_env_sync": speeds["sync_1"] / raw,
            "physics_substeps": make_env(task).unwrapped.n_substeps,
        }
        print(name, json.dumps(row, indent=1), flush=True)
        RESULTS.set(["tasks", name], row)
        RESULTS.set(["machine"], {"cpus": os.cpu_count(), "python": platform.python_version()})


if __name__ == "__main__":
    main()

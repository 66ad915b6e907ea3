"""`robocompose experts`: every task's scripted expert on a few seeds, a markdown table
(success with its Wilson 95% interval, mean score, seconds) and one video per task.

Light to import (the command line reads `ExpertsConfig` for `--help`); `run` imports MuJoCo.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(kw_only=True)
class ExpertsConfig:
    """`robocompose experts`: every task's scripted expert, a table and one video each."""

    episodes: int = 5
    out: str = "runs/experts"


def run(config: ExpertsConfig) -> None:
    """Run each task's expert on seeds 0..episodes-1, film seed 0, print the table."""
    import imageio

    from robocompose.sim.collect import run_expert_episode
    from robocompose.sim.tasks import TASKS, make_env, make_expert
    from robocompose.stats import success_rate

    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in TASKS:
        env = make_env(name, render_mode="rgb_array")
        expert = make_expert(name)
        successes, scores, start = 0, [], time.perf_counter()
        for seed in range(config.episodes):
            episode = run_expert_episode(env, expert, seed, video=seed == 0)
            if seed == 0:
                video = out / f"{name}_expert_seed0.mp4"
                imageio.mimsave(video, episode.video, fps=env.metadata.get("render_fps", 10))
            successes += episode.success
            scores.append(episode.score)
        env.close()
        rate = success_rate(successes, config.episodes)
        rows.append(
            (name, str(rate), f"{statistics.fmean(scores):.3f}", time.perf_counter() - start)
        )
    print("| task | expert success [95% CI] | mean score | seconds |\n|---|---|---|---|")
    for name, rate, score, seconds in rows:
        print(f"| {name} | {rate} | {score} | {seconds:.1f} |")

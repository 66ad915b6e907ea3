"""Roll out a task's scripted expert and write its successful episodes as demonstrations.

With `skills=True` each step also records the skill the expert executes (`expert.skill`, see
`robocompose.sim.skill_labels`) as the demo's `skills` labels, and on the tabletop tasks the
argument positions as the obs key `skill_args`: the data of skill-conditioned policies.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from robocompose.interrupt import ResumableInterrupt
from robocompose.sim.episode import FORMATS
from robocompose.sim.hdf5_dataset import DemoWriter
from robocompose.sim.pick_place import TabletopEnv
from robocompose.sim.skill_labels import SkillLabel, skill_args
from robocompose.sim.tasks import get_task, make_env, make_expert
from robocompose.stats import SuccessRate, success_rate


@dataclass
class ExpertEpisode:
    seed: int
    success: bool
    score: float
    obs: dict[str, np.ndarray]  # key -> (T, ...)
    actions: np.ndarray  # (T, A)
    rewards: np.ndarray  # (T,)
    video: list[np.ndarray]  # rendered frames (T + 1), when asked for
    skills: list[SkillLabel] | None = None  # the expert's skill per step, when asked for


def _step_skill(env: Any, expert: Any, frames: dict[str, list[np.ndarray]]) -> SkillLabel:
    """The skill of the action `expert` just chose; on a tabletop its `skill_args` obs too."""
    label = getattr(expert, "skill", None)
    if not isinstance(label, SkillLabel):
        raise ValueError(f"{type(expert).__name__} exposes no `skill` label for this step.")
    if isinstance(env.unwrapped, TabletopEnv):
        frames.setdefault("skill_args", []).append(skill_args(env.unwrapped, label))
    return label


class WeakExpertError(RuntimeError):
    """An expert that succeeded too rarely to fill the demos within the attempts cap."""


def run_expert_episode(
    env: Any,
    expert: Any,
    seed: int,
    *,
    video: bool = False,
    skills: bool = False,
    stop_on_success: bool = False,
) -> ExpertEpisode:
    """One seeded episode of `expert` on `env` (a TimeLimit-wrapped suite env); `skills`
    records the expert's skill label per step; `stop_on_success` ends it at the first step
    that succeeds (as evaluation does), else it runs to the env's end."""
    obs, info = env.reset(seed=seed)
    expert.reset(env, np.random.default_rng(seed))
    frames: dict[str, list[np.ndarray]] = {k: [] for k in obs}
    rendered = [env.render()] if video else []
    actions, rewards, labels = [], [], []
    success, score = bool(info["success"]), float(info["score"])
    done = False
    while not done:
        action = expert.act(env)
        if skills:
            labels.append(_step_skill(env, expert, frames))
        for key, value in obs.items():
            frames[key].append(value)
        obs, reward, terminated, truncated, info = env.step(action)
        actions.append(action)
        rewards.append(reward)
        if video:
            rendered.append(env.render())
        success, score = success or bool(info["success"]), max(score, float(info["score"]))
        done = terminated or truncated or (stop_on_success and success)
    return ExpertEpisode(
        seed=seed,
        success=success,
        score=score,
        obs={k: np.stack(v) for k, v in frames.items()},
        actions=np.asarray(actions, dtype=np.float32),
        rewards=np.asarray(rewards, dtype=np.float32),
        video=rendered,
        skills=labels if skills else None,
    )


def _writer(
    format: str, out: str | os.PathLike[str], env_id: str, env_kwargs: dict, env: Any, task: str
) -> Any:
    """The demo writer of `format`, appending to `out` when it exists."""
    if format == "lerobot":  # pyarrow and PyAV, the `lerobot` extra
        from robocompose.sim.lerobot_dataset import LeRobotWriter

        fps = float(env.metadata.get("render_fps") or 10)
        return LeRobotWriter(out, env_id, env_kwargs, fps=fps, task=task, append=True)
    return DemoWriter(out, env_id, env_kwargs, append=True)


def collect(
    task: str,
    episodes: int,
    out: str | os.PathLike[str],
    *,
    obs_keys: tuple[str, ...] = ("state",),
    image_size: int | None = None,
    seed_start: int = 0,
    attempts_per_demo: int = 3,
    stop_on_success: bool = False,
    expert_config: dict[str, Any] | None = None,
    progress: bool = True,
    skills: bool = False,
    env_config: dict[str, Any] | None = None,
    format: str = "hdf5",
) -> SuccessRate:
    """Write `episodes` successful expert demos of `task` to `out` (robomimic hdf5 layout).

    Seeds run upwards from `seed_start`; each demo stores its seed. Rerunning with the same `out`
    appends until the file holds `episodes` demos, skipping seeds already in it, so an interrupted
    collection resumes. Missing parent folders of `out` are made. Returns the expert's success
    rate over the episodes attempted in this call; an expert that needs more than
    `attempts_per_demo` * `episodes` episodes raises `WeakExpertError`. `stop_on_success` ends
    each demo when the task first reports success. `image_size` (None: the env's default) is
    recorded in the file's env kwargs, so a policy trained on it is evaluated at that size.
    `skills` records per-step skill labels (and `skill_args` on the tabletop tasks).
    `env_config`: more env kwargs (e.g. Stack's `order`), recorded in the file too.
    `format`: "hdf5" (robomimic's layout) or "lerobot" (`out` is then a LeRobot v3.0 dataset
    folder, `robocompose.sim.lerobot_dataset`).
    """
    if episodes < 1:
        raise ValueError(f"`episodes` must be >= 1. Got {episodes}.")
    if format not in FORMATS:
        raise ValueError(f"`format` must be one of {FORMATS}. Got {format!r}.")
    if format == "lerobot" and Path(out).suffix:
        raise ValueError(
            f"format=lerobot writes a dataset folder; `out` {os.fspath(out)!r} names a file. "
            f"Pass a folder, e.g. --out {Path(out).with_suffix('')}_lerobot."
        )
    spec = get_task(task)
    env_kwargs: dict[str, Any] = {**(env_config or {}), "obs_keys": list(obs_keys)}
    if spec.external:  # the file then describes its env to any later reader
        env_kwargs["external"] = spec.external
    if image_size is not None:
        env_kwargs["image_size"] = int(image_size)
    env = make_env(spec.name, **(env_kwargs | {"obs_keys": tuple(obs_keys)}))
    expert = make_expert(spec.name, **(expert_config or {}))
    max_attempts = attempts_per_demo * episodes
    attempted = successes = 0
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with _writer(format, out, spec.env_id, env_kwargs, env, spec.name) as writer:
        done_seeds = {int(a["seed"]) for a in writer.demo_attrs if "seed" in a}
        bar = tqdm(
            total=episodes,
            initial=len(done_seeds),
            desc=f"collect {spec.name}",
            disable=not progress,
        )
        try:
            seed = seed_start
            while len(writer.demo_attrs) < episodes and attempted < max_attempts:
                if seed not in done_seeds:
                    episode = run_expert_episode(
                        env, expert, seed, skills=skills, stop_on_success=stop_on_success
                    )
                    attempted += 1
                    if episode.success:
                        successes += 1
                        writer.add_episode(
                            episode.obs,
                            episode.actions,
                            episode.rewards,
                            attrs={"seed": seed, "score": episode.score},
                            skills=[s.to_dict() for s in episode.skills or []] if skills else None,
                        )
                        bar.update()
                    bar.set_postfix(expert_success=f"{successes}/{attempted}")
                seed += 1
        except KeyboardInterrupt:
            bar.close()  # before the message, not after it when collected
            raise ResumableInterrupt(len(writer.demo_attrs), out, "demos") from None
        bar.close()
        if len(writer.demo_attrs) < episodes:
            raise WeakExpertError(
                f"{spec.name}: the expert succeeded in {success_rate(successes, attempted)}, "
                f"so {out} holds {len(writer.demo_attrs)} of {episodes} demos at the cap of "
                f"{attempts_per_demo} attempts per demo ({max_attempts} episodes); raise it "
                "with attempts_per_demo=N or make the expert succeed more often (a rerun "
                "appends)."
            )
    env.close()
    return success_rate(successes, attempted)

"""`robocompose eval CKPT`: one checkpoint on its own task (or on the env `task=` attaches);
episodes to `runs/eval/<name>.jsonl` (resumable), a summary, and videos of chosen seeds.

    from robocompose.verbs.eval import EvalConfig, run
    run(EvalConfig(checkpoint="PushT_flow_mlp", episodes=10))

Light to import (the command line reads `EvalConfig` for `--help`); `run` imports the rollout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robocompose.rollout_config import EpisodesConfig
from robocompose.sim.task_config import TaskConfig

if TYPE_CHECKING:
    from robocompose.records import EvalResult

# like runs/compose and runs/search: a run never writes into a checkpoint folder (shipped ones
# are the repository's)
EVAL_RUNS = "runs/eval"


@dataclass(kw_only=True)
class EvalConfig(EpisodesConfig):
    """`robocompose eval`: one checkpoint on its own task."""

    checkpoint: str
    # the env of a checkpoint whose own is not registered (trained on a file of another suite)
    task: TaskConfig | None = None
    steps: int | None = None  # denoising steps; None: the checkpoint's own
    # actions of each predicted chunk executed before replanning; None: as trained
    n_action_steps: int | None = None
    num_envs: int | None = None
    out: str | None = None  # episodes JSONL; None: runs/eval/<checkpoint name>.jsonl
    video_seeds: list[int] = field(default_factory=list)
    video_views: list[str] = field(default_factory=list)  # as ComposeConfig's
    # a root folder: every executed chunk goes to <chunk_log>/<checkpoint name>/ (training data
    # for `robocompose verifier`; robocompose.chunk_log); None: not logged
    chunk_log: str | None = None


def run(config: EvalConfig) -> EvalResult:
    """Evaluate, print the summary and where the episodes and videos went; errored episodes
    fail the verb (see `refuse_errors`)."""
    from robocompose.evaluation import evaluate

    name = Path(config.checkpoint).resolve().name
    episodes = Path(config.out or f"{EVAL_RUNS}/{name}.jsonl")
    # one folder per checkpoint: evaluations of other checkpoints into one --out keep theirs
    videos = episodes.parent / "videos" / name
    result = evaluate(
        _with_task(config.checkpoint, config.task),
        config.seeds(),
        label=name,
        out=episodes,
        steps=config.steps,
        n_action_steps=config.n_action_steps,
        num_envs=config.num_envs,
        device=config.device,
        batch_invariant=config.batch_invariant,
        video_seeds=config.video_seeds,
        video_dir=videos if config.video_seeds else None,
        video_views=config.video_views,
        chunk_log=chunk_folder(config.chunk_log, name),
    )
    print(result.summary())
    print_outputs(episodes, result.videos)
    refuse_errors(result, episodes)
    return result


def _with_task(checkpoint: str, task: TaskConfig | None) -> Any:
    """The checkpoint folder, or its policy on the env `task=` attaches (see `attached_env`)."""
    if task is None:
        return checkpoint
    from robocompose.policies.checkpoint import load_policy
    from robocompose.sim.tasks import attached_env

    policy = load_policy(checkpoint)
    recorded = policy.metadata.get("task"), policy.metadata.get("env_kwargs", {})
    env, kwargs = attached_env(*recorded, f"checkpoint {checkpoint}", task.name)
    policy.metadata |= {"task": env, "env_kwargs": kwargs}
    return policy


def chunk_folder(root: str | None, name: str) -> Path | None:
    """Where eval/compose log a policy's chunks: one folder per policy under the root, so one
    root holds every policy a verifier learns from."""
    return Path(root) / name if root is not None else None


def print_outputs(episodes: Path, videos: list[Path]) -> None:
    """Where eval/compose put their results, so nobody has to guess the default folders; each
    video as written (`seed_N-2.mp4` when `seed_N.mp4` was already there)."""
    print(f"episodes: {episodes}")
    for video in videos:
        print(f"video: {video}")


def refuse_errors(result: EvalResult, episodes: Path) -> None:
    """Episodes that errored (a NaN action, an env that raised) fail the verb: a success rate
    over them says nothing, and only the records said why."""
    first = next((r for r in result.records if r["error"] is not None), None)
    if first is not None:
        raise ValueError(
            f"{result.errors} of {result.episodes} episodes errored; the first (seed "
            f"{first['seed']}): {first['error']}. Records: {episodes}."
        )

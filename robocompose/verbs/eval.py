"""`robocompose eval CKPT`: one checkpoint on its own task (or on the env `task=` attaches);
episodes to `runs/eval/<name>.jsonl` (resumable), a summary, and videos of chosen seeds. With
`launcher=ray` the episodes run as Ray tasks (`robocompose.launch.episodes`), into the same file.

    from robocompose.verbs.eval import EvalConfig, run
    run(EvalConfig(checkpoint="PushT_flow_mlp", episodes=10))

Light to import (the command line reads `EvalConfig` for `--help`); `run` imports the rollout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from robocompose.launch.config import LauncherConfig
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
    # who runs the episodes: local (this process) or ray (Ray tasks of
    # launcher.episodes_per_task seeds; launcher.address joins a cluster)
    launcher: LauncherConfig = field(default_factory=LauncherConfig)


def run(config: EvalConfig) -> EvalResult:
    """Evaluate, print the summary and where the episodes and videos went; errored episodes
    fail the verb (see `refuse_errors`)."""
    from robocompose.launch.episodes import CheckpointRecipe, Run, evaluate_runs

    name = Path(config.checkpoint).resolve().name
    episodes = Path(config.out or f"{EVAL_RUNS}/{name}.jsonl")
    # one folder per checkpoint: evaluations of other checkpoints into one --out keep theirs
    videos = episodes.parent / "videos" / name
    attach = config.task.name if config.task is not None else None
    evaluation = Run(
        CheckpointRecipe(config.checkpoint, attach),
        config.seeds(),
        out=episodes,
        label=name,
        chunk_log=chunk_folder(config.chunk_log, name),
    )
    [result] = evaluate_runs(
        [evaluation],
        config.launcher,
        steps=config.steps,
        n_action_steps=config.n_action_steps,
        num_envs=config.num_envs,
        device=config.device,
        batch_invariant=config.batch_invariant,
        video_seeds=config.video_seeds,
        video_dir=videos if config.video_seeds else None,
        video_views=config.video_views,
    )
    print(result.summary())
    print_outputs(episodes, result.videos)
    refuse_errors(result, episodes)
    return result


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

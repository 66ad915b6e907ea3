"""`robocompose compose [CKPT ...]`: one composition of a task's parents (default: its shipped
pair), episodes to `out/<label>.jsonl` (resumable), a summary, the parents' inference times.

Light to import (the command line reads `ComposeConfig` for `--help`); `run` imports the rollout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from robocompose.rollout_config import RolloutConfig
from robocompose.verbs.eval import chunk_folder, print_outputs, refuse_errors

if TYPE_CHECKING:
    from robocompose.records import EvalResult


@dataclass(kw_only=True)
class ComposeConfig(RolloutConfig):
    """`robocompose compose`: one composition, episodes to `out/<label>.jsonl` (resumable)."""

    out: str = "runs/compose"
    video_seeds: list[int] = field(default_factory=list)
    # image observation keys and cameras the videos show side by side; []: the env's view
    video_views: list[str] = field(default_factory=list)
    # a root folder: every executed chunk goes to <chunk_log>/<label>/ (training data for
    # `robocompose verifier`; robocompose.chunk_log); None: not logged
    chunk_log: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.composition.check_parent_count(len(self.parents) or 2)  # none: the shipped pair


def run(config: ComposeConfig) -> EvalResult:
    """Evaluate the composition and print its summary, its parents' times and its outputs."""
    from robocompose.evaluation import evaluate

    label = config.label()
    episodes, videos = Path(config.out) / f"{label}.jsonl", Path(config.out) / "videos" / label
    policy = config.policy()
    result = evaluate(
        policy,
        config.seeds(),
        steps=config.composition.steps,
        label=label,
        out=episodes,
        num_envs=config.num_envs,
        device=config.device,
        batch_invariant=config.batch_invariant,
        video_seeds=config.video_seeds,
        video_dir=videos,
        video_views=config.video_views,
        chunk_log=chunk_folder(config.chunk_log, label),
    )
    print(result.summary())
    times = getattr(policy, "times", None)  # a parameter merge is one policy: no parents run
    if times is not None:
        print(times.summary())
    print_outputs(episodes, result.videos)
    refuse_errors(result, episodes)
    return result

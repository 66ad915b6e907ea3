"""`robocompose train`: train a policy on a demo file (`robocompose.policies.train`), evaluating
it as it trains when `eval_every` asks (`robocompose.evaluation.training_success`, handed in:
training sits below evaluation); prints where the checkpoint and curves go.

Light to import (the command line reads `TrainConfig` from `policies/train_config.py`); `run`
imports torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from robocompose.policies.train_config import TrainConfig


def run(config: TrainConfig) -> Path:
    """Say where the checkpoint and curves go, train (resuming what `out` holds), print the
    checkpoint and the best one by eval success."""
    from robocompose.evaluation import training_success
    from robocompose.policies.checkpoint import read_checkpoint_config
    from robocompose.policies.train import train
    from robocompose.policies.train_monitor import BEST

    print(
        f"training into {config.out} (checkpoint and train_state, saved as it goes); curves: "
        f"{config.events_dir}/, view with `robocompose report {config.out}` or "
        f"`tensorboard --logdir {config.events_dir}`",
        flush=True,
    )
    checkpoint = train(config, evaluator=training_success)
    print(f"checkpoint: {checkpoint}")
    if (checkpoint / BEST).is_dir():
        best = read_checkpoint_config(checkpoint / BEST)["metadata"]["best"]
        rate = f"{100 * best['success']:.1f}% of {best['episodes']} episodes"
        print(f"best by eval success: {checkpoint / BEST} (step {best['step']}, {rate})")
    return checkpoint

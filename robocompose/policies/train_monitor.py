"""What both training loops (torch and JAX) do around their steps: the stop on a non-finite
loss, the TensorBoard curves, the EMA weights' success on the task, the checkpoints as it goes
and the last save on Ctrl-C (`TrainingProgress`).

Scalars, every `log_every` steps and at the last step:
    train/loss        mean training loss over the steps since the previous point
    train/grad_norm   mean total L2 norm of the gradients (before clipping and the update)
    train/lr          learning rate of the step
    train/steps_per_s training speed (data + update; checkpoints and evaluation excluded)
and every `eval_every` steps: eval/success, eval/success_ci_low, eval/success_ci_high (Wilson
95%) over `eval_episodes` episodes of the EMA weights. The checkpoint of the best of those
evaluations (the earliest of equals) is kept in `<out>/best/` beside the last in `<out>/`, its
metadata's `best` saying at which step and with which success.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from robocompose.interrupt import ResumableInterrupt, interrupt_deferred
from robocompose.policies.base import GenerativePolicy, build_policy
from robocompose.policies.checkpoint import CONFIG, WEIGHTS, read_checkpoint_config, write_atomic
from robocompose.policies.train_config import TrainConfig
from robocompose.stats import SuccessRate

EVAL_SEED_START = 100_000  # the evaluation seeds every verb uses, disjoint from the demos'
# (policy, seeds, device) -> its success: the rollout, which sits in the layer above training
# (`robocompose.evaluation.training_success`), handed in by whoever trains with `eval_every`
Evaluator = Callable[[GenerativePolicy, range, str], SuccessRate]
BEST = "best"  # <out>/best/: the checkpoint whose evaluation scored highest


class TrainingDiverged(ValueError):
    """A non-finite loss or gradient: training stops before the step is applied, so the last
    checkpoint on disk stays the last good one."""

    def __init__(self, step: int, loss: float, grad_norm: float, out: Path, saved: int) -> None:
        kept = f"{out} keeps step {saved}'s checkpoint" if saved else "nothing was saved"
        super().__init__(
            f"step {step}: the loss is {loss:.4g} and the gradient norm {grad_norm:.4g}; "
            f"training stopped before applying it ({kept}). Lower `lr`, set `grad_clip`, or "
            "look for outliers in the dataset."
        )


def check_finite(
    step: int, loss: float, grad_norm: float, out: Path, saved: int, *, overflow_skips: bool = False
) -> None:
    """Stop on a non-finite loss or gradient norm, before step `step` is applied (both training
    loops call this). `overflow_skips`: fp16 loss scaling, which itself skips the steps whose
    gradients overflow, so an infinite norm there is no divergence."""
    if not math.isfinite(loss) or not (math.isfinite(grad_norm) or overflow_skips):
        raise TrainingDiverged(step, loss, grad_norm, out, saved)


class TrainingCurves:
    """TensorBoard scalars: per-step figures averaged over each `log_every` interval.

    The writer purges whatever an earlier session logged after `first_step` (written after the
    last checkpoint, then lost with the kill), so a resumed curve neither repeats nor forks.
    """

    def __init__(self, events_dir: Path, first_step: int, log_every: int) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(os.fspath(events_dir), purge_step=first_step + 1)
        self.log_every = log_every
        self._losses: list[float] = []
        self._norms: list[float] = []
        self._seconds = 0.0

    def add_step(self, loss: float, grad_norm: float, seconds: float) -> None:
        self._losses.append(loss)
        if math.isfinite(grad_norm):  # fp16 loss scaling skips steps whose gradients overflow
            self._norms.append(grad_norm)
        self._seconds += seconds

    def write(self, step: int, lr: float) -> None:
        if not self._losses:
            return
        self.writer.add_scalar("train/loss", float(np.mean(self._losses)), step)
        if self._norms:
            self.writer.add_scalar("train/grad_norm", float(np.mean(self._norms)), step)
        self.writer.add_scalar("train/lr", lr, step)
        self.writer.add_scalar("train/steps_per_s", len(self._losses) / self._seconds, step)
        self.writer.flush()
        self._losses, self._norms, self._seconds = [], [], 0.0

    def write_eval(self, step: int, rate: SuccessRate) -> None:
        self.writer.add_scalar("eval/success", rate.rate, step)
        self.writer.add_scalar("eval/success_ci_low", rate.ci_low, step)
        self.writer.add_scalar("eval/success_ci_high", rate.ci_high, step)
        self.writer.add_scalar("eval/episodes", rate.episodes, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def best_success(out: Path) -> float:
    """The success of the checkpoint kept in `out`/best (-1: none yet), so a resumed run keeps
    a better one only."""
    if not (out / BEST / CONFIG).is_file():
        return -1.0
    return float(read_checkpoint_config(out / BEST)["metadata"]["best"]["success"])


def keep_best(out: Path, step: int, rate: SuccessRate) -> None:
    """Copy the checkpoint just saved in `out` to `out`/best, recording the evaluation."""
    best = out / BEST
    best.mkdir(exist_ok=True)
    write_atomic(best / WEIGHTS, lambda p: shutil.copyfile(out / WEIGHTS, p))
    document = json.loads((out / CONFIG).read_text())
    document["metadata"]["best"] = {"step": step, "success": rate.rate, "episodes": rate.episodes}
    write_atomic(best / CONFIG, lambda p: p.write_text(json.dumps(document, indent=2) + "\n"))


def evaluate_ema(
    policy: GenerativePolicy,
    ema: dict[str, torch.Tensor],
    metadata: dict[str, Any],
    episodes: int,
    device: torch.device,
    evaluator: Evaluator,
) -> SuccessRate:
    """Success of a copy holding the EMA weights on the dataset's task, seeds 100000 on.

    The RNG states are forked, so a run that evaluates trains the very weights of one that
    does not.
    """
    forked = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=forked):
        evaluated = build_policy(policy.config, policy.normalizers)
        evaluated.load_state_dict(ema)
        evaluated.metadata = metadata
        seeds = range(EVAL_SEED_START, EVAL_SEED_START + episodes)
        return evaluator(evaluated.eval(), seeds, str(device))


class TrainingProgress:
    """The bookkeeping both loops share around a step: the smoothed loss, the curves and the
    progress bar, the EMA weights' evaluation every `eval_every` steps, a checkpoint every
    `checkpoint_every` steps and at the last one, and on Ctrl-C one last save before
    `ResumableInterrupt` (the loop defers Ctrl-C to between steps, where the state is whole).

        with TrainingProgress(config, step, minutes, stop_at_step, show, save, evaluate) as run:
            while run.step < run.last:
                with interrupt_deferred():
                    ...  # one update; check_finite(run.step + 1, ..., run.out, run.saved)
                    run.step += 1
                run.after_step(loss, grad_norm, lr, seconds)
    """

    def __init__(
        self,
        config: TrainConfig,
        step: int,
        minutes: float,
        stop_at_step: int | None,
        show: bool,
        save: Callable[[TrainingProgress], None],
        evaluate: Callable[[], SuccessRate],
    ) -> None:
        self.config, self.out = config, Path(config.out)
        self.step = step
        self.saved = step  # the step whose checkpoint and training state are on disk (0: none)
        self.last = config.steps if stop_at_step is None else min(stop_at_step, config.steps)
        self.smoothed: float | None = None
        self._save, self._evaluate, self._show = save, evaluate, show
        self.curves = TrainingCurves(config.events_dir, step, config.log_every)
        self.bar = tqdm(
            total=config.steps, initial=step, desc=f"train {self.out.name}", disable=not show
        )
        self._minutes, self._start = minutes, time.perf_counter()
        self.best = best_success(self.out)

    def minutes(self) -> float:
        """Training minutes over every session of the run."""
        return self._minutes + (time.perf_counter() - self._start) / 60

    def save(self) -> None:
        self._save(self)
        self.saved = self.step

    def after_step(self, loss: float, grad_norm: float, lr: float, seconds: float) -> None:
        config, step = self.config, self.step
        self.smoothed = loss if self.smoothed is None else 0.98 * self.smoothed + 0.02 * loss
        self.curves.add_step(loss, grad_norm, seconds)
        if step % config.log_every == 0 or step == config.steps:
            self.curves.write(step, lr)
        self.bar.update()
        self.bar.set_postfix(loss=f"{self.smoothed:.4f}")
        if config.eval_every and step % config.eval_every == 0:
            self.after_eval(self._evaluate())
        due = step % config.checkpoint_every == 0 or step in (config.steps, self.last)
        if due and self.saved != step:
            self.save()

    def after_eval(self, rate: SuccessRate) -> None:
        """Curve it, say it, and keep the checkpoint if no evaluation before did better."""
        self.curves.write_eval(self.step, rate)
        better = rate.rate > self.best
        if self._show:
            kept = f"; the best so far, kept in {self.out / BEST}" if better else ""
            self.bar.write(f"step {self.step}: eval success {rate}{kept}")
        if better:
            self.save()
            keep_best(self.out, self.step, rate)
            self.best = rate.rate

    def __enter__(self) -> TrainingProgress:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if isinstance(error, KeyboardInterrupt) and self.step > self.saved:
                with interrupt_deferred():  # a second Ctrl-C must not cut the save short
                    self.save()
        finally:
            self.bar.close()
            self.curves.close()
        if isinstance(error, KeyboardInterrupt):
            raise ResumableInterrupt(self.step, self.out, unit="steps") from None

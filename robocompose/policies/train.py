"""Train a policy on a robomimic-layout hdf5 file: seeded, resumable, checkpointed as it goes.

The run folder holds the inference checkpoint (`model.safetensors` = EMA weights, `config.json`),
the training state (`train_state.safetensors` + `train_state.json`: raw weights, EMA, AdamW
moments, RNG states, step) and TensorBoard curves in `tensorboard/`. Rerunning the same command
resumes from the last saved step; the curves continue from it.

Scalars, every `log_every` steps and at the last step:
    train/loss        mean training loss over the steps since the previous point
    train/grad_norm   mean total L2 norm of the gradients (before clipping and the update)
    train/lr          learning rate of the step
    train/steps_per_s training speed (data + update; checkpoints and evaluation excluded)
and every `eval_every` steps: eval/success, eval/success_ci_low, eval/success_ci_high (Wilson
95%) over `eval_episodes` episodes of the EMA weights.
"""

from __future__ import annotations

import functools
import json
import math
import os
import time
import warnings
from contextlib import AbstractContextManager
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from tqdm import tqdm

from robocompose.devices import resolve_device
from robocompose.evaluation import torch_threads_set
from robocompose.interrupt import ResumableInterrupt, interrupt_deferred
from robocompose.policies.base import GenerativePolicy, build_policy, is_image_shape
from robocompose.policies.checkpoint import (
    read_checkpoint_config,
    save_policy,
    write_atomic,
)
from robocompose.policies.config import PolicyConfig
from robocompose.policies.normalizer import AffineNormalizer
from robocompose.policies.registry import get_family
from robocompose.policies.train_config import TrainConfig
from robocompose.sim.episode import Episode
from robocompose.sim.hdf5_dataset import load_demos, read_env_args, read_skill_vocabulary
from robocompose.sim.tasks import attached_env, is_registered, missing_env_error
from robocompose.sim.windows import SequenceWindows, action_stats, obs_stats, skill_segments
from robocompose.stats import SuccessRate

__all__ = ["STATE_JSON", "STATE_TENSORS", "TrainConfig", "learning_rate", "prepare", "train"]

STATE_TENSORS, STATE_JSON = "train_state.safetensors", "train_state.json"
EVAL_SEED_START = 100_000  # the evaluation seeds every verb uses, disjoint from the demos'
# fields a resumed run may change: none of them changes the weights it trains
RESUMABLE_CHANGES = (
    "steps",
    "checkpoint_every",
    "torch_threads",
    "out",
    "device",
    "amp",
    "log_every",
    "eval_every",
    "eval_episodes",
)


def action_normalizer(config: TrainConfig, episodes: list, action_dim: int) -> AffineNormalizer:
    """Fitted to the whole dataset, or taken from `action_normalizer_from`'s checkpoint."""
    if config.action_normalizer_from is None:
        return AffineNormalizer.from_stats(action_stats(episodes))
    source = config.action_normalizer_from
    try:
        stored = read_checkpoint_config(source)["normalizers"]["action"]
    except KeyError:
        raise ValueError(
            f"`action_normalizer_from`: {source} holds no action normaliser."
        ) from None
    normalizer = AffineNormalizer.from_dict(stored)
    if normalizer.scale.shape != (action_dim,):
        raise ValueError(
            f"`action_normalizer_from`: {source} normalises {normalizer.scale.shape[0]}-dim "
            f"actions, {config.dataset} holds {action_dim}-dim ones."
        )
    return normalizer


def _episodes(config: TrainConfig) -> list[Episode]:
    """Every demo of `dataset` and `extra_datasets`; with `skill_windows`, their skill segments
    with the skill's conditioning attached."""
    paths = [config.dataset, *config.extra_datasets]
    read = functools.partial(load_demos, skip_nonfinite=config.skip_nonfinite_demos)
    if not config.skill_windows:
        return [e for path in paths for e in read(path, config.policy.obs_keys)]
    from robocompose.sim.skill_labels import LANGUAGE_KEYS, conditioning

    keys = [k for k in config.policy.obs_keys if k not in LANGUAGE_KEYS]
    attach = conditioning([k for k in config.policy.obs_keys if k in LANGUAGE_KEYS])
    segments = []
    for path in paths:
        vocabulary = read_skill_vocabulary(path)
        if not vocabulary:
            raise ValueError(f"`skill_windows`: {path} has no skill labels; collect skills=true.")
        segments += skill_segments(read(path, keys), vocabulary, attach)
    return segments


def prepare(config: TrainConfig) -> tuple[GenerativePolicy, SequenceWindows, dict[str, Any]]:
    """Read the dataset, fit normalisers, build the policy; returns (policy, windows, metadata)."""
    all_episodes = _episodes(config)
    stop = None if config.max_demos is None else config.demo_offset + config.max_demos
    episodes = all_episodes[config.demo_offset : stop]
    if not episodes:
        raise ValueError(
            f"no demos selected from {config.dataset} (demo_offset={config.demo_offset}, "
            f"max_demos={config.max_demos})."
        )
    first = episodes[0]
    policy_config = PolicyConfig.from_dict(
        config.policy.to_dict()
        | {
            "action_dim": int(first.actions.shape[1]),
            "obs_shapes": {k: list(first.obs[k].shape[1:]) for k in config.policy.obs_keys},
        }
    )
    low_dim = [k for k in policy_config.obs_keys if not is_image_shape(policy_config.obs_shapes[k])]
    # Normalisers come from the whole file, not the subset trained on: policies trained on
    # different subsets of one dataset then share one action space and compose directly.
    normalizers = {"action": action_normalizer(config, all_episodes, policy_config.action_dim)}
    for key, stats in obs_stats(all_episodes, low_dim).items():
        normalizers[key] = AffineNormalizer.from_stats(stats)
    torch.manual_seed(config.seed)
    policy = build_policy(policy_config, normalizers)
    windows = SequenceWindows(
        episodes,
        policy_config.obs_keys,
        policy_config.n_obs_steps,
        policy_config.horizon,
        policy_config.n_action_steps,
    )
    env_args = read_env_args(config.dataset)
    env_name, env_kwargs = attached_env(
        env_args.get("env_name"),
        env_args.get("env_kwargs", {}),
        os.fspath(config.dataset),
        config.task.name if config.task else None,
    )
    if env_name and not is_registered(env_name):
        warnings.warn(str(missing_env_error(env_name, os.fspath(config.dataset))), stacklevel=2)
    metadata = {
        "task": env_name,
        "env_kwargs": env_kwargs,
        "dataset": os.fspath(config.dataset),
        "demos": [e.name for e in episodes],
        "train": config.to_dict(),
    }
    return policy, windows, metadata


def learning_rate(config: TrainConfig, step: int) -> float:
    """Linear warmup then cosine decay to zero, as Diffusion Policy trains."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return config.lr * 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))


def train(config: TrainConfig, progress: bool = True, stop_at_step: int | None = None) -> Path:
    """Train (or resume) and return the run folder holding the latest checkpoint.

    `stop_at_step` ends the session early with everything saved, exactly as an interruption
    right after that step's checkpoint would; running again resumes to `config.steps`.
    A family with its own training loop (see `register_family`'s `trainer`) runs that one.
    """
    trainer = get_family(config.policy.family).training_loop() or _train
    with torch_threads_set(config.torch_threads):
        return trainer(config, progress, stop_at_step)


def _train(config: TrainConfig, progress: bool, stop_at_step: int | None) -> Path:
    out = Path(config.out)
    _refuse_fewer_steps(out, config.steps)
    device = resolve_device(config.device)
    precision = MixedPrecision(config.amp, device)
    policy, windows, metadata = prepare(config)
    if config.eval_every and not metadata["task"]:
        raise ValueError(
            f"`eval_every`={config.eval_every}: {config.dataset} names no task (env_args has no "
            "env_name), so there is no env to evaluate on. Set eval_every=0."
        )
    policy.to(device)
    params = list(policy.parameters())
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    ema = {k: v.detach().clone() for k, v in policy.state_dict().items()}
    sampler = torch.Generator().manual_seed(config.seed)
    step, minutes = 0, 0.0
    if (out / STATE_JSON).exists():
        step, minutes = _load_state(out, config, policy, optimizer, ema, sampler, precision)
    curves = TrainingCurves(config.events_dir, step, config.log_every)
    bar = tqdm(total=config.steps, initial=step, desc=f"train {out.name}", disable=not progress)
    start, smoothed = time.perf_counter(), None
    policy.train()
    last = config.steps if stop_at_step is None else min(stop_at_step, config.steps)
    saved = step  # the step whose checkpoint and training state are on disk (0: none)

    def save() -> None:
        nonlocal saved
        elapsed = minutes + (time.perf_counter() - start) / 60
        meta = metadata | {"step": step, "train_minutes": elapsed, "loss": smoothed}
        dtype = getattr(torch, config.checkpoint_dtype)
        save_policy(policy, out, meta, state_dict=ema, dtype=dtype)
        _save_state(out, config, policy, optimizer, ema, sampler, precision, step, elapsed)
        saved = step

    try:
        while step < last:
            with interrupt_deferred():  # Ctrl-C lands between steps, where the state is whole
                began = time.perf_counter()
                index = torch.randint(len(windows), (config.batch_size,), generator=sampler)
                batch = windows.batch(index.numpy())
                obs = {
                    k: torch.from_numpy(np.asarray(v)).to(device) for k, v in batch["obs"].items()
                }
                actions = torch.from_numpy(batch["actions"]).to(device)
                lr = learning_rate(config, step)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                with precision.autocast():
                    loss = policy.loss(obs, actions)
                optimizer.zero_grad(set_to_none=True)
                grad_norm = precision.backward(loss, optimizer, params, config.grad_clip)
                value, norm = loss.item(), grad_norm.item()
                # fp16 loss scaling skips the steps whose gradients overflow: not a divergence
                if not math.isfinite(value) or not (math.isfinite(norm) or precision.scaler):
                    raise TrainingDiverged(step + 1, value, norm, out, saved)
                precision.step(optimizer)
                step += 1
                _update_ema(ema, policy, config.ema_decay, step)
            smoothed = value if smoothed is None else 0.98 * smoothed + 0.02 * value
            curves.add_step(value, norm, time.perf_counter() - began)
            if step % config.log_every == 0 or step == config.steps:
                curves.write(step, lr)
            bar.update()
            bar.set_postfix(loss=f"{smoothed:.4f}")
            if config.eval_every and step % config.eval_every == 0:
                rate = evaluate_ema(policy, ema, metadata, config.eval_episodes, device)
                curves.write_eval(step, rate)
                if progress:
                    bar.write(f"step {step}: eval success {rate}")
            if step % config.checkpoint_every == 0 or step in (config.steps, last):
                save()
    except KeyboardInterrupt:
        if step > saved:
            with interrupt_deferred():  # a second Ctrl-C must not cut the save short
                save()
        raise ResumableInterrupt(step, out, unit="steps") from None
    finally:
        bar.close()
        curves.close()
    return out


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


class MixedPrecision:
    """Autocast and, for fp16, loss scaling: `amp` = off, bf16 (any device) or fp16 (CUDA).

    bf16 keeps float32's exponent range, so it needs no loss scaling; fp16 does (GradScaler).
    The weights, the optimizer and the EMA stay float32 whatever `amp` is.
    """

    def __init__(self, amp: str, device: torch.device) -> None:
        if amp == "fp16" and device.type != "cuda":
            raise ValueError(
                f"`amp`='fp16' needs a CUDA device (loss scaling); this run is on {device}. "
                "Use amp=bf16 or amp=off."
            )
        self.device_type = device.type
        self.dtype = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}[amp]
        self.scaler = torch.amp.GradScaler(device.type) if amp == "fp16" else None

    def autocast(self) -> AbstractContextManager:
        return torch.autocast(self.device_type, dtype=self.dtype, enabled=self.dtype is not None)

    def backward(
        self,
        loss: torch.Tensor,
        optimizer: torch.optim.Optimizer,
        params: list[torch.nn.Parameter],
        grad_clip: float | None,
    ) -> torch.Tensor:
        """Backward and clip; returns the total gradient norm before clipping. The caller
        looks at it before `step` applies the gradients."""
        max_norm = grad_clip if grad_clip is not None else math.inf
        if self.scaler is None:
            loss.backward()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(optimizer)
        return torch.nn.utils.clip_grad_norm_(params, max_norm)

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        if self.scaler is None:
            optimizer.step()
            return
        self.scaler.step(optimizer)  # skipped when the scaled gradients overflowed
        self.scaler.update()

    def state_tensors(self) -> dict[str, torch.Tensor]:
        if self.scaler is None:
            return {}
        state = self.scaler.state_dict()
        return {
            "amp.scale": torch.tensor(state["scale"]),
            "amp.growth_tracker": torch.tensor(state["_growth_tracker"]),
        }

    def load_state_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        if self.scaler is None or "amp.scale" not in tensors:
            return
        state = self.scaler.state_dict()
        state["scale"] = float(tensors["amp.scale"])
        state["_growth_tracker"] = int(tensors["amp.growth_tracker"])
        self.scaler.load_state_dict(state)


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


def evaluate_ema(
    policy: GenerativePolicy,
    ema: dict[str, torch.Tensor],
    metadata: dict[str, Any],
    episodes: int,
    device: torch.device,
) -> SuccessRate:
    """Success of a copy holding the EMA weights on the dataset's task, seeds 100000 on.

    The RNG states are forked, so a run that evaluates trains the very weights of one that
    does not.
    """
    from robocompose.evaluation import evaluate

    forked = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=forked):
        evaluated = build_policy(policy.config, policy.normalizers)
        evaluated.load_state_dict(ema)
        evaluated.metadata = metadata
        seeds = range(EVAL_SEED_START, EVAL_SEED_START + episodes)
        result = evaluate(
            evaluated.eval(), seeds, label="train_eval", device=str(device), progress=False
        )
    return result.success


def _refuse_fewer_steps(out: Path, steps: int) -> None:
    """A run already past `steps` would return its later checkpoint as if trained to `steps`."""
    if not (out / STATE_JSON).exists():
        return
    done = int(_read_state_document(out)["step"])
    if done > steps:
        raise ValueError(
            f"{out} is already trained to step {done}, past the asked `steps`={steps}: nothing "
            f"to train. Ask for more than {done} steps to continue it, or use another `out` "
            f"folder to train {steps} steps afresh."
        )


def _update_ema(
    ema: dict[str, torch.Tensor], policy: GenerativePolicy, decay: float, step: int
) -> None:
    """EMA with warmup: the decay grows from 0 toward `decay` over the first steps."""
    d = min(decay, (1 + step) / (10 + step))
    with torch.no_grad():
        for k, v in policy.state_dict().items():
            if v.dtype.is_floating_point:
                ema[k].mul_(d).add_(v, alpha=1 - d)
            else:
                ema[k].copy_(v)


def _save_state(
    out: Path,
    config: TrainConfig,
    policy: GenerativePolicy,
    optimizer: torch.optim.Optimizer,
    ema: dict[str, torch.Tensor],
    sampler: torch.Generator,
    precision: MixedPrecision,
    step: int,
    minutes: float,
) -> None:
    """Always written from CPU tensors, so a run resumes on whatever device is there."""
    tensors = {f"model.{k}": v for k, v in policy.state_dict().items()}
    tensors |= {f"ema.{k}": v for k, v in ema.items()}
    for index, state in optimizer.state_dict()["state"].items():
        tensors |= {f"optim.{index}.{k}": torch.as_tensor(v) for k, v in state.items()}
    tensors |= precision.state_tensors()
    tensors["rng.torch"] = torch.get_rng_state()
    tensors["rng.sampler"] = sampler.get_state()
    if precision.device_type == "cuda":
        tensors["rng.cuda"] = torch.cuda.get_rng_state()
    tensors = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    write_atomic(out / STATE_TENSORS, lambda p: save_file(tensors, str(p)))
    document = {"step": step, "train_minutes": minutes, "config": config.to_dict()}
    write_atomic(out / STATE_JSON, lambda p: p.write_text(json.dumps(document, indent=2) + "\n"))


def _load_state(
    out: Path,
    config: TrainConfig,
    policy: GenerativePolicy,
    optimizer: torch.optim.Optimizer,
    ema: dict[str, torch.Tensor],
    sampler: torch.Generator,
    precision: MixedPrecision,
) -> tuple[int, float]:
    document = _read_state_document(out)
    check_resumable(out, config, document)
    tensors = _read_state_tensors(out, int(document["step"]))
    policy.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
    for k in ema:
        ema[k].copy_(tensors[f"ema.{k}"])
    state = optimizer.state_dict()
    for key, value in tensors.items():
        if key.startswith("optim."):
            _, index, name = key.split(".", 2)
            state["state"].setdefault(int(index), {})[name] = value
    optimizer.load_state_dict(state)  # moves the moments onto the parameters' device
    precision.load_state_tensors(tensors)
    torch.set_rng_state(tensors["rng.torch"])
    sampler.set_state(tensors["rng.sampler"])
    if precision.device_type == "cuda" and "rng.cuda" in tensors:
        torch.cuda.set_rng_state(tensors["rng.cuda"])
    return int(document["step"]), float(document["train_minutes"])


def check_resumable(out: Path, config: TrainConfig, document: dict[str, Any]) -> None:
    """Refuse to resume the run saved in `document` (its train_state.json) under `config`
    when a field that changes the weights differs, naming each."""
    saved = document["config"]
    now = config.to_dict()
    # as its family's config: a run may predate the family split, or name its family only
    for tree in (saved, now):
        tree["policy"] = PolicyConfig.from_dict(tree["policy"]).to_dict()
    # a field added since the run started takes its default: that is what the run trained with
    defaults = {f.name: f.default for f in fields(TrainConfig)}
    changed = [
        k for k in now if k not in RESUMABLE_CHANGES and saved.get(k, defaults.get(k)) != now[k]
    ]
    if changed:
        raise ValueError(
            f"{out} holds a run with a different config; cannot resume. Differing fields: "
            + ", ".join(f"`{k}`: {saved.get(k, defaults.get(k))!r} vs {now[k]!r}" for k in changed)
            + ". Use another `out` folder."
        )


def _damaged(path: Path, out: Path, what: str) -> ValueError:
    return ValueError(
        f"{path}: {what}; the training state is truncated or corrupt, so the run cannot resume. "
        f"Delete {out / STATE_TENSORS} and {out / STATE_JSON} to train this run again from step "
        f"0 (its model.safetensors is overwritten at the first checkpoint: copy it first to keep "
        f"it), or pass another `out` folder."
    )


def _read_state_document(out: Path) -> dict[str, Any]:
    path = out / STATE_JSON
    try:
        document = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise _damaged(path, out, f"not valid JSON ({e})") from None
    missing = [k for k in ("step", "train_minutes", "config") if k not in document]
    if missing:
        raise _damaged(path, out, f"missing {missing}")
    return document


def _read_state_tensors(out: Path, step: int) -> dict[str, torch.Tensor]:
    """On the CPU whatever device saved them; the caller copies them where they belong."""
    path = out / STATE_TENSORS
    if not path.is_file():
        raise _damaged(path, out, f"missing, though {STATE_JSON} says step {step}")
    try:
        return load_file(str(path), device="cpu")
    except SafetensorError as e:
        raise _damaged(path, out, f"not a readable safetensors file ({e})") from None

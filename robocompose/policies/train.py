"""Train a policy on a demo file (robomimic hdf5 or a LeRobot folder): seeded, resumable,
checkpointed as it goes (the `train` verb is `robocompose.verbs.train`).

The run folder holds the inference checkpoint (`model.safetensors` = EMA weights, `config.json`),
the training state (`train_state.py`) and TensorBoard curves in `tensorboard/`
(`train_monitor.py` lists the scalars). Rerunning the same command resumes from the last saved
step; the curves continue from it. A family with its own loop (the JAX flow policy:
`jax_train.py`) shares `prepare`, the schedule, the state files and the monitoring.
"""

from __future__ import annotations

import functools
import math
import os
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robocompose.devices import resolve_device, torch_threads_set
from robocompose.interrupt import interrupt_deferred
from robocompose.policies.base import GenerativePolicy, build_policy, is_image_shape
from robocompose.policies.checkpoint import read_checkpoint_config, save_policy
from robocompose.policies.config import PolicyConfig
from robocompose.policies.mixed_precision import MixedPrecision
from robocompose.policies.normalizer import AffineNormalizer
from robocompose.policies.registry import get_family
from robocompose.policies.train_config import TrainConfig
from robocompose.policies.train_monitor import (
    Evaluator,
    TrainingProgress,
    check_finite,
    evaluate_ema,
)
from robocompose.policies.train_state import (
    STATE_JSON,
    check_resumable,
    read_state_document,
    read_state_tensors,
    refuse_fewer_steps,
    write_state,
)
from robocompose.sim.episode import Episode
from robocompose.sim.hdf5_dataset import load_demos, read_env_args, read_skill_vocabulary
from robocompose.sim.tasks import attached_env, is_registered, missing_env_error
from robocompose.sim.windows import SequenceWindows, action_stats, obs_stats, skill_segments
from robocompose.stats import SuccessRate

__all__ = ["TrainConfig", "learning_rate", "prepare", "train"]


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


def train(
    config: TrainConfig,
    progress: bool = True,
    stop_at_step: int | None = None,
    evaluator: Evaluator | None = None,
) -> Path:
    """Train (or resume) and return the run folder holding the latest checkpoint.

    `stop_at_step` ends the session early with everything saved, exactly as an interruption
    right after that step's checkpoint would; running again resumes to `config.steps`.
    `evaluator` runs the evaluation every `eval_every` steps (training cannot import the
    rollout, which sits above it: `robocompose.evaluation.training_success`).
    A family with its own training loop (see `register_family`'s `trainer`) runs that one.
    """
    if config.eval_every and evaluator is None:
        raise ValueError(
            f"`eval_every`={config.eval_every} needs an evaluator: pass "
            "evaluator=robocompose.evaluation.training_success (the train verb does), or set "
            "eval_every=0."
        )
    trainer = get_family(config.policy.family).training_loop() or _train
    with torch_threads_set(config.torch_threads):
        return trainer(config, progress, stop_at_step, evaluator)


def _train(
    config: TrainConfig, progress: bool, stop_at_step: int | None, evaluator: Evaluator | None
) -> Path:
    out = Path(config.out)
    refuse_fewer_steps(out, config.steps)
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

    def save(run: TrainingProgress) -> None:
        elapsed = run.minutes()
        meta = metadata | {"step": run.step, "train_minutes": elapsed, "loss": run.smoothed}
        dtype = getattr(torch, config.checkpoint_dtype)
        save_policy(policy, out, meta, state_dict=ema, dtype=dtype)
        _save_state(out, config, policy, optimizer, ema, sampler, precision, run.step, elapsed)

    def evaluate() -> SuccessRate:
        return evaluate_ema(policy, ema, metadata, config.eval_episodes, device, evaluator)

    policy.train()
    with TrainingProgress(config, step, minutes, stop_at_step, progress, save, evaluate) as run:
        while run.step < run.last:
            with interrupt_deferred():  # Ctrl-C lands between steps, where the state is whole
                began = time.perf_counter()
                index = torch.randint(len(windows), (config.batch_size,), generator=sampler)
                batch = windows.batch(index.numpy())
                obs = {
                    k: torch.from_numpy(np.asarray(v)).to(device) for k, v in batch["obs"].items()
                }
                actions = torch.from_numpy(batch["actions"]).to(device)
                lr = learning_rate(config, run.step)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                with precision.autocast():
                    loss = policy.loss(obs, actions)
                optimizer.zero_grad(set_to_none=True)
                grad_norm = precision.backward(loss, optimizer, params, config.grad_clip)
                value, norm = loss.item(), grad_norm.item()
                scaled = precision.scaler is not None
                check_finite(run.step + 1, value, norm, out, run.saved, overflow_skips=scaled)
                precision.step(optimizer)
                run.step += 1
                _update_ema(ema, policy, config.ema_decay, run.step)
            run.after_step(value, norm, lr, time.perf_counter() - began)
    return out


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
    write_state(out, config, tensors, step, minutes)


def _load_state(
    out: Path,
    config: TrainConfig,
    policy: GenerativePolicy,
    optimizer: torch.optim.Optimizer,
    ema: dict[str, torch.Tensor],
    sampler: torch.Generator,
    precision: MixedPrecision,
) -> tuple[int, float]:
    document = read_state_document(out)
    check_resumable(out, config, document)
    tensors = read_state_tensors(out, int(document["step"]))
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

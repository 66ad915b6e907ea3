"""Train a policy on a robomimic-layout hdf5 file: seeded, resumable, checkpointed as it goes.

The run folder holds the inference checkpoint (`model.safetensors` = EMA weights, `config.json`)
and the training state (`train_state.safetensors` + `train_state.json`: raw weights, EMA, AdamW
moments, RNG states, step). Rerunning the same command resumes from the last saved step.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from tqdm import tqdm

from robocompose.devices import check_device
from robocompose.policies.base import GenerativePolicy, is_image_shape
from robocompose.policies.checkpoint import build_policy, save_policy, write_atomic
from robocompose.policies.config import PolicyConfig
from robocompose.policies.normalizer import AffineNormalizer
from robocompose.sim.dataset import (
    SequenceWindows,
    action_stats,
    load_demos,
    obs_stats,
    read_env_args,
)

STATE_TENSORS, STATE_JSON = "train_state.safetensors", "train_state.json"


@dataclass
class TrainConfig:
    dataset: str
    out: str
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    steps: int = 10_000
    batch_size: int = 256
    lr: float = 3e-4
    weight_decay: float = 1e-6
    warmup_steps: int = 500
    ema_decay: float = 0.999
    checkpoint_every: int = 1000
    seed: int = 0
    demo_offset: int = 0  # train on demos [demo_offset, demo_offset + max_demos)
    max_demos: int | None = None
    torch_threads: int | None = None
    # the inference checkpoint's weight dtype: float16 halves what the repo ships
    checkpoint_dtype: str = "float32"
    device: str = "auto"  # auto (CUDA if present), cpu, cuda, cuda:N or mps

    def __post_init__(self) -> None:
        check_device(self.device)
        for name in ("steps", "batch_size", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"`{name}` must be >= 1. Got {getattr(self, name)}.")
        if not 0.0 <= self.ema_decay < 1.0:
            raise ValueError(f"`ema_decay` must be in [0, 1). Got {self.ema_decay}.")
        if self.checkpoint_dtype not in ("float32", "float16", "bfloat16"):
            raise ValueError(
                "`checkpoint_dtype` must be float32, float16 or bfloat16. "
                f"Got {self.checkpoint_dtype!r}."
            )
        if self.max_demos is not None and self.max_demos < 1:
            raise ValueError(f"`max_demos` must be >= 1 or None. Got {self.max_demos}.")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["policy"] = self.policy.to_dict()
        return d


def prepare(config: TrainConfig) -> tuple[GenerativePolicy, SequenceWindows, dict[str, Any]]:
    """Read the dataset, fit normalisers, build the policy; returns (policy, windows, metadata)."""
    all_episodes = load_demos(config.dataset, config.policy.obs_keys)
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
    normalizers = {"action": AffineNormalizer.from_stats(action_stats(all_episodes))}
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
    metadata = {
        "task": env_args.get("env_name"),
        "env_kwargs": env_args.get("env_kwargs", {}),
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
    """
    if config.torch_threads:
        torch.set_num_threads(config.torch_threads)
    out = Path(config.out)
    _refuse_fewer_steps(out, config.steps)
    policy, windows, metadata = prepare(config)
    params = dict(policy.named_parameters())
    optimizer = torch.optim.AdamW(params.values(), lr=config.lr, weight_decay=config.weight_decay)
    ema = {k: v.detach().clone() for k, v in policy.state_dict().items()}
    sampler = torch.Generator().manual_seed(config.seed)
    step, minutes = 0, 0.0
    if (out / STATE_JSON).exists():
        step, minutes = _load_state(out, config, policy, optimizer, ema, sampler)
    bar = tqdm(total=config.steps, initial=step, desc=f"train {out.name}", disable=not progress)
    start, smoothed = time.perf_counter(), None
    policy.train()
    last = config.steps if stop_at_step is None else min(stop_at_step, config.steps)
    while step < last:
        index = torch.randint(len(windows), (config.batch_size,), generator=sampler)
        batch = windows.batch(index.numpy())
        obs = {k: torch.from_numpy(np.asarray(v)) for k, v in batch["obs"].items()}
        loss = policy.loss(obs, torch.from_numpy(batch["actions"]))
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(config, step)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        step += 1
        _update_ema(ema, policy, config.ema_decay, step)
        smoothed = loss.item() if smoothed is None else 0.98 * smoothed + 0.02 * loss.item()
        bar.update()
        bar.set_postfix(loss=f"{smoothed:.4f}")
        if step % config.checkpoint_every == 0 or step in (config.steps, last):
            elapsed = minutes + (time.perf_counter() - start) / 60
            meta = metadata | {"step": step, "train_minutes": elapsed, "loss": smoothed}
            dtype = getattr(torch, config.checkpoint_dtype)
            save_policy(policy, out, meta, state_dict=ema, dtype=dtype)
            _save_state(out, config, policy, optimizer, ema, sampler, step, elapsed)
    bar.close()
    return out


def _refuse_fewer_steps(out: Path, steps: int) -> None:
    """A run already past `steps` would return its later checkpoint as if trained to `steps`."""
    if not (out / STATE_JSON).exists():
        return
    done = int(json.loads((out / STATE_JSON).read_text())["step"])
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
    step: int,
    minutes: float,
) -> None:
    tensors = {f"model.{k}": v.contiguous() for k, v in policy.state_dict().items()}
    tensors |= {f"ema.{k}": v.contiguous() for k, v in ema.items()}
    for index, state in optimizer.state_dict()["state"].items():
        tensors |= {f"optim.{index}.{k}": torch.as_tensor(v) for k, v in state.items()}
    tensors["rng.torch"] = torch.get_rng_state()
    tensors["rng.sampler"] = sampler.get_state()
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
) -> tuple[int, float]:
    document = json.loads((out / STATE_JSON).read_text())
    saved = document["config"]
    now = config.to_dict()
    free = ("steps", "checkpoint_every", "torch_threads", "out", "device")  # may change
    changed = [k for k in now if k not in free and saved.get(k) != now[k]]
    if changed:
        raise ValueError(
            f"{out} holds a run with a different config; cannot resume. Differing fields: "
            + ", ".join(f"`{k}`: {saved.get(k)!r} vs {now[k]!r}" for k in changed)
            + ". Use another `out` folder."
        )
    tensors = load_file(str(out / STATE_TENSORS))
    policy.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
    for k in ema:
        ema[k].copy_(tensors[f"ema.{k}"])
    state = optimizer.state_dict()
    for key, value in tensors.items():
        if key.startswith("optim."):
            _, index, name = key.split(".", 2)
            state["state"].setdefault(int(index), {})[name] = value
    optimizer.load_state_dict(state)
    torch.set_rng_state(tensors["rng.torch"])
    sampler.set_state(tensors["rng.sampler"])
    return int(document["step"]), float(document["train_minutes"])

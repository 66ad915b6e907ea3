"""A training run's state on disk, beside its checkpoint, and the checks on resuming it.

    train_state.safetensors  raw weights (model.*), EMA (ema.*), optimiser moments (optim.*),
                             RNG states (rng.*); the torch loop adds fp16 loss scaling (amp.*)
    train_state.json         {"step", "train_minutes", "config"}

Both training loops (`train.py`, `jax_train.py`) write the same two files through
`write_state` and resume through `read_state_document` / `read_state_tensors`; a resume that
would not train the same weights is refused (`check_resumable`).
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from robocompose.policies.checkpoint import write_atomic
from robocompose.policies.config import PolicyConfig
from robocompose.policies.train_config import TrainConfig

STATE_TENSORS, STATE_JSON = "train_state.safetensors", "train_state.json"
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


def write_state(
    out: Path, config: TrainConfig, tensors: dict[str, torch.Tensor], step: int, minutes: float
) -> None:
    """Both files, each replaced whole (a kill leaves the previous one)."""
    write_atomic(out / STATE_TENSORS, lambda p: save_file(tensors, str(p)))
    document = {"step": step, "train_minutes": minutes, "config": config.to_dict()}
    write_atomic(out / STATE_JSON, lambda p: p.write_text(json.dumps(document, indent=2) + "\n"))


def refuse_fewer_steps(out: Path, steps: int) -> None:
    """A run already past `steps` would return its later checkpoint as if trained to `steps`."""
    if not (out / STATE_JSON).exists():
        return
    done = int(read_state_document(out)["step"])
    if done > steps:
        raise ValueError(
            f"{out} is already trained to step {done}, past the asked `steps`={steps}: nothing "
            f"to train. Ask for more than {done} steps to continue it, or use another `out` "
            f"folder to train {steps} steps afresh."
        )


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


def read_state_document(out: Path) -> dict[str, Any]:
    path = out / STATE_JSON
    try:
        document = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise _damaged(path, out, f"not valid JSON ({e})") from None
    missing = [k for k in ("step", "train_minutes", "config") if k not in document]
    if missing:
        raise _damaged(path, out, f"missing {missing}")
    return document


def read_state_tensors(out: Path, step: int) -> dict[str, torch.Tensor]:
    """On the CPU whatever device saved them; the caller copies them where they belong."""
    path = out / STATE_TENSORS
    if not path.is_file():
        raise _damaged(path, out, f"missing, though {STATE_JSON} says step {step}")
    try:
        return load_file(str(path), device="cpu")
    except SafetensorError as e:
        raise _damaged(path, out, f"not a readable safetensors file ({e})") from None

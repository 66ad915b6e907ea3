"""Checkpoints: a folder with `model.safetensors` (weights) and `config.json` (everything else).

No pickle anywhere. config.json holds the policy config (the fields of its family's config
class), the normalisers and free-form metadata (task, dataset, training steps and minutes).
Training state for resuming lives beside it in `train_state.safetensors` and `train_state.json`.
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from robocompose.policies.base import GenerativePolicy, build_policy
from robocompose.policies.config import CONFIG, WEIGHTS, PolicyConfig
from robocompose.policies.normalizer import AffineNormalizer
from robocompose.shipped import CHECKPOINTS, checkpoint_folder, make_target, shipped_name
from robocompose.sim.tasks import register_recorded


class CheckpointError(ValueError):
    """A checkpoint folder that is missing, malformed, or does not fit the asked config."""


def save_policy(
    policy: GenerativePolicy,
    folder: str | os.PathLike[str],
    metadata: dict[str, Any] | None = None,
    state_dict: dict[str, torch.Tensor] | None = None,
    dtype: torch.dtype | None = None,
) -> Path:
    """Write `policy` (or `state_dict`, e.g. EMA weights, into its architecture) to `folder`.

    `dtype` (e.g. torch.float16) stores floating-point weights smaller; loading casts back.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    weights = {
        k: v.detach().to(dtype if dtype and v.is_floating_point() else v.dtype).contiguous().cpu()
        for k, v in (state_dict or policy.state_dict()).items()
    }
    write_atomic(folder / WEIGHTS, lambda p: save_file(weights, str(p)))
    document = {
        "policy": policy.config.to_dict(),
        "normalizers": {k: n.to_dict() for k, n in policy.normalizers.items()},
        "metadata": metadata or {},
    }
    write_atomic(folder / CONFIG, lambda p: p.write_text(json.dumps(document, indent=2) + "\n"))
    return folder


def read_checkpoint_config(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """config.json as a dict; a checkpoint of an external task makes its task known. `folder`
    may name a shipped checkpoint (`Stack_flow_mlp`)."""
    path = checkpoint_folder(folder) / CONFIG
    if not path.is_file():
        meant = shipped_name(folder)
        hint = f" The shipped one is named `{meant}` (from any folder)." if meant else ""
        raise CheckpointError(f"{folder}: not a checkpoint folder (no {CONFIG}).{hint}")
    try:
        document = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path}: not valid JSON ({e}).") from e
    if isinstance(document, dict) and "type" in document and "policy" not in document:
        from robocompose.policies.lerobot import checkpoint_document  # a LeRobot policy folder

        document = checkpoint_document(folder)
    for key in ("policy", "normalizers"):
        if key not in document:
            raise CheckpointError(f"{path}: missing field `{key}`.")
    metadata = document.get("metadata", {})
    register_recorded(metadata.get("task"), metadata.get("env_kwargs"))
    return document


def load_policy(
    folder: str | os.PathLike[str], expected: PolicyConfig | None = None
) -> GenerativePolicy:
    """Load a checkpoint; with `expected`, every config field must match (errors name them).
    The policy remembers its folder (`checkpoint_dir`) so messages and records can name it.
    `folder` may name a shipped checkpoint (`Stack_flow_mlp`)."""
    folder = checkpoint_folder(folder)
    document = read_checkpoint_config(folder)
    if document.get("metadata", {}).get("format") == "lerobot":
        from robocompose.policies.lerobot import load_lerobot_policy

        policy = load_lerobot_policy(folder)
    else:
        policy = _own_policy(folder, document, expected)
    policy.checkpoint_dir = Path(folder)
    return policy


@functools.lru_cache(maxsize=16)
def load_parent(path: str) -> GenerativePolicy:
    """One load per checkpoint per process: a sweep's cells, a search's candidates and a Ray
    worker's tasks share it (so it must not be changed in place)."""
    return load_policy(path)


def _own_policy(
    folder: str | os.PathLike[str], document: dict[str, Any], expected: PolicyConfig | None
) -> GenerativePolicy:
    """A checkpoint of this project's own families: config, normalisers, weights."""
    try:
        config = PolicyConfig.from_dict(document["policy"])
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{folder}/{CONFIG}: bad `policy` config: {e}") from e
    if expected is not None:
        diff = config.mismatches(expected)
        if diff:
            raise CheckpointError(
                f"{folder}: checkpoint does not match the config (checkpoint vs config): "
                + "; ".join(diff)
            )
    normalizers = {k: AffineNormalizer.from_dict(v) for k, v in document["normalizers"].items()}
    policy = build_policy(config, normalizers)
    weights_path = Path(folder) / WEIGHTS
    if not weights_path.is_file():
        raise CheckpointError(f"{folder}: missing {WEIGHTS}.")
    weights = load_weights(weights_path, document.get("metadata", {}).get("task"))
    own = policy.state_dict()
    missing, unexpected = sorted(set(own) - set(weights)), sorted(set(weights) - set(own))
    if missing or unexpected:
        raise CheckpointError(
            f"{weights_path}: weights do not fit the config: missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}."
        )
    for name, tensor in weights.items():
        if tensor.shape != own[name].shape:
            raise CheckpointError(
                f"{weights_path}: `{name}` has shape {tuple(tensor.shape)}, the config builds "
                f"{tuple(own[name].shape)}."
            )
    policy.load_state_dict({k: v.to(own[k].dtype) for k, v in weights.items()})
    policy.metadata = document.get("metadata", {})
    return policy.eval()


def load_weights(path: Path, task: str | None = None) -> dict[str, torch.Tensor]:
    """Read a safetensors file; a truncated or empty one is named with how to get it back."""
    try:
        return load_file(str(path))
    except SafetensorError as e:
        if path.resolve().parent.parent == CHECKPOINTS:
            target = make_target(path.parent.name)
        else:
            match = re.fullmatch(r"robocompose/(\w+)-v\d+", task or "")
            target = f"train-{match.group(1)}" if match else "train-<task>"
        raise CheckpointError(
            f"{path}: not a readable safetensors file ({e}); it is truncated or corrupt. "
            f"Retrain it (`make {target}`) or download it again (for a shipped checkpoint: "
            f"`git checkout -- {path}`)."
        ) from None


def write_atomic(path: Path, write) -> None:
    """Write to a temporary file then rename, so a kill never leaves half a checkpoint (and
    a write that fails, no temporary file either).

    The file gets the mode a plain `open` would give (0666 less the umask): some writers
    (safetensors) create theirs private, which hides checkpoints from other users.
    """
    tmp = path.with_name(path.name + ".tmp")
    try:
        write(tmp)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.chmod(0o666 & ~_umask())
    os.replace(tmp, path)


def _umask() -> int:
    """The process umask (reading it means setting it, so it is set straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask

"""Checkpoint files: a damaged weights file is named with how to get it back, and saved files
get the usual permissions."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import torch

from robocompose.policies.checkpoint import CheckpointError, load_policy, save_policy
from robocompose.shipped import CHECKPOINTS

SHIPPED = CHECKPOINTS / "Stack_flow_mlp"


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    """A real checkpoint written by `save_policy` (a copy of a shipped one)."""
    policy = load_policy(SHIPPED)
    return save_policy(policy, tmp_path / "Stack_flow_mlp", policy.metadata)


@pytest.mark.parametrize("keep_bytes", [0, 20, "half"])
def test_damaged_weights_name_the_file_and_the_fix(saved: Path, keep_bytes) -> None:
    weights = saved / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2 if keep_bytes == "half" else keep_bytes])
    with pytest.raises(CheckpointError) as error:
        load_policy(saved)
    message = str(error.value)
    assert str(weights) in message
    assert "truncated or corrupt" in message
    assert "make train-Stack" in message


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o027, 0o640)])
def test_saved_files_respect_the_umask(saved: Path, tmp_path: Path, umask: int, mode: int) -> None:
    previous = os.umask(umask)
    try:
        folder = save_policy(load_policy(saved), tmp_path / "again")
    finally:
        os.umask(previous)
    for name in ("model.safetensors", "config.json"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == mode, name
    reloaded = load_policy(folder)
    for name, tensor in load_policy(saved).state_dict().items():
        torch.testing.assert_close(reloaded.state_dict()[name], tensor)


def test_a_shipped_checkpoint_is_named_by_its_name_from_any_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_policy("Stack_flow_mlp").checkpoint_dir == SHIPPED
    with pytest.raises(CheckpointError, match="The shipped one is named `Stack_flow_mlp`"):
        load_policy("checkpoints/Stack_flow_mlp")  # the folder's place before it moved


def test_a_folder_in_the_current_directory_wins_over_a_shipped_name(
    saved: Path, tmp_path, monkeypatch
) -> None:
    assert saved == tmp_path / "Stack_flow_mlp"
    monkeypatch.chdir(tmp_path)
    assert load_policy("Stack_flow_mlp").checkpoint_dir == Path("Stack_flow_mlp")  # not SHIPPED

"""Sweep fixtures: two PickPlace flow MLPs of one architecture and normaliser (the shipped one
and a perturbed copy), fast enough for a few dozen episodes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from robocompose.policies.checkpoint import load_policy, save_policy
from robocompose.shipped import shipped_path


@pytest.fixture(scope="session")
def flow_parents(tmp_path_factory) -> list[Path]:
    shipped = shipped_path("PickPlace", "flow_mlp")
    policy = load_policy(shipped)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.02 * p.abs().mean() * torch.randn(p.shape, generator=generator))
    copy = save_policy(policy, tmp_path_factory.mktemp("parents") / "b", policy.metadata)
    return [shipped, copy]

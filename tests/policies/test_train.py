"""Training refusals on a real tiny run: asking an existing run for fewer steps than it has."""

from __future__ import annotations

import json

import pytest

from robocompose.cli import main
from robocompose.policies.config import PolicyConfig
from robocompose.policies.train import STATE_JSON, TrainConfig, train
from robocompose.sim.collect import collect


def test_fewer_steps_than_done_says_so_and_trains_nothing(tmp_path) -> None:
    dataset = tmp_path / "pusht.hdf5"
    collect("PushT", 1, dataset, progress=False)
    out = tmp_path / "run"
    policy = PolicyConfig(family="flow", backbone="mlp")
    config = TrainConfig(
        dataset=str(dataset), out=str(out), policy=policy, steps=3, batch_size=4, warmup_steps=1
    )
    train(config, progress=False)
    weights = (out / "model.safetensors").read_bytes()

    with pytest.raises(ValueError, match=r"already trained to step 3, past the asked `steps`=2"):
        train(TrainConfig(**{**vars(config), "steps": 2}), progress=False)
    args = [f"dataset={dataset}", f"out={out}", "policy=flow_mlp", "steps=1", "batch_size=4"]
    with pytest.raises(SystemExit, match=r"robocompose train: error: .*step 3.*`steps`=1"):
        main(["train", *args, "warmup_steps=1"])
    assert json.loads((out / STATE_JSON).read_text())["step"] == 3
    assert (out / "model.safetensors").read_bytes() == weights

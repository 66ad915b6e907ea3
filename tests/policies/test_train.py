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


def test_action_normalizer_from_another_checkpoint_gives_its_action_space(tmp_path) -> None:
    """Two files of one task fit different action ranges; borrowing the first policy's
    normaliser lets the second compose with it without `allow_normalizer_mismatch`."""
    from robocompose.composition.api import compose
    from robocompose.policies.checkpoint import load_policy

    first, second = tmp_path / "a.hdf5", tmp_path / "b.hdf5"
    collect("PushT", 1, first, progress=False)
    collect("PushT", 1, second, seed_start=7, progress=False)
    policy = PolicyConfig(family="flow", backbone="mlp")
    small = dict(policy=policy, steps=2, batch_size=4, warmup_steps=1)
    train(TrainConfig(dataset=str(first), out=str(tmp_path / "A"), **small), progress=False)
    own = TrainConfig(dataset=str(second), out=str(tmp_path / "own"), **small)
    train(own, progress=False)
    borrowed = TrainConfig(
        dataset=str(second),
        out=str(tmp_path / "B"),
        action_normalizer_from=str(tmp_path / "A"),
        **small,
    )
    train(borrowed, progress=False)
    a, b = load_policy(tmp_path / "A"), load_policy(tmp_path / "B")
    assert b.normalizers["action"].to_dict() == a.normalizers["action"].to_dict()
    with pytest.raises(ValueError, match="normaliser"):
        compose([a, load_policy(tmp_path / "own")], "convex", (0.5, 0.5))
    compose([a, b], "convex", (0.5, 0.5))

    missing = {"action_normalizer_from": str(tmp_path / "no_such_run"), "out": str(tmp_path / "C")}
    with pytest.raises(Exception, match=r"no_such_run"):
        train(TrainConfig(**(vars(borrowed) | missing)), progress=False)

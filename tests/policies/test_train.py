"""Training refusals on a real tiny run: asking an existing run for fewer steps than it has."""

from __future__ import annotations

import json
import math

import pytest

from robocompose.cli import main
from robocompose.policies.config import PolicyConfig
from robocompose.policies.train import TrainConfig, train
from robocompose.policies.train_monitor import TrainingDiverged, check_finite
from robocompose.policies.train_state import STATE_JSON
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


def test_a_nan_in_the_dataset_is_refused_before_training(tmp_path) -> None:
    """One NaN in one action used to train a checkpoint of NaNs and exit 0."""
    h5py = pytest.importorskip("h5py")
    dataset = tmp_path / "pusht.hdf5"
    collect("PushT", 1, dataset, progress=False)
    with h5py.File(dataset, "a") as f:
        f["data/demo_0/actions"][7, 1] = float("nan")
    out = tmp_path / "run"
    args = [f"dataset={dataset}", f"out={out}", "policy=flow_mlp", "steps=2", "batch_size=4"]
    with pytest.raises(
        SystemExit,
        match=r"robocompose train: error: `actions` holds nan at index \(7, 1\) \(1 non-finite\) "
        r"\(demo_0 in .*pusht.hdf5\)",
    ):
        main(["train", *args, "warmup_steps=1"])
    assert not (out / "model.safetensors").exists()


@pytest.mark.parametrize("family", ["flow", "flow_jax"])
def test_a_diverging_run_stops_and_keeps_the_last_good_checkpoint(tmp_path, family) -> None:
    """A learning rate of 1e30 makes step 2's loss NaN: training stops there, and step 1's
    checkpoint (finite) is what stays on disk; the torch loop and the JAX one alike."""
    if family == "flow_jax":
        pytest.importorskip("jax")
    from safetensors.torch import load_file

    dataset = tmp_path / "pusht.hdf5"
    collect("PushT", 1, dataset, progress=False)
    policy = PolicyConfig.from_dict({"family": family, "backbone": "mlp"})
    config = TrainConfig(
        dataset=str(dataset),
        out=str(tmp_path / "run"),
        policy=policy,
        steps=6,
        batch_size=4,
        warmup_steps=1,
        lr=1e30,
        checkpoint_every=1,
    )
    with pytest.raises(
        TrainingDiverged, match=r"step 2: the loss is nan .*run keeps step 1's checkpoint"
    ):
        train(config, progress=False)
    assert json.loads((tmp_path / "run" / STATE_JSON).read_text())["step"] == 1
    weights = load_file(str(tmp_path / "run" / "model.safetensors"))
    assert all(v.isfinite().all() for v in weights.values())


def test_training_runs_on_one_torch_thread_unless_asked(tmp_path, monkeypatch) -> None:
    """As evaluation: more threads stall whenever another job wants a core
    (benchmarks/results/train_threads.json); the caller's setting survives the call."""
    import torch

    from robocompose.policies.flow import FlowPolicy

    dataset = tmp_path / "pusht.hdf5"
    collect("PushT", 1, dataset, progress=False)
    seen: list[int] = []
    loss = FlowPolicy.loss

    def recording(self, obs, actions):
        seen.append(torch.get_num_threads())
        return loss(self, obs, actions)

    monkeypatch.setattr(FlowPolicy, "loss", recording)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        policy = PolicyConfig(family="flow", backbone="mlp")
        small = dict(policy=policy, steps=2, batch_size=4, warmup_steps=1)
        train(TrainConfig(dataset=str(dataset), out=str(tmp_path / "a"), **small), progress=False)
        assert seen == [1, 1] and torch.get_num_threads() == 2
        asked = TrainConfig(dataset=str(dataset), out=str(tmp_path / "b"), torch_threads=2, **small)
        train(asked, progress=False)
        assert seen[2:] == [2, 2]
    finally:
        torch.set_num_threads(before)


def test_one_finite_check_serves_both_loops(tmp_path) -> None:
    """A non-finite loss always stops; an infinite gradient norm stops unless fp16 loss scaling
    skips that step itself (the torch loop with amp=fp16)."""
    check_finite(3, 0.5, 1.0, tmp_path, 2)
    check_finite(3, 0.5, math.inf, tmp_path, 2, overflow_skips=True)
    with pytest.raises(
        TrainingDiverged, match=r"step 3: the loss is 0.5 and the gradient norm inf"
    ):
        check_finite(3, 0.5, math.inf, tmp_path, 2)
    with pytest.raises(TrainingDiverged, match=r"the loss is nan .*keeps step 2's checkpoint"):
        check_finite(3, math.nan, 1.0, tmp_path, 2, overflow_skips=True)

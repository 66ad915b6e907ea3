"""Policies end to end: exact adapters on the real networks, train -> checkpoint -> load -> eval,
resume, and refusals that name the field."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from safetensors.torch import load_file

from robocompose.cli import main
from robocompose.composition.samplers import sample_euler
from robocompose.policies.checkpoint import CheckpointError, load_policy
from robocompose.policies.config import PolicyConfig
from robocompose.policies.train import TrainConfig, prepare, train
from robocompose.sim.collect import collect

FAMILIES = [("diffusion", "unet"), ("diffusion", "mlp"), ("flow", "unet"), ("flow", "mlp")]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("data") / "pusht.hdf5"
    collect("PushT", 2, path, progress=False)
    return str(path)


def _config(dataset: str, out, family: str, backbone: str, **kw) -> TrainConfig:
    policy = PolicyConfig.from_dict({"family": family, "backbone": backbone})
    fields = {"steps": 6, "batch_size": 8, "warmup_steps": 2, "checkpoint_every": 3} | kw
    return TrainConfig(dataset=dataset, out=str(out), policy=policy, **fields)


@pytest.mark.parametrize("family,backbone", FAMILIES)
@pytest.mark.parametrize("prediction_type", ["epsilon", "v_prediction"])
def test_native_sampler_equals_euler_through_denoiser(
    dataset: str, tmp_path, family: str, backbone: str, prediction_type: str
) -> None:
    if family == "flow" and prediction_type != "epsilon":
        pytest.skip("prediction type is a diffusion setting")
    config = _config(dataset, tmp_path, family, backbone)
    config.policy.prediction_type = prediction_type
    policy, windows, _ = prepare(config)
    for p in policy.parameters():  # move off the init so the network is far from trivial
        p.data.add_(0.05 * torch.randn_like(p))
    policy.eval()
    batch = windows.batch([0, 5, 9])
    obs = {k: torch.as_tensor(v) for k, v in batch["obs"].items()}
    noise = torch.randn(policy.chunk_shape(3), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        native = policy.sample_normalized(policy.encode(obs), 10, noise)
        denoiser = policy.denoiser(obs)
        ours = sample_euler(denoiser, noise, denoiser.sigmas(10))
    torch.testing.assert_close(ours, native, atol=1e-4, rtol=0)


@pytest.mark.parametrize("family,backbone", [("diffusion", "unet"), ("flow", "mlp")])
def test_train_checkpoint_load_eval(
    dataset: str, tmp_path, family: str, backbone: str, monkeypatch
) -> None:
    out = tmp_path / "run"
    main(
        [
            "train",
            f"dataset={dataset}",
            f"out={out}",
            f"policy.family={family}",
            f"policy.backbone={backbone}",
            "steps=4",
            "batch_size=8",
            "warmup_steps=1",
        ]
    )
    policy = load_policy(out)
    assert policy.metadata["task"] == "robocompose/PushT-v0"
    assert policy.metadata["step"] == 4
    document = json.loads((out / "config.json").read_text())
    assert document["policy"]["obs_shapes"] == {"state": [6]}
    before = [p.name for p in out.iterdir()]
    monkeypatch.chdir(tmp_path)  # eval writes runs/eval/<checkpoint name>.jsonl here
    main(["eval", str(out), "--episodes", "2", "--num-envs", "2"])
    assert sorted(p.name for p in out.iterdir()) == sorted(before)  # nothing into the checkpoint
    lines = (tmp_path / "runs" / "eval" / "run.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line)["length"] > 0 for line in lines)
    assert {json.loads(line)["policy_id"] for line in lines} == {
        f"{policy.fingerprint()}-stepsNone"
    }


def test_fingerprint_follows_the_weights(dataset: str, tmp_path) -> None:
    out = train(_config(dataset, tmp_path, "flow", "mlp"), progress=False)
    a, b = load_policy(out), load_policy(out)
    assert a.fingerprint() == b.fingerprint()
    next(b.parameters()).data.add_(1e-3)
    assert a.fingerprint() != b.fingerprint()


def test_resume_continues_exactly(dataset: str, tmp_path) -> None:
    torch.set_num_threads(1)
    straight = train(_config(dataset, tmp_path / "a", "flow", "mlp"), progress=False)
    resumed_cfg = _config(dataset, tmp_path / "b", "flow", "mlp")
    train(resumed_cfg, progress=False, stop_at_step=3)
    assert json.loads((tmp_path / "b" / "config.json").read_text())["metadata"]["step"] == 3
    resumed = train(resumed_cfg, progress=False)
    a = load_file(str(straight / "model.safetensors"))
    b = load_file(str(resumed / "model.safetensors"))
    for key in a:
        torch.testing.assert_close(a[key], b[key], atol=0, rtol=0)


def test_resume_refuses_a_different_config(dataset: str, tmp_path) -> None:
    train(_config(dataset, tmp_path, "flow", "mlp"), progress=False, stop_at_step=3)
    with pytest.raises(ValueError, match=r"`lr`: 0.0003 vs 0.001"):
        train(_config(dataset, tmp_path, "flow", "mlp", lr=1e-3), progress=False)


def test_load_into_mismatched_config_names_the_field(dataset: str, tmp_path) -> None:
    train(_config(dataset, tmp_path, "flow", "mlp", steps=1), progress=False)
    loaded = load_policy(tmp_path)
    wrong = dataclasses.replace(loaded.config, horizon=12)
    with pytest.raises(CheckpointError, match=r"`horizon`: 16 vs 12"):
        load_policy(tmp_path, expected=wrong)
    assert load_policy(tmp_path, expected=loaded.config).config == loaded.config
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="missing model.safetensors"):
        load_policy(tmp_path)
    with pytest.raises(CheckpointError, match="not a checkpoint folder"):
        load_policy(tmp_path / "nowhere")


def test_bad_override_names_the_key(dataset: str, tmp_path) -> None:
    with pytest.raises(
        SystemExit, match=r"policy has no field 'famly'.*Did you mean 'policy.family'"
    ):
        main(["train", f"dataset={dataset}", f"out={tmp_path}", "policy.famly=flow"])


def test_train_on_a_foreign_robomimic_file(tmp_path) -> None:
    """A file laid out as robomimic writes it (its own obs key names, next_obs, states, no
    masks, robosuite env_args) trains with one command."""
    import h5py
    import numpy as np

    path = tmp_path / "lift.hdf5"
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps({"env_name": "Lift", "type": 1, "env_kwargs": {}})
        total = 0
        for i in range(3):
            steps = 30 + i
            demo = data.create_group(f"demo_{i}")
            for group in ("obs", "next_obs"):
                demo.create_dataset(f"{group}/robot0_eef_pos", data=rng.normal(size=(steps, 3)))
                demo.create_dataset(f"{group}/object", data=rng.normal(size=(steps, 10)))
            demo.create_dataset("actions", data=rng.uniform(-1, 1, (steps, 7)))
            demo.create_dataset("states", data=rng.normal(size=(steps, 32)))
            demo.create_dataset("rewards", data=np.zeros(steps))
            demo.create_dataset("dones", data=np.zeros(steps))
            demo.attrs["num_samples"] = steps
            total += steps
        data.attrs["total"] = total
    out = tmp_path / "run"
    main(
        [
            "train",
            f"dataset={path}",
            f"out={out}",
            "policy.family=flow",
            "policy.backbone=mlp",
            'policy.obs_keys=["robot0_eef_pos", "object"]',
            "steps=3",
            "batch_size=4",
        ]
    )
    policy = load_policy(out)
    assert policy.metadata["task"] == "Lift" and policy.config.action_dim == 7
    obs = {"robot0_eef_pos": torch.zeros(2, 2, 3), "object": torch.zeros(2, 2, 10)}
    assert policy.sample(obs).shape == (2, 16, 7)

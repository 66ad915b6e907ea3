"""A LeRobot DiffusionPolicy checkpoint as a parent, checked against LeRobot's own sampling.

The fixture (tests/fixtures/lerobot_diffusion, made by its make_fixture.py in LeRobot 0.4.4's
environment) is a tiny policy LeRobot trained on PickPlace demos, with chunks LeRobot's code
sampled from fixed observations and noise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from robocompose.composition.api import compose
from robocompose.composition.samplers import sample_euler
from robocompose.evaluation import evaluate
from robocompose.policies.checkpoint import load_policy, read_checkpoint_config
from robocompose.policies.lerobot import LeRobotCheckpointError, LeRobotDiffusionPolicy

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests/fixtures/lerobot_diffusion"
CHECKPOINT = FIXTURE / "checkpoint"
LEROBOT_PYTHON = REPO / ".venv-lerobot/bin/python"


def _reference() -> tuple[dict[str, torch.Tensor], torch.Tensor, np.ndarray]:
    ref = np.load(FIXTURE / "reference.npz")
    obs = {
        "proprio": torch.from_numpy(ref["observation|state"]),
        "state": torch.from_numpy(ref["observation|environment_state"]),
    }
    return obs, torch.from_numpy(ref["noise"]), ref["chunk"]


def test_loads_as_a_parent_and_samples_lerobots_chunks():
    policy = load_policy(CHECKPOINT)
    assert isinstance(policy, LeRobotDiffusionPolicy)
    assert policy.config.obs_keys == ("proprio", "state")
    assert policy.metadata["task"] == "robocompose/PickPlace-v0"
    obs, noise, chunk = _reference()
    np.testing.assert_allclose(policy.sample(obs, None, noise).numpy(), chunk, atol=1e-5)
    # through the Denoiser interface composition uses: Euler in sigma = LeRobot's DDIM
    denoiser = policy.denoiser(obs)
    x0 = sample_euler(denoiser, noise, denoiser.sigmas(policy.config.num_inference_steps))
    np.testing.assert_allclose(policy.action_normalizer.unnormalize(x0).numpy(), chunk, atol=1e-5)


def test_matches_lerobots_own_code_on_new_inputs(tmp_path):
    if not LEROBOT_PYTHON.is_file():
        pytest.skip("LeRobot's own environment is missing: `make setup-all` builds .venv-lerobot")
    obs, noise, _ = _reference()
    rng = np.random.default_rng(3)
    inputs = {
        "observation|state": obs["proprio"].numpy() + rng.normal(0, 0.01, obs["proprio"].shape),
        "observation|environment_state": obs["state"].numpy(),
        "noise": rng.normal(size=noise.shape),
    }
    np.savez(tmp_path / "in.npz", **{k: v.astype(np.float32) for k, v in inputs.items()})
    done = subprocess.run(
        [
            str(LEROBOT_PYTHON),
            str(Path(__file__).with_name("lerobot_sample.py")),
            str(CHECKPOINT),
            str(tmp_path / "in.npz"),
            str(tmp_path / "out.npz"),
        ],
        capture_output=True,
        text=True,
        env=os.environ | {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    policy = load_policy(CHECKPOINT)
    ours = policy.sample(
        {
            "proprio": torch.from_numpy(inputs["observation|state"].astype(np.float32)),
            "state": torch.from_numpy(inputs["observation|environment_state"]),
        },
        None,
        torch.from_numpy(inputs["noise"].astype(np.float32)),
    )
    np.testing.assert_allclose(ours.numpy(), np.load(tmp_path / "out.npz")["chunk"], atol=1e-5)


def test_composes_with_our_policy_and_runs_an_episode():
    ours, theirs = load_policy("PickPlace_flow_mlp"), load_policy(CHECKPOINT)
    composed = compose([ours, theirs], "convex", (0.5, 0.5), allow_normalizer_mismatch=True)
    result = evaluate(composed, [100_000], progress=False)
    assert result.errors == 0 and result.records[0]["length"] > 0


def _copy(tmp_path: Path, **changes) -> Path:
    folder = tmp_path / "ckpt"
    shutil.copytree(CHECKPOINT, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | changes))
    return folder


def test_unsupported_checkpoints_say_why(tmp_path):
    with pytest.raises(LeRobotCheckpointError, match="policy type 'act'; supported: diffusion"):
        read_checkpoint_config(_copy(tmp_path, type="act"))
    shutil.rmtree(tmp_path / "ckpt")
    image = {"observation.images.top": {"type": "VISUAL", "shape": [3, 96, 96]}}
    config = json.loads((CHECKPOINT / "config.json").read_text())
    with pytest.raises(LeRobotCheckpointError, match="torchvision ResNet"):
        load_policy(_copy(tmp_path, input_features=config["input_features"] | image))
    shutil.rmtree(tmp_path / "ckpt")
    folder = _copy(tmp_path)
    (folder / "policy_preprocessor.json").unlink()
    with pytest.raises(LeRobotCheckpointError, match="no policy_preprocessor.json"):
        load_policy(folder)

"""The shipped image policy sees pixels and the gantry's own state, never the privileged one."""

from __future__ import annotations

import numpy as np
import torch

from robocompose.policies.checkpoint import load_policy
from robocompose.shipped import shipped_path
from robocompose.sim.tasks import make_env


def test_image_policy_acts_on_what_its_env_renders() -> None:
    policy = load_policy(shipped_path("PickPlace", "image_flow"))
    assert policy.config.obs_keys == ("proprio", "image")
    assert "state" not in policy.config.obs_shapes
    env = make_env("PickPlace", **policy.metadata["env_kwargs"])
    obs, _ = env.reset(seed=100_000)
    env.close()
    assert obs["image"].shape == tuple(policy.config.obs_shapes["image"]) == (64, 64, 3)
    history = {
        k: torch.from_numpy(np.stack([obs[k]] * policy.config.n_obs_steps))[None]
        for k in policy.config.obs_keys
    }
    chunk = policy.sample(history)
    assert chunk.shape == (1, policy.config.horizon, 4)
    assert torch.isfinite(chunk).all()

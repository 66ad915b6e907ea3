"""Chunk latency of every shipped policy: one full sample (10 denoising steps) at batch 1 and 16.

Median over many calls, torch threads as the machine gives, observation encoding included.

    python benchmarks/policy_latency.py [--repeats 100]
"""

from __future__ import annotations

import argparse
import json

import torch
from common import RESULTS, median_ms, shipped_checkpoints

from robocompose.policies.base import is_image_shape
from robocompose.policies.checkpoint import load_policy


def random_obs(policy, batch: int) -> dict[str, torch.Tensor]:
    cfg, obs = policy.config, {}
    for key in cfg.obs_keys:
        shape = (batch, cfg.n_obs_steps, *cfg.obs_shapes[key])
        if is_image_shape(cfg.obs_shapes[key]):
            obs[key] = torch.randint(0, 256, shape, dtype=torch.uint8)
        else:
            obs[key] = torch.randn(shape)
    return obs


def sample_ms(policy, batch: int, steps: int, repeats: int) -> float:
    obs = random_obs(policy, batch)
    return median_ms(lambda: policy.sample(obs, steps), repeats, warmup=5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    rows = []
    for folder in shipped_checkpoints():
        policy = load_policy(folder)
        cfg = policy.config
        obs_kind = (
            "image" if any(is_image_shape(cfg.obs_shapes[k]) for k in cfg.obs_keys) else "state"
        )
        for batch in (1, 16):
            row = {
                "checkpoint": folder.name,
                "family": cfg.family,
                "backbone": cfg.backbone,
                "obs": obs_kind,
                "batch": batch,
                "steps": args.steps,
                "median_ms": sample_ms(policy, batch, args.steps, args.repeats),
                "torch_threads": torch.get_num_threads(),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "policy_latency.json").write_text(json.dumps({"policies": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()

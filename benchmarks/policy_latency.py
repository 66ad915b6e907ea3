"""Chunk latency of every shipped policy: one full sample (10 denoising steps) at batch 1 and 16.

Median over many calls, torch threads as the machine gives (a JAX policy: XLA's own pool, sized
from the CPU affinity; `cpus` records it), observation encoding included. `--only NAME ...`
measures those checkpoints and replaces their rows, keeping the others.

    python benchmarks/policy_latency.py [--repeats 100] [--only Stack_flow_mlp Stack_flow_jax_mlp]
"""

from __future__ import annotations

import argparse
import json
import os

import torch
from common import ResultsFile, median_ms, shipped_checkpoints

from robocompose.policies.base import is_image_shape
from robocompose.policies.checkpoint import load_policy

RESULTS = ResultsFile("policy_latency.json", writer="policy_latency.py")


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
    parser.add_argument("--only", nargs="+", help="checkpoint names to (re)measure")
    args = parser.parse_args()
    folders = shipped_checkpoints()
    kept = []
    if args.only:
        missing = sorted(set(args.only) - {f.name for f in folders})
        if missing:
            parser.error(f"no shipped checkpoint {missing}; have {[f.name for f in folders]}")
        folders = [f for f in folders if f.name in args.only]
        kept = [r for r in RESULTS.read()["policies"] if r["checkpoint"] not in args.only]
    rows = []
    for folder in folders:
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
                "framework": "jax" if cfg.family.endswith("_jax") else "torch",
                "cpus": len(os.sched_getaffinity(0)),
                "load_1min": os.getloadavg()[0],  # other jobs on the machine meanwhile
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    rows = sorted(kept + rows, key=lambda r: (r["checkpoint"], r["batch"]))
    RESULTS.write({"policies": rows})


if __name__ == "__main__":
    main()

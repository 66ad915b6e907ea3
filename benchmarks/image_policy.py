"""What an image-observation policy costs on one CPU core: rendering, training, inference.

Rendering: the env step time of PickPlace with and without the `image` key, per image size (the
difference is the render). Training: one AdamW step (loss, backward, update) of a flow policy at
batch 64 on random pixels, per image size, backbone and observation keys. Inference: one chunk
(the checkpoint's own denoising steps) at batch 1 of each checkpoint given with `--checkpoints`.
All with one torch thread, medians over repeats.

    MUJOCO_GL=egl python benchmarks/image_policy.py [--sizes 64 84 96] [--parts render]
        [--checkpoints PickPlace_image_flow PickPlace_flow_mlp]

Parts: render, train_step, inference (only with `--checkpoints`). Results merge into
benchmarks/results/image_policy.json: the parts a run measures replace their old figures, the
others (and the `choice` and `results` written by hand) stay.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np
import torch
from common import ResultsFile, add_parts, median_ms
from policy_latency import random_obs

from robocompose.policies.base import build_policy
from robocompose.policies.checkpoint import load_policy
from robocompose.policies.config import PolicyConfig
from robocompose.policies.normalizer import AffineNormalizer
from robocompose.sim.tasks import make_env

RESULTS = ResultsFile("image_policy.json", writer="image_policy.py")
PARTS = ("render", "train_step", "inference")
BATCH = 64
ACTION_DIM = 4


def step_ms(obs_keys: tuple[str, ...], size: int, steps: int) -> float:
    """Median ms of one PickPlace control step (10 Hz, 25 physics substeps) with `obs_keys`."""
    env = make_env("PickPlace", obs_keys=obs_keys, image_size=size)
    env.reset(seed=0)
    action = np.array([0.05, -0.05, 0.1, -1.0])  # a reachable target: the gantry moves
    try:
        return median_ms(lambda: env.step(action), steps, warmup=2)
    finally:
        env.close()


def measure_render(sizes: list[int], steps: int) -> dict[str, Any]:
    state_only = step_ms(("state",), 96, steps)
    rows = []
    for size in sizes:
        with_image = step_ms(("state", "image"), size, steps)
        rows.append(
            {
                "image_size": size,
                "step_ms": round(with_image, 3),
                "render_ms": round(with_image - state_only, 3),
            }
        )
    return {"state_only_step_ms": round(state_only, 3), "per_size": rows}


def train_step_ms(size: int, backbone: str, keys: tuple[str, ...], repeats: int) -> float:
    shapes = {"image": (size, size, 3), "proprio": (4,)}
    config = PolicyConfig.from_dict(
        {
            "family": "flow",
            "backbone": backbone,
            "obs_keys": list(keys),
            "action_dim": ACTION_DIM,
            "obs_shapes": {k: list(shapes[k]) for k in keys},
        }
    )
    normalizers = {"action": AffineNormalizer.identity(ACTION_DIM)}
    if "proprio" in keys:
        normalizers["proprio"] = AffineNormalizer.identity(4)
    torch.manual_seed(0)
    policy = build_policy(config, normalizers).train()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-4)
    obs = random_obs(policy, BATCH)
    actions = torch.randn(BATCH, config.horizon, ACTION_DIM)

    def step() -> None:
        optimizer.zero_grad()
        policy.loss(obs, actions).backward()
        optimizer.step()

    return median_ms(step, repeats, warmup=2)


def measure_train(sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        for backbone in ("mlp", "unet"):
            for keys in (("image",), ("image", "proprio")):
                ms = train_step_ms(size, backbone, keys, repeats)
                rows.append(
                    {
                        "image_size": size,
                        "backbone": backbone,
                        "obs_keys": list(keys),
                        "batch": BATCH,
                        "train_step_ms": round(ms, 1),
                        "steps_in_45_min": int(45 * 60e3 / ms),
                    }
                )
                print(rows[-1], flush=True)
    return rows


def measure_inference(folders: list[str], repeats: int) -> list[dict[str, Any]]:
    rows = []
    for folder in folders:
        policy = load_policy(folder).eval()
        obs = random_obs(policy, 1)
        steps = policy.config.num_inference_steps
        with torch.inference_mode():
            ms = median_ms(lambda p=policy, o=obs, s=steps: p.sample(o, s), repeats, warmup=2)
        rows.append(
            {
                "checkpoint": folder,
                "obs_keys": list(policy.config.obs_keys),
                "backbone": policy.config.backbone,
                "denoising_steps": steps,
                "chunk_ms_batch1": round(ms, 2),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 84, 96])
    parser.add_argument("--env-steps", type=int, default=100)
    parser.add_argument("--train-repeats", type=int, default=5)
    add_parts(parser, PARTS)
    parser.add_argument("--checkpoints", nargs="*", default=[])
    args = parser.parse_args()
    torch.set_num_threads(1)
    result: dict[str, Any] = {"machine": {"torch_threads": 1, "torch": torch.__version__}}
    if "render" in args.parts:
        result["render"] = measure_render(args.sizes, args.env_steps)
    if "train_step" in args.parts:
        result["train_step"] = measure_train(args.sizes, args.train_repeats)
    if "inference" in args.parts and args.checkpoints:
        result["inference"] = measure_inference(args.checkpoints, 50)
    print(json.dumps(RESULTS.update(lambda document: document.update(result)), indent=2))


if __name__ == "__main__":
    main()

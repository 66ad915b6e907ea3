"""LeRobot's own sampling of a saved DiffusionPolicy, run in .venv-lerobot by
tests/policies/test_lerobot_policy.py:

    python lerobot_sample.py CHECKPOINT INPUTS.npz OUT.npz

INPUTS.npz holds each input feature ("." written "|") as (B, n_obs_steps, D) and `noise`
(B, horizon, A); OUT.npz gets `chunk`, the unnormalised full chunks: LeRobot's preprocessor,
`DiffusionModel.conditional_sample` from that noise, its postprocessor.
"""

from __future__ import annotations

import sys

import numpy as np
import torch


def main(checkpoint: str, inputs: str, out: str) -> None:
    from lerobot.policies.diffusion.modeling_diffusion import DiffusionPolicy
    from lerobot.processor import PolicyProcessorPipeline
    from lerobot.processor.converters import (
        policy_action_to_transition,
        transition_to_policy_action,
    )

    policy = DiffusionPolicy.from_pretrained(checkpoint).eval()
    preprocess = PolicyProcessorPipeline.from_pretrained(
        checkpoint, config_filename="policy_preprocessor.json"
    )
    postprocess = PolicyProcessorPipeline.from_pretrained(
        checkpoint,
        config_filename="policy_postprocessor.json",
        to_transition=policy_action_to_transition,
        to_output=transition_to_policy_action,
    )
    arrays = np.load(inputs)
    noise = torch.from_numpy(arrays["noise"])
    obs = {k.replace("|", "."): torch.from_numpy(arrays[k]) for k in arrays if k != "noise"}
    with torch.no_grad():
        batch = preprocess(obs)
        cond = policy.diffusion._prepare_global_conditioning(batch)
        chunk = policy.diffusion.conditional_sample(len(noise), global_cond=cond, noise=noise)
        chunk = postprocess(chunk)
    np.savez(out, chunk=chunk.numpy())


if __name__ == "__main__":
    main(*sys.argv[1:4])

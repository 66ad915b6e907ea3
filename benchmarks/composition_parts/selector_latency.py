"""Selector cost (`--parts selector_latency`, per task `selector_latency`): the selector's time per
chunk against the floor (both parents' networks and the sampler, `latency.floor_chunk`), at
batch 1 and 16, and how it grows with the native samples drawn per parent (`selector_samples`:
2k + 1 candidates for two parents). Timed in interleaved rounds with the floor on one torch
thread (the selector's candidates run in turn), medians of wall and process CPU ms.

By the training-free `agreement` score and, where `--parts verifier` left a verifier for the
task, by that verifier (its forward pass over every candidate of every row is the only cost it
adds)."""

from __future__ import annotations

import os
import statistics
from functools import partial

import torch
from policy_latency import random_obs

from robocompose.composition.api import compose
from robocompose.composition.composed_policy import ComposedPolicy

from .latency import _interleaved_ms, floor_chunk
from .shared import OUT, parents_of

SAMPLES = (1, 2, 4, 8)  # native samples per parent at every chunk


def _verifier_file(task: str) -> str | None:
    rounds = sorted((OUT / task / "verifier").glob("round*.safetensors"))
    return str(rounds[-1]) if rounds else None


def selector_latency(task: str, repeats: int) -> dict:
    """Per batch: the floor and the selector at every `SAMPLES` count, by each score."""
    parents, names = parents_of(task)
    scores = {"agreement": {}}
    verifier = _verifier_file(task)
    if verifier is not None:
        scores["verifier"] = {"verifier": verifier}
    torch.set_num_threads(1)
    out: dict = {"scores": {"verifier": verifier} if verifier else {}, "threads": 1}
    convex = compose(parents, "convex", (0.5, 0.5))  # its stacked groups: the floor's networks
    for batch in (1, 16):
        obs: dict[str, torch.Tensor] = {}
        for parent in parents:
            obs |= random_obs(parent, batch)
        noise = torch.randn(batch, *convex.noise_shape)
        views = [ComposedPolicy.parent_view(p, obs) for p in parents]
        calls = {"floor": partial(floor_chunk, parents, views, noise, convex.stacks)}
        for score, extra in scores.items():
            for k in SAMPLES:
                policy = compose(
                    parents,
                    "selector",
                    (0.5, 0.5),
                    selector_score=score,
                    selector_samples=k,
                    **extra,
                )
                calls[f"{score}|{k}"] = lambda p=policy, o=obs, n=noise: p.predict_actions(o, n)
        rounds = repeats if batch == 1 else max(3, repeats // 2)
        with torch.no_grad():
            wall, cpu = _interleaved_ms(calls, rounds)
        floor_ms = statistics.median(wall["floor"])
        floor_cpu = statistics.median(cpu["floor"])
        row: dict = {"floor_ms": floor_ms, "floor_cpu_ms": floor_cpu, "rounds": rounds}
        for score in scores:
            row[score] = {
                str(k): {
                    "candidates": len(parents) * k + 1,
                    "ms": statistics.median(wall[f"{score}|{k}"]),
                    "ratio_to_floor": statistics.median(
                        s / f for s, f in zip(wall[f"{score}|{k}"], wall["floor"], strict=True)
                    ),
                    "ratio_to_floor_cpu": statistics.median(cpu[f"{score}|{k}"]) / floor_cpu,
                }
                for k in SAMPLES
            }
        row["load_average"] = list(os.getloadavg())
        out[f"batch{batch}"] = row
        shipped = row["agreement"]["2"]["ratio_to_floor"]
        print(f"{task} selector batch {batch}: {shipped:.1f}x the floor (2 per parent)", flush=True)
    torch.set_num_threads(2)
    out["names"] = names
    return out

"""A JAX parent composed with a torch parent on Stack: key `jax_torch` of external.json.

Parts (episodes appended to JSONL files under runs/benchmarks/jax_torch as they end; a rerun
resumes):
- overhead: what crossing frameworks costs per chunk at batch 1 (per-episode inference, one
  torch thread, as evaluation runs): the convex composition of the torch diffusion MLP with the
  JAX flow MLP against the same diffusion MLP with the torch flow MLP of the same size (fused,
  the default, and unfused, each parent's own network), each parent's denoiser call alone, and
  the DLPack crossings: how many a chunk makes, how many shared the buffer (no copy), and the
  median cost of one each way.
- policies: the torch parent (Stack_diffusion_mlp), the JAX parent (Stack_flow_jax_mlp) and its
  torch twin (Stack_flow_mlp, the same recipe in torch) on `--fresh` fresh seeds; the convex
  weights searched (successive halving, grid `--step`) on `--search` search seeds disjoint from
  them; then the searched convex composition and the product of experts (weighted sum,
  w = (1, 1)) on the same fresh seeds, each paired seed by seed against both parents
  (difference with Newcombe's paired 95% interval).

    XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \
        python benchmarks/jax_policy.py [--parts overhead,policies] [--fresh 100]

(XLA on one thread, as evaluation holds torch to one.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from common import CHECKPOINTS, RUNS_DIR, ResultsFile, add_parts, median_ms
from policy_latency import random_obs
from search_replay import convex_search

import robocompose.policies.jax_bridge as bridge
import robocompose.policies.jax_flow as jax_flow
from robocompose.compare import compare
from robocompose.composition.api import candidate_label, compose
from robocompose.policies.checkpoint import load_policy

KEY = "jax_torch"
TORCH_PARENT, JAX_PARENT, TORCH_TWIN = "Stack_diffusion_mlp", "Stack_flow_jax_mlp", "Stack_flow_mlp"
PARENTS = (TORCH_PARENT, JAX_PARENT)
OUT = RUNS_DIR / KEY
RESULTS = ResultsFile("external.json", writer="jax_policy.py")
# the demos use seeds from 0 upwards; fresh and search seeds are disjoint from them and each other
FRESH_SEED_START, SEARCH_SEED_START = 100_000, 200_000
PARTS = ("overhead", "policies")


class CrossingCounter:
    """Counts the DLPack crossings of the JAX policy while active, and how many shared the
    buffer: the bridge's two functions wrapped where the policy and its bound net call them."""

    def __init__(self) -> None:
        self.into = self.out = self.shared = 0

    def to_jax(self, tensor: torch.Tensor):
        array = self._to_jax(tensor)
        self.into += 1
        self.shared += bridge.shares_memory(tensor, array)
        return array

    def to_torch(self, array):
        tensor = self._to_torch(array)
        self.out += 1
        self.shared += bridge.shares_memory(tensor, array)
        return tensor

    def __enter__(self) -> CrossingCounter:
        self._to_jax, self._to_torch = bridge.to_jax, bridge.to_torch
        for module in (bridge, jax_flow):
            module.to_jax, module.to_torch = self.to_jax, self.to_torch
        return self

    def __exit__(self, *exc: object) -> None:
        for module in (bridge, jax_flow):
            module.to_jax, module.to_torch = self._to_jax, self._to_torch


def _interleaved_ms(calls: dict[str, Callable[[], Any]], repeats: int) -> dict[str, list[float]]:
    """Wall milliseconds of each call, timed in turn round after round: a load that comes and
    goes (other jobs share the cores) then weighs on every call alike."""
    for call in calls.values():
        for _ in range(5):
            call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(1e3 * (time.perf_counter() - start))
    return times


def overhead(repeats: int) -> dict[str, Any]:
    torch.set_num_threads(1)
    diffusion, jax_parent, torch_twin = (
        load_policy(CHECKPOINTS / n) for n in (TORCH_PARENT, JAX_PARENT, TORCH_TWIN)
    )
    obs = random_obs(diffusion, 1)
    weights = (0.5, 0.5)
    mixed = compose([diffusion, jax_parent], "convex", weights)
    variants = {
        "jax_torch": mixed,
        "all_torch_fused": compose([diffusion, torch_twin], "convex", weights),
        "all_torch_unfused": compose([diffusion, torch_twin], "convex", weights, fuse=False),
    }
    noise = torch.randn(1, *mixed.noise_shape)
    times = _interleaved_ms(
        {k: (lambda p=p: p.predict_actions(obs, noise)) for k, p in variants.items()}, repeats
    )
    chunks = {k: statistics.median(v) for k, v in times.items()}
    ratios = {
        f"jax_torch_over_{k}": statistics.median(
            a / b for a, b in zip(times["jax_torch"], times[k], strict=True)
        )
        for k in ("all_torch_fused", "all_torch_unfused")
    }
    with CrossingCounter() as counter:
        mixed.predict_actions(obs, torch.randn(1, *mixed.noise_shape))
    x = torch.randn(1, *jax_parent.chunk_shape(1)[1:])
    denoiser_ms = {}
    bound = {
        name: parent.denoiser(obs)
        for name, parent in (
            (TORCH_PARENT, diffusion),
            (JAX_PARENT, jax_parent),
            (TORCH_TWIN, torch_twin),
        )
    }
    calls = {name: (lambda b=b: b(x, 1.0)) for name, b in bound.items()}
    denoiser_ms = {k: statistics.median(v) for k, v in _interleaved_ms(calls, 10 * repeats).items()}
    array = bridge.to_jax(x)
    crossing_us = {
        "torch_to_jax": 1e3 * median_ms(lambda: bridge.to_jax(x), repeats * 10, warmup=5),
        "jax_to_torch": 1e3 * median_ms(lambda: bridge.to_torch(array), repeats * 10, warmup=5),
    }
    return {
        "parents": list(PARENTS),
        "twin": TORCH_TWIN,
        "operator": "convex",
        "weights": list(weights),
        "steps": mixed.steps,
        "batch": 1,
        "torch_threads": torch.get_num_threads(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "load_1min": os.getloadavg()[0],  # other jobs on the machine meanwhile
        "chunk_ms": chunks,
        "overhead_ms_vs_unfused": chunks["jax_torch"] - chunks["all_torch_unfused"],
        "overhead_ms_vs_fused": chunks["jax_torch"] - chunks["all_torch_fused"],
        "per_round_ratio": ratios,
        "denoiser_call_ms": denoiser_ms,
        "crossings_per_chunk": {
            "torch_to_jax": counter.into,
            "jax_to_torch": counter.out,
            "zero_copy": counter.shared,
        },
        "crossing_us": crossing_us,
    }


def _paired_rows(
    policy, parents: list, names: tuple[str, ...], label: str, fresh: list[int]
) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for parent, name in zip(parents, names, strict=True):
        pair = compare(policy, parent, fresh, out_dir=OUT / "fresh", labels=(label, name))
        row |= pair.results[0].row()
        row[f"vs_{name}"] = pair.to_dict() | {"formatted": pair.paired.format()}
        print(f"{label} - {name}: {pair.paired.format()}", flush=True)
    return row


def policies(fresh: list[int], search_seeds: list[int], step: float) -> dict[str, Any]:
    parents = [load_policy(CHECKPOINTS / name) for name in PARENTS]
    twin = load_policy(CHECKPOINTS / TORCH_TWIN)
    on_fresh = compare(*parents, fresh, out_dir=OUT / "fresh", labels=PARENTS)
    print(on_fresh.table(), flush=True)
    frameworks = compare(
        parents[1], twin, fresh, out_dir=OUT / "fresh", labels=(JAX_PARENT, TORCH_TWIN)
    )
    print(frameworks.table(), flush=True)
    found = convex_search(
        parents, search_seeds, OUT / "search", step=step, first_slice=10, progress=False
    )
    print(found.table(), flush=True)
    trials: dict[str, tuple[str, tuple[float, ...]]] = {
        "convex": ("convex", tuple(found.best_composition)),
        "product_of_experts": ("weighted_sum", (1.0, 1.0)),
    }
    composed: dict[str, Any] = {}
    for key, (operator, weights) in trials.items():
        label = candidate_label(operator, weights)
        policy = compose(parents, operator, weights)
        composed[key] = {"operator": operator, "weights": list(weights)} | _paired_rows(
            policy, parents, PARENTS, label, fresh
        )
    return {
        "task": "Stack",
        "parents": list(PARENTS),
        "frameworks": {TORCH_PARENT: "torch", JAX_PARENT: "jax"},
        "fresh_seeds": {"start": fresh[0], "episodes": len(fresh)},
        "search_seeds": {"start": search_seeds[0], "episodes": len(search_seeds)},
        "fresh": {n: r.row() for n, r in zip(PARENTS, on_fresh.results, strict=True)},
        "complementarity": on_fresh.to_dict(),
        "jax_vs_torch_twin": frameworks.to_dict() | {"formatted": frameworks.paired.format()},
        "search": found.to_dict(),
        "composed": composed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    add_parts(parser, PARTS)
    parser.add_argument("--fresh", type=int, default=100, help="fresh seeds per policy")
    parser.add_argument("--search", type=int, default=40, help="search seeds")
    parser.add_argument("--step", type=float, default=0.1, help="convex weight grid step")
    parser.add_argument("--repeats", type=int, default=200, help="timed chunks per figure")
    args = parser.parse_args()
    fresh = list(range(FRESH_SEED_START, FRESH_SEED_START + args.fresh))
    search_seeds = list(range(SEARCH_SEED_START, SEARCH_SEED_START + args.search))
    runs: dict[str, Callable[[], dict[str, Any]]] = {
        "overhead": lambda: overhead(args.repeats),
        "policies": lambda: policies(fresh, search_seeds, args.step),
    }
    for part in PARTS:
        if part not in args.parts:
            continue
        start = time.perf_counter()
        value = runs[part]()
        RESULTS.set((KEY, part), value)
        print(part, f"{time.perf_counter() - start:.0f} s", json.dumps(value)[:2000], flush=True)


if __name__ == "__main__":
    main()

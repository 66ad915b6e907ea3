"""What each parent of PickPlace's shipped pair (state diffusion UNet + image flow MLP) costs per
chunk in real composed episodes: the times `ComposedPolicy.times` keeps on the run's own calls
(the same figures `robocompose compose` prints), one torch thread, one episode at a time.

    python benchmarks/parent_cost.py [--episodes 5]
"""

from __future__ import annotations

import argparse

import torch
from common import ResultsFile

from robocompose.composition.api import compose, evaluate, load
from robocompose.shipped import parent_pair

TASK = "PickPlace"
SEED_START = 100_000
RESULTS = ResultsFile("parent_cost.json", writer="parent_cost.py")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=5)
    args = parser.parse_args()
    parents = [load(path) for path in parent_pair(TASK)]
    policy = compose(parents, "convex", (0.5, 0.5))
    seeds = range(SEED_START, SEED_START + args.episodes)
    result = evaluate(policy, seeds, num_envs=1, torch_threads=1, progress=False)
    times = policy.times
    record = {
        "machine": {"torch_threads": 1, "torch": torch.__version__},
        "task": TASK,
        "parents": times.names,
        "composition": "convex 0.5/0.5, its default 10 steps, euler",
        "episodes": args.episodes,
        "success": result.summary(),
        "chunks": times.chunks,
        "ms_per_chunk": {k: round(v, 2) for k, v in times.per_chunk_ms().items()},
        "encoder_ms_per_chunk": {
            name: round(1000 * s / n, 2)
            for name, s, n in zip(times.names, times.encode_s, times.chunks_of, strict=True)
        },
        "summary": times.summary(),
    }
    RESULTS.write(record)
    print(times.summary())
    print(f"wrote {RESULTS.path}")


if __name__ == "__main__":
    main()

"""Training speed by torch thread count, on the machine as it is and beside a busy core: why
`torch_threads` defaults to 1.

The shipped flow MLP's recipe (batch 256) trains `--steps` steps on a few PushT demos with 1 and
2 torch threads, first with whatever else the machine runs ("as is": its load average is
recorded), then while one more process spins on a core ("plus a busy core", as a second job on
a shared machine does). Seconds are the whole `train` call (reading the demos included).

    python benchmarks/train_threads.py [--steps 40] [--demos 5]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import tempfile
import time
from pathlib import Path

import torch
from common import ResultsFile

from robocompose.policies.config import PolicyConfig
from robocompose.policies.train import TrainConfig, train
from robocompose.sim.collect import collect


def spin() -> None:
    while True:
        pass


def seconds(dataset: Path, out: Path, steps: int, threads: int) -> float:
    policy = PolicyConfig.from_dict({"family": "flow", "backbone": "mlp"})
    config = TrainConfig(
        dataset=str(dataset),
        out=str(out),
        policy=policy,
        steps=steps,
        batch_size=256,
        checkpoint_every=steps,
        torch_threads=threads,
    )
    start = time.perf_counter()
    train(config, progress=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--demos", type=int, default=5)
    args = parser.parse_args()
    load_before, rows = os.getloadavg()[0], []
    with tempfile.TemporaryDirectory() as folder:
        dataset = Path(folder) / "pusht.hdf5"
        collect("PushT", args.demos, dataset, progress=False)
        for load in ("as is", "plus a busy core"):
            busy = multiprocessing.Process(target=spin, daemon=True) if load != "as is" else None
            if busy is not None:
                busy.start()
            try:
                for threads in (1, 2):
                    out = Path(folder) / f"{load}-{threads}".replace(" ", "_")
                    took = seconds(dataset, out, args.steps, threads)
                    rows.append({"load": load, "torch_threads": threads, "seconds": took})
                    print(f"{load}, {threads} thread(s): {args.steps} steps in {took:.1f} s")
            finally:
                if busy is not None:
                    busy.terminate()
                    busy.join()
    ResultsFile("train_threads.json", writer="train_threads.py").set(
        ["flow_mlp_pusht"],
        {
            "steps": args.steps,
            "batch_size": 256,
            "demos": args.demos,
            "cpus": os.cpu_count(),
            "load_average_before": load_before,  # what else the machine ran
            "torch": torch.__version__,
            "runs": rows,
        },
    )


if __name__ == "__main__":
    main()

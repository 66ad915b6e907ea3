"""How low the composition's latency ratio (P2 on equal footing) can go on this machine.

A composition of two parents evaluates both parents' networks at every step; everything else in a
chunk (encoding, sampler, adapters) costs at least what the slower parent alone spends on it. With
N2 the fastest way found here to evaluate both parents' networks at one step, N1 the fastest way
to evaluate the slower parent's alone (any path a composition could take is open to a parent
alone too: equal footing), and C1 the slower parent's chunk through the composed sampler's path
(its one-parent stack, prepared, Euler; best threads) with its network made N1 fast:

    composed chunk / C1 >= (C1 + steps * (N2 - N1)) / C1        (`floor_ratio`)

Ways to evaluate one network: eager_threads{1,2} (its one-parent stack), traced_threads{1,2}
(that stack traced by TorchScript). Ways to evaluate both, each at batch 1 and 16:
  serial_threads{1,2}     the two one-parent stacks in turn
  stacked_threads{1,2}    one stacked network for both (pairs of one backbone config), and
  stacked_traced_threads{1,2}  the same traced
  python_threads          each parent's stack on its own Python thread, one torch thread each
                          (torch releases the GIL inside a kernel, not between kernels)
  torchscript_fork        each stack traced and forked in TorchScript (no GIL at all)
Plus the machine's own two-thread speed-up on a large matmul: both cores are real ones.

Every variant of one batch size is timed in turn, round by round (medians of `--samples`).

    python benchmarks/latency_floor.py [--tasks PushT,...] [--samples 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import torch
from common import ResultsFile
from composition_parts.latency import euler_alone
from composition_parts.shared import parents_of
from policy_latency import random_obs
from torch import Tensor, nn

from robocompose.composition.composed_policy import ComposedPolicy
from robocompose.composition.fused import StackedNetwork, fusable, stack_networks
from robocompose.shipped import PARENT_PAIRS

STEPS = 10
CALLS_PER_SAMPLE = 20
RESULTS = ResultsFile("latency_floor.json", writer="latency_floor.py")


def _interleaved(
    calls: dict[str, tuple[int, Callable[[], object]]], samples: int, repeat: int
) -> dict[str, float]:
    """Median ms per call of each (threads, fn), timed in turn round by round (`repeat` calls
    back to back per sample), so that a burst of contention on the shared machine hits every
    variant of that round rather than one variant's whole series."""
    times: dict[str, list[float]] = {key: [] for key in calls}
    for warm in (True,) + (False,) * samples:
        for key, (threads, fn) in calls.items():
            torch.set_num_threads(threads)
            start = time.perf_counter()
            for _ in range(repeat):
                fn()
            if not warm:
                times[key].append(1e3 * (time.perf_counter() - start) / repeat)
    torch.set_num_threads(1)
    return {key: statistics.median(ms) for key, ms in times.items()}


class _Conditioned(nn.Module):
    def __init__(self, net: StackedNetwork) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: Tensor, conditioning: Tensor) -> Tensor:
        return self.net.forward_conditioned(x, conditioning)


class _Forked(nn.Module):
    """Two traced networks, the second forked onto TorchScript's inter-op pool."""

    def __init__(self, first: nn.Module, second: nn.Module) -> None:
        super().__init__()
        self.first, self.second = first, second

    def forward(self, x1: Tensor, c1: Tensor, x2: Tensor, c2: Tensor) -> tuple[Tensor, Tensor]:
        future = torch.jit.fork(self.second, x2, c2)
        return self.first(x1, c1), torch.jit.wait(future)


@torch.no_grad()
def network_calls(parents: list, batch: int, samples: int) -> dict[str, float]:
    """ms of one step's network call: each parent alone, and both by every way above."""
    args = []
    for parent in parents:
        cfg = parent.config
        x = torch.randn(1, batch, cfg.horizon, cfg.action_dim)
        cond = torch.randn(1, batch, parent.net.global_cond_dim)
        stack = stack_networks([parent.net]).eval()
        args.append((stack, x, stack.conditioning(torch.full((1, batch), 50.0), cond)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = [torch.jit.trace(_Conditioned(s).eval(), (x, c)) for s, x, c in args]
        forked = torch.jit.script(_Forked(*traced).eval())
    ways: dict[str, tuple[int, Callable[[], object]]] = {}
    for i, ((stack, x, c), trace) in enumerate(zip(args, traced, strict=True)):
        for threads in (1, 2):
            call = lambda s=stack, x=x, c=c: s.forward_conditioned(x, c)  # noqa: E731
            ways[f"parent{i}_eager_threads{threads}"] = (threads, call)
            ways[f"parent{i}_traced_threads{threads}"] = (threads, partial(trace, x, c))

    def serial() -> None:
        for stack, x, c in args:
            stack.forward_conditioned(x, c)

    for threads in (1, 2):
        ways[f"serial_threads{threads}"] = (threads, serial)
    if fusable(parents):
        both = stack_networks([p.net for p in parents]).eval()
        x2 = torch.cat([a[1] for a in args])
        c2 = torch.cat([a[2] for a in args])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            both_traced = torch.jit.trace(_Conditioned(both).eval(), (x2, c2))
        for threads in (1, 2):
            ways[f"stacked_threads{threads}"] = (threads, partial(both.forward_conditioned, x2, c2))
            ways[f"stacked_traced_threads{threads}"] = (threads, partial(both_traced, x2, c2))

    (s0, x0, c0), (s1, x1, c1) = args
    ways["torchscript_fork"] = (1, partial(forked, x0, c0, x1, c1))
    with ThreadPoolExecutor(1, initializer=torch.set_num_threads, initargs=(1,)) as pool:

        def python_threads() -> None:
            future = pool.submit(s1.forward_conditioned, x1, c1)
            s0.forward_conditioned(x0, c0)
            future.result()

        ways["python_threads"] = (1, python_threads)
        return _interleaved(ways, samples, CALLS_PER_SAMPLE)


@torch.no_grad()
def chunk_ms(parent, batch: int, samples: int) -> dict[str, float]:
    """The parent's chunk through the composed sampler's path (one-parent stack), by threads."""
    obs = random_obs(parent, batch)
    view = ComposedPolicy.parent_view(parent, obs)
    noise = torch.randn(batch, parent.config.horizon, parent.config.action_dim)
    stack = stack_networks([parent.net]).eval()
    call = partial(euler_alone, parent, view, noise, stack)
    return _interleaved({f"threads{t}": (t, call) for t in (1, 2)}, samples, repeat=3)


def task_floor(task: str, samples: int) -> dict:
    parents, names = parents_of(task)
    out = {"pair": names}
    for batch in (1, 16):
        nets = network_calls(parents, batch, samples)
        chunks = {name: chunk_ms(p, batch, samples) for name, p in zip(names, parents, strict=True)}
        slower = max(range(len(names)), key=lambda i: min(chunks[names[i]].values()))
        own = {k: v for k, v in nets.items() if k.startswith(f"parent{slower}_")}
        n1 = min(own.values())
        eager = min(own[f"parent{slower}_eager_threads{t}"] for t in (1, 2))
        c1 = min(chunks[names[slower]].values()) - STEPS * (eager - n1)
        ways = {k: v for k, v in nets.items() if not k.startswith("parent")}
        best_way = min(ways, key=ways.get)
        n2 = ways[best_way]
        out[f"batch{batch}"] = {
            "network_ms": nets,
            "chunk_ms": chunks,
            "slower_parent": names[slower],
            "n1_ms": n1,
            "n1_way": min(own, key=own.get),
            "n2_ms": n2,
            "n2_way": best_way,
            "network_ratio": n2 / n1,
            "c1_ms": c1,
            "floor_ratio": (c1 + STEPS * (n2 - n1)) / c1,
        }
        print(f"{task} batch {batch}: {json.dumps(out[f'batch{batch}'])}", flush=True)
    return out


def matmul_speedup(samples: int) -> float:
    product = partial(torch.mm, torch.randn(1024, 1024), torch.randn(1024, 1024))
    ms = _interleaved({"one": (1, product), "two": (2, product)}, samples, repeat=5)
    return ms["one"] / ms["two"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=",".join(PARENT_PAIRS))
    parser.add_argument("--samples", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(1)
    RESULTS.set(["matmul_2_thread_speedup"], matmul_speedup(args.samples))
    for task in args.tasks.split(","):
        RESULTS.set(["tasks", task], task_floor(task, args.samples))
    tasks = RESULTS.read()["tasks"]
    worst = max(row[b]["floor_ratio"] for row in tasks.values() for b in ("batch1", "batch16"))
    RESULTS.set(["max_floor_ratio"], worst)
    print(f"max floor ratio: {worst:.2f}")


if __name__ == "__main__":
    main()

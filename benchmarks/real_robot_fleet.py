"""The fleet part of `benchmarks/real_robot.py` (section `fleet`): N robots on one policy server.

Each of N clients asks at `rate_hz` (10 Hz) with its own observations (the twin's first frame of
its own seed) and its own seeded noise stream, for `seconds`; the server runs the requests
one at a time (`serial`, max_batch=1) or batched (`batched`: max_batch=N, the requests queued
while the worker is busy plus those arriving within `window_s`). Per run: p50/p99 latency over
every request of every client, throughput (replies per second, all clients), deadline misses
(replies later than one period, or errors), the 1-minute load average at the end, and
`batch_infer_ms`: what one batch of all N observations costs the policy alone, before the run
(the floor under a batched server's latency once every client asks at once).

The clients run in `client_processes` processes of their own (robots are other machines: clients
in the server's process would queue on its interpreter lock, which no real fleet does); they still
share this machine's cores with the server, so their cost is in the figures.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import threading
import time
from typing import Any

import numpy as np
from common import median_ms

from robocompose.real_robot.base import ServedPolicy
from robocompose.real_robot.client import PolicyClient, PolicyServerError
from robocompose.real_robot.drivers.twin import TwinArm
from robocompose.real_robot.limits import ServerLimits
from robocompose.real_robot.websocket_server import PolicyServer

SEED_START = 100_000
MODES = {"serial": 1, "batched": None}  # mode -> max_batch (None: the number of clients)


def fleet_observations(policy: ServedPolicy, n: int) -> list[dict[str, np.ndarray]]:
    """One observation per client: the twin's first frame of seeds SEED_START.., as history."""
    spec = policy.spec
    twin = TwinArm("PickPlace", realtime=False)
    try:
        frames = [twin.reset(seed=SEED_START + i).obs for i in range(n)]
    finally:
        twin.close()
    return [
        {k: np.stack([f[k]] * spec.n_obs_steps).astype(s.dtype) for k, s in spec.obs.items()}
        for f in frames
    ]


def _client_loop(
    address: str, obs: dict[str, np.ndarray], seed: int, rate_hz: float, until: float, out: dict
) -> None:
    """Ask at `rate_hz` until `until` (a late reply skips the ticks it overran)."""
    period = 1.0 / rate_hz
    latencies, errors = [], 0
    with PolicyClient(address, timeout_s=10.0) as client:
        tick, start = 0, time.monotonic()
        while (due := start + tick * period) < until:
            time.sleep(max(0.0, due - time.monotonic()))
            sent = time.perf_counter()
            try:
                client.infer(obs | {"seed": seed, "chunk_index": tick % 100})
                latencies.append(1000 * (time.perf_counter() - sent))
            except (PolicyServerError, TimeoutError, ConnectionError):
                errors += 1
            tick = max(tick + 1, int((time.monotonic() - start) / period) + 1)
    out[seed] = (latencies, errors)


def _client_group(
    address: str,
    observations: list[dict[str, np.ndarray]],
    seeds: list[int],
    rate_hz: float,
    start_at: float,
    until: float,
    results: Any,
) -> None:
    """One client process: a thread per client, all starting at `start_at` (monotonic clock)."""
    out: dict[int, tuple[list[float], int]] = {}
    time.sleep(max(0.0, start_at - time.monotonic()))
    threads = [
        threading.Thread(target=_client_loop, args=(address, obs, seed, rate_hz, until, out))
        for obs, seed in zip(observations, seeds, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results.put(out)


def fleet_run(
    policy: ServedPolicy,
    n: int,
    mode: str,
    rate_hz: float,
    seconds: float,
    window_s: float,
    client_processes: int = 2,
) -> dict[str, Any]:
    """One row: `n` clients at `rate_hz` for `seconds` against a server in `mode`."""
    batch = MODES[mode] or n
    limits = ServerLimits(max_connections=max(64, n))
    window = window_s if batch > 1 else 0.0
    results: dict[int, tuple[list[float], int]] = {}
    context = multiprocessing.get_context("spawn")
    replies = context.Queue()
    groups = min(client_processes, n)
    with PolicyServer(policy, limits=limits, max_batch=batch, batch_window_s=window) as server:
        observations = fleet_observations(policy, n)
        seeds = [SEED_START + i for i in range(n)]
        requests = [
            o | {"seed": s, "chunk_index": 0} for o, s in zip(observations, seeds, strict=True)
        ]
        batch_ms = median_ms(lambda: policy.infer_batch(requests), repeats=5, warmup=1)
        start_at = time.monotonic() + 10.0  # the client processes' imports happen before this
        until = start_at + seconds
        processes = [
            context.Process(
                target=_client_group,
                args=(server.address, observations[g::groups], seeds[g::groups], rate_hz,
                      start_at, until, replies),
            )
            for g in range(groups)
        ]  # fmt: skip
        for process in processes:
            process.start()
        for _ in processes:
            try:
                results.update(replies.get(timeout=seconds + 120.0))
            except queue.Empty:
                raise RuntimeError("a fleet client process sent no results") from None
        for process in processes:
            process.join()
    latencies = np.concatenate([np.asarray(r[0], np.float64) for r in results.values()])
    errors = sum(r[1] for r in results.values())
    late = int(np.sum(latencies > 1000 / rate_hz))
    return {
        "policy": policy.spec.extra.get("policy", ""),
        "mode": mode,
        "clients": n,
        "rate_hz": rate_hz,
        "seconds": seconds,
        "client_processes": groups,
        "p50_ms": round(float(np.percentile(latencies, 50)), 2) if latencies.size else None,
        "p99_ms": round(float(np.percentile(latencies, 99)), 2) if latencies.size else None,
        "throughput_hz": round(latencies.size / seconds, 2),
        "deadline_misses": late + errors,
        "requests": int(latencies.size) + errors,
        "load_average": round(os.getloadavg()[0], 2),
        "batch_infer_ms": round(batch_ms, 1),
    }


def fleet(
    policies: list[ServedPolicy],
    clients: tuple[int, ...] = (1, 4, 16, 64),
    rate_hz: float = 10.0,
    seconds: float = 20.0,
    window_s: float = 0.002,
) -> list[dict[str, Any]]:
    """Every policy x client count x mode, batched and serial back to back in the same run."""
    rows = []
    for policy in policies:
        for n in clients:
            for mode in MODES:
                rows.append(fleet_run(policy, n, mode, rate_hz, seconds, window_s))
                print("fleet", rows[-1], flush=True)
    return rows

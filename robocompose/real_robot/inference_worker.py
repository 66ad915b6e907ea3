"""Inference off the event loop: the served policy runs on one worker thread, one call at a time,
so the loop keeps answering health checks and other connections while a chunk is sampled.

    worker = InferenceWorker(policy)                    # one per server: calls are serialised
    worker.open()                                       # a fresh worker thread
    result, timing = await worker.infer(obs, received)  # received: time.perf_counter()
    await worker.drain(grace_s)                         # the calls under way, for <= grace_s
    worker.close()

`timing` holds `infer_ms` (the policy's call), `queue_ms` (from `received` to the worker
starting it), `delay_ms` and `stall_ms` (0.0); a policy whose reply carries `server_timing`
entries of its own (`faults.injectors.LatencyInjector`) replaces those.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from robocompose.real_robot.base import ServedPolicy


class InferenceWorker:
    """`policy.infer` on one worker thread; `in_flight` counts the calls not yet answered."""

    def __init__(self, policy: ServedPolicy) -> None:
        self.policy = policy
        self.in_flight = 0
        self._lock = threading.Lock()  # one inference at a time, whoever asks
        self._executor: ThreadPoolExecutor | None = None

    def open(self) -> None:
        self.in_flight = 0
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="policy-infer")

    def close(self) -> None:
        """Drop the calls still queued; the one running finishes on its thread."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def infer(self, obs: dict[str, Any], received: float) -> tuple[dict[str, Any], dict]:
        """The policy's reply to `obs` and its timing; the policy's errors are raised here."""
        assert self._executor is not None, "open() the worker first"
        self.in_flight += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._executor, self._infer, obs, received
            )
        finally:
            self.in_flight -= 1

    async def drain(self, grace_s: float) -> None:
        """Wait (at most `grace_s`) for the inference under way to reply."""
        deadline = time.monotonic() + grace_s
        while self.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    def _infer(self, obs: dict[str, Any], received: float) -> tuple[dict[str, Any], dict]:
        with self._lock:
            start = time.perf_counter()
            result = self.policy.infer(obs)
            done = time.perf_counter()
        if not isinstance(result, dict):
            raise TypeError(f"the policy's infer() must return a dict. Got {type(result)}.")
        timing = {
            "infer_ms": 1000 * (done - start),
            "queue_ms": 1000 * (start - received),
            "delay_ms": 0.0,
            "stall_ms": 0.0,
            **result.get("server_timing", {}),
        }
        return result, timing

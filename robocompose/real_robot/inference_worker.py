"""Inference off the event loop, under a deadline: the served policy runs on one daemon worker
thread, one call at a time, so the loop keeps answering health checks and other connections while
a chunk is sampled, and a call that never returns holds neither a client nor the process.

    worker = InferenceWorker(policy, deadline_s=5)      # one per server: calls are serialised
    worker.open()                                       # a fresh worker thread
    result, timing = await worker.infer(obs, received)  # received: time.perf_counter()
    worker.stuck                                        # a call has run past the deadline
    await worker.drain(grace_s)                         # the calls under way, for <= grace_s
    worker.close()                                      # the calls not answered get an error

A request not answered `deadline_s` after it was received raises `DeadlineExceeded`; while the
call runs on (`stuck`), new requests get that error at once. `timing` holds `infer_ms` (the
policy's call), `queue_ms` (from `received` to the worker starting it), `delay_ms` and
`stall_ms` (0.0); a policy whose reply carries `server_timing` entries of its own
(`faults.injectors.LatencyInjector`) replaces those.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

from robocompose.real_robot.base import ServedPolicy


class DeadlineExceeded(TimeoutError):
    """An inference not answered within the server's deadline."""


class WorkerClosed(RuntimeError):
    """The server stopped before the inference was answered."""


@dataclass
class _Call:
    obs: dict[str, Any]
    received: float
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop


class InferenceWorker:
    """`policy.infer` on one daemon thread; `in_flight` counts the calls not yet answered."""

    def __init__(self, policy: ServedPolicy, deadline_s: float = 5.0) -> None:
        self.policy, self.deadline_s = policy, deadline_s
        self.in_flight = 0
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._pending: set[asyncio.Future] = set()
        self._started: float | None = None  # time.monotonic() the running call began

    @property
    def stuck(self) -> bool:
        """Whether the call under way has run longer than the deadline."""
        started = self._started
        return started is not None and time.monotonic() - started > self.deadline_s

    def open(self) -> None:
        self.in_flight = 0
        self._calls = queue.SimpleQueue()
        thread = threading.Thread(target=self._run, args=(self._calls,), daemon=True)
        thread.name = "policy-infer"
        thread.start()

    def close(self) -> None:
        """Stop the thread after its call; every request not yet answered gets `WorkerClosed`."""
        self._calls.put(None)
        for future in self._pending:
            if not future.done():
                future.set_exception(WorkerClosed("the server is shutting down"))

    async def infer(self, obs: dict[str, Any], received: float) -> tuple[dict[str, Any], dict]:
        """The policy's reply to `obs` and its timing; the policy's errors are raised here."""
        if self.stuck:
            raise DeadlineExceeded(
                f"an inference has run past the deadline of {self.deadline_s:g} s "
                "(limits.deadline_s); requests are refused until it returns"
            )
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending.add(future)
        self.in_flight += 1
        self._calls.put(_Call(obs, received, future, loop))
        remaining = self.deadline_s - (time.perf_counter() - received)
        try:
            return await asyncio.wait_for(future, max(remaining, 0.0))
        except TimeoutError:
            raise DeadlineExceeded(
                f"no chunk within the deadline of {self.deadline_s:g} s (limits.deadline_s)"
            ) from None
        finally:
            self.in_flight -= 1
            self._pending.discard(future)

    async def drain(self, grace_s: float) -> None:
        """Wait (at most `grace_s`) for the inference under way to reply."""
        deadline = time.monotonic() + grace_s
        while self.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    def _run(self, calls: queue.SimpleQueue[_Call | None]) -> None:
        while (call := calls.get()) is not None:
            if call.future.done():  # its client's deadline passed while it queued
                continue
            try:
                outcome: Any = self._infer(call.obs, call.received)
                settle = _settle_result
            except Exception as e:  # noqa: BLE001 - raised in the waiting coroutine
                outcome, settle = e, _settle_exception
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting
                call.loop.call_soon_threadsafe(settle, call.future, outcome)

    def _infer(self, obs: dict[str, Any], received: float) -> tuple[dict[str, Any], dict]:
        self._started = time.monotonic()
        start = time.perf_counter()
        try:
            result = self.policy.infer(obs)
        finally:
            self._started = None
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


def _settle_result(future: asyncio.Future, result: Any) -> None:
    if not future.done():
        future.set_result(result)


def _settle_exception(future: asyncio.Future, error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)

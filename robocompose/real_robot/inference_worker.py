"""Inference off the event loop, under a deadline: the served policy runs on one daemon worker
thread, one call at a time, so the loop keeps answering health checks and other connections while
a chunk is sampled, and a call that never returns holds neither a client nor the process.

    worker = InferenceWorker(policy, deadline_s=5)      # one per server: calls are serialised
    InferenceWorker(policy, max_batch=64, batch_window_s=0.002)   # a fleet: batched calls
    worker.open()                                       # a fresh worker thread
    result, timing = await worker.infer(obs, received)  # received: time.perf_counter()
    worker.stuck                                        # a call has run past the deadline
    await worker.drain(grace_s)                         # the calls under way, for <= grace_s
    worker.close()                                      # the calls not answered get an error

A request not answered `deadline_s` after it was received raises `DeadlineExceeded`; while the
call runs on (`stuck`), new requests get that error at once. With `max_batch` > 1 and a policy
that has `infer_batch(list of obs) -> list of replies`, the worker runs the requests queued when
it is free, and those arriving within `batch_window_s` of the first, as one call (a batch that
fails is retried request by request, so each error reaches its own client). `timing` holds
`infer_ms` (the policy's call, the whole batch's), `queue_ms` (from `received` to the worker
starting it), `delay_ms` and `stall_ms` (0.0); a policy whose reply carries `server_timing`
entries of its own (`faults.injectors.LatencyInjector`) replaces those.
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


def check_batching(max_batch: int, batch_window_s: float, deadline_s: float) -> None:
    """`max_batch` >= 1, and a batch window in [0, deadline_s)."""
    if max_batch < 1:
        raise ValueError(f"`max_batch` must be >= 1. Got {max_batch}.")
    if not 0.0 <= batch_window_s < deadline_s:
        raise ValueError(
            f"`batch_window_s` must be in [0, limits.deadline_s={deadline_s:g}). "
            f"Got {batch_window_s}."
        )


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

    def __init__(
        self,
        policy: ServedPolicy,
        deadline_s: float = 5.0,
        max_batch: int = 1,
        batch_window_s: float = 0.0,
    ) -> None:
        check_batching(max_batch, batch_window_s, deadline_s)
        if max_batch > 1 and not hasattr(policy, "infer_batch"):
            raise ValueError(
                f"`max_batch` > 1 needs a policy with infer_batch(); {type(policy).__name__} "
                "has none: serve it with max_batch=1."
            )
        self.policy, self.deadline_s = policy, deadline_s
        self.max_batch = max_batch
        self.batch_window_s = batch_window_s
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
        while (first := calls.get()) is not None:
            batch = [c for c in self._gather(first, calls) if not c.future.done()]
            for call, outcome in zip(batch, self._outcomes(batch), strict=True):
                settle = _settle_exception if isinstance(outcome, Exception) else _settle_result
                with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting
                    call.loop.call_soon_threadsafe(settle, call.future, outcome)

    def _gather(self, first: _Call, calls: queue.SimpleQueue[_Call | None]) -> list[_Call]:
        """`first` and the calls queued by the end of the batch window, `max_batch` at most
        (calls whose client's deadline passed while they queued are dropped by the caller)."""
        batch, until = [first], time.monotonic() + self.batch_window_s
        while len(batch) < self.max_batch:
            try:
                call = calls.get(timeout=max(until - time.monotonic(), 0.0))
            except queue.Empty:
                break
            if call is None:  # closing: run this batch, then stop
                calls.put(None)
                break
            batch.append(call)
        return batch

    def _outcomes(self, batch: list[_Call]) -> list[Any]:
        """Per call, (reply, timing) or the exception; a failed batch is retried call by call."""
        if not batch:
            return []
        try:
            return self._infer([c.obs for c in batch], [c.received for c in batch])
        except Exception as e:  # noqa: BLE001 - raised in the waiting coroutine
            if len(batch) == 1:
                return [e]
            return [outcome for call in batch for outcome in self._outcomes([call])]

    def _infer(self, requests: list[dict[str, Any]], received: list[float]) -> list[Any]:
        self._started = time.monotonic()
        start = time.perf_counter()
        try:
            if len(requests) == 1:
                results = [self.policy.infer(requests[0])]
            else:
                results = self.policy.infer_batch(requests)  # type: ignore[attr-defined]
        finally:
            self._started = None
        done = time.perf_counter()
        return [_timed(r, start, done, t) for r, t in zip(results, received, strict=True)]


def _timed(result: Any, start: float, done: float, received: float) -> tuple[dict, dict]:
    """The reply and its `server_timing`, or a TypeError for a reply that is not a dict."""
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

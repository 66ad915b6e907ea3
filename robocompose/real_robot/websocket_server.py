"""The websocket transport: one `ServedPolicy` served in openpi's protocol (`wire.py`'s msgpack).

    <- on connect: metadata, PolicySpec.to_metadata()
    -> observation             <- {"actions": (chunk, A), ..., "server_timing": {...}}
    -> malformed observation   <- a text frame naming the problem; the connection stays open

Plain HTTP (`/healthz`, the API key) is answered by `http_gate.py`; the policy runs on
`inference_worker.py`'s thread, which times it (`server_timing`; `total_ms` is message in to
reply out, without the send); `loop_thread.py` runs the server in the background or until a
signal. `stop()` stops listening, lets the inference under way reply (for at most `grace_s`),
then closes every connection with code 1001 (going away); a signal gives it `SIGNAL_GRACE_S`. A
taken port raises `ports.PortInUse`.

Nothing a client sends can cost more than a bounded amount of work or slip an unsafe chunk out:
`exposure.py` refuses a network address without a key (unless `allow_open`) and serves wss://
with `tls`; `limits.py` caps connections, idle time, request rate and each inference's time;
`ranges.py` holds inputs and actions to the policy's training range; `audit.py` records every
connection, auth result, refusal and error.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from robocompose.ports import PortInUse
from robocompose.real_robot.audit import AuditLog, peer_name
from robocompose.real_robot.base import ServedPolicy
from robocompose.real_robot.exposure import check_exposure
from robocompose.real_robot.http_gate import Gate
from robocompose.real_robot.inference_worker import DeadlineExceeded, InferenceWorker, WorkerClosed
from robocompose.real_robot.limits import (
    CLOSE_FULL,
    CLOSE_IDLE,
    CLOSE_RATE,
    RequestRate,
    ServerLimits,
)
from robocompose.real_robot.loop_thread import LoopThread, run_until_signal
from robocompose.real_robot.obs_check import ObservationError, check_observation, message_limit
from robocompose.real_robot.ranges import OutOfRange, RangeCheck, UnsafeActions, check_actions
from robocompose.real_robot.wire import WireError, pack, unpack

log = logging.getLogger(__name__)
SIGNAL_GRACE_S = 0.3  # on SIGINT/SIGTERM: the reply under way gets this long, then the server goes
CLOSE_TIMEOUT_S = 0.5  # a peer that does not answer the closing handshake is dropped after it


def range_check(policy: ServedPolicy, limits: ServerLimits) -> RangeCheck | None:
    """The policy's `training_bounds` checked as `limits` say; None without bounds."""
    bounds = getattr(policy, "training_bounds", None)
    if not bounds:
        return None
    clip = limits.out_of_range == "clip"
    return RangeCheck(bounds, limits.range_factor, clip, limits.action_range_factor)


class PolicyServer:
    """Serve `policy` on ws://host:port (port 0: a free port, read back from `port`), or wss://
    with a `tls` context (`exposure.tls_context`); `max_batch` > 1 batches requests
    (`inference_worker.py`). A frame larger than `max_message_bytes` (None: what the spec's
    largest observation needs, `obs_check.message_limit`) closes the connection with 1009."""

    def __init__(
        self,
        policy: ServedPolicy,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        allow_open: bool = False,
        tls: ssl.SSLContext | None = None,
        limits: ServerLimits | None = None,
        audit: AuditLog | None = None,
        max_batch: int = 1,
        batch_window_s: float = 0.0,
        grace_s: float = 5.0,
        max_message_bytes: int | None = None,
    ) -> None:
        if not 0 <= port <= 65535:
            raise ValueError(f"`port` must be in [0, 65535]. Got {port}.")
        self.api_key = api_key or None
        check_exposure(host, self.api_key, allow_open)
        self.policy = policy
        self.host, self.port, self.tls = host, port, tls
        self.limits = limits or ServerLimits()
        self.audit = audit or AuditLog(None)
        self.grace_s = grace_s
        self.max_message_bytes = max_message_bytes or message_limit(policy.spec)
        self.stats = {"connections": 0, "replies": 0, "errors": 0, "refused": 0}
        self.open_connections = 0
        self._metadata = pack(policy.spec.to_metadata())
        self._ranges = range_check(policy, self.limits)
        self._worker = InferenceWorker(
            policy, self.limits.deadline_s, max_batch=max_batch, batch_window_s=batch_window_s
        )
        self._thread: LoopThread | None = None

    @property
    def address(self) -> str:
        return f"{'wss' if self.tls else 'ws'}://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.running

    @property
    def in_flight(self) -> int:
        """Requests handed to the inference worker and not yet answered."""
        return self._worker.in_flight

    def healthy(self) -> bool:
        """False while an inference runs past its deadline (/healthz then answers 503)."""
        return not self._worker.stuck

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self, timeout_s: float = 10.0) -> PolicyServer:
        """Serve on a background thread; returns once the socket listens (errors re-raised)."""
        if self.running:
            raise RuntimeError(f"server already running on {self.address}.")
        self._thread = LoopThread(self._serve, "policy server")
        failure = self._thread.start(timeout_s)
        if isinstance(failure, PortInUse):
            raise failure
        if failure is not None:
            raise OSError(f"policy server could not listen on {self.address}: {failure}")
        return self

    def serve_forever(self, on_ready: Callable[[PolicyServer], None] | None = None) -> None:
        """Serve on this thread until SIGINT or SIGTERM, then shut down within a second;
        `on_ready(self)` runs once the socket listens (e.g. to print the port)."""
        grace_s = min(self.grace_s, SIGNAL_GRACE_S)
        run_until_signal(lambda ready, stopping: self._serve(ready, stopping, on_ready, grace_s))

    def stop(self, timeout_s: float = 10.0) -> None:
        """Graceful shutdown: stop listening, let inference under way reply (up to
        `grace_s`), close every connection with code 1001 (going away), join."""
        if self._thread is not None:
            self._thread.stop(timeout_s)
            self._thread = None

    def __enter__(self) -> PolicyServer:
        return self if self.running else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _serve(
        self,
        ready: threading.Event,
        stopping: asyncio.Event,
        on_ready: Callable[[PolicyServer], None] | None = None,
        grace_s: float | None = None,
    ) -> None:
        self._worker.open()
        listening = False
        try:
            async with serve(
                self._handle,
                self.host,
                self.port,
                process_request=Gate(self.api_key, self.healthy, self.audit),
                compression=None,
                max_size=self.max_message_bytes,
                ssl=self.tls,
                close_timeout=CLOSE_TIMEOUT_S,
            ) as server:
                listening = True
                self.port = server.sockets[0].getsockname()[1]
                log.info("serving %s", self.address)
                self.audit.write("listening", address=self.address, key=self.api_key is not None)
                ready.set()
                if on_ready is not None:
                    on_ready(self)
                await stopping.wait()
                server.close(close_connections=False)  # stop listening
                await self._worker.drain(self.grace_s if grace_s is None else grace_s)
                self._worker.close()  # what is still unanswered gets an error reply
                await asyncio.gather(
                    *(c.close(1001, "server shutting down") for c in list(server.connections))
                )
                await server.wait_closed()
        except OSError as e:
            if listening or e.errno != errno.EADDRINUSE:
                raise
            raise PortInUse(self.host, self.port) from None
        finally:
            self._worker.close()
            if listening:
                log.info("stopped %s", self.address)
                self.audit.write("stopped", address=self.address)
                self.audit.close()

    # -- protocol ------------------------------------------------------------------------------
    async def _handle(self, connection: ServerConnection) -> None:
        peer = peer_name(connection.remote_address)
        if self.open_connections >= self.limits.max_connections:
            reason = f"server full: {self.open_connections} connections (limits.max_connections)"
            await self._refuse(connection, peer, CLOSE_FULL, reason)
            return
        self.open_connections += 1
        self.stats["connections"] += 1
        self.audit.write("connected", peer=peer)
        try:
            await connection.send(self._metadata)
            await self._serve_requests(connection, peer)
        except ConnectionClosed:  # a client left
            pass
        finally:
            self.open_connections -= 1
            self.audit.write("closed", peer=peer, code=connection.close_code)

    async def _serve_requests(self, connection: ServerConnection, peer: str) -> None:
        """Reply to each request until the client leaves or breaks a limit."""
        limits, rate = self.limits, RequestRate(self.limits.max_rate_hz)
        while True:
            try:
                message = await asyncio.wait_for(connection.recv(), limits.idle_timeout_s)
            except TimeoutError:
                reason = f"idle for {limits.idle_timeout_s:g} s (limits.idle_timeout_s)"
                await self._refuse(connection, peer, CLOSE_IDLE, reason)
                return
            if not rate.allow():
                reason = f"over {limits.max_rate_hz:g} requests/s (limits.max_rate_hz)"
                await self._refuse(connection, peer, CLOSE_RATE, reason)
                return
            await connection.send(await self._reply(message, peer))

    async def _refuse(self, connection: ServerConnection, peer: str, code: int, why: str) -> None:
        self.stats["refused"] += 1
        log.warning("closed %s (%d): %s", peer, code, why)
        self.audit.write("refused", peer=peer, code=code, reason=why)
        await connection.close(code, why)

    def _checked(self, message: str | bytes, peer: str) -> dict[str, Any]:
        """The observation as the policy takes it (clipped into range when so configured)."""
        if isinstance(message, str):
            raise WireError("got a text frame; send the observation as msgpack bytes.")
        obs = check_observation(unpack(message), self.policy.spec)
        if self._ranges is None:
            return obs
        obs, clipped = self._ranges.inputs(obs)
        if clipped:
            log.warning("clipped %s of %s into the training range", clipped, peer)
            self.audit.write("clipped", peer=peer, keys=clipped)
        return obs

    async def _reply(self, message: str | bytes, peer: str) -> str | bytes:
        """The reply frame: msgpack bytes, or text naming the error (openpi clients raise it)."""
        received = time.perf_counter()
        try:
            obs = self._checked(message, peer)
        except (WireError, ObservationError) as e:
            return self._error(peer, "malformed observation", str(e))
        except OutOfRange as e:
            return self._error(peer, "input out of range", str(e))
        try:
            result, timing = await self._worker.infer(obs, received)
            check_actions(result, self.policy.spec, self._ranges)
            timing["total_ms"] = 1000 * (time.perf_counter() - received)
            reply = pack({**result, "server_timing": timing})
        except (DeadlineExceeded, WorkerClosed) as e:
            return self._error(peer, "inference not answered", str(e))
        except UnsafeActions as e:
            return self._error(peer, "unsafe actions, not sent", str(e))
        except ValueError as e:  # the policy refuses this request: the client's to fix, one line
            return self._error(peer, "inference failed", f"{type(e).__name__}: {e}")
        except Exception as e:  # a failing policy must not take the server down
            log.exception("inference failed")
            return self._error(peer, "inference failed", f"{type(e).__name__}: {e}")
        self.stats["replies"] += 1
        return reply

    def _error(self, peer: str, kind: str, text: str) -> str:
        self.stats["errors"] += 1
        log.warning("%s: %s", kind, text)
        self.audit.write("error", peer=peer, kind=kind)
        return f"{kind}: {text}"

"""The websocket transport: one `ServedPolicy` served in openpi's protocol (`wire.py`'s msgpack).

    <- on connect: metadata, PolicySpec.to_metadata()
    -> observation             <- {"actions": (chunk, A), ..., "server_timing": {...}}
    -> malformed observation   <- a text frame naming the problem; the connection stays open

Plain HTTP (`/healthz`, the API key) is answered by `http_gate.py`; the policy runs on
`inference_worker.py`'s thread, which times it (`server_timing`; `total_ms` is message in to
reply out, without the send); `loop_thread.py` runs the server in the background or until a
signal. `stop()` stops listening, lets the inference under way reply (for at most `grace_s`),
then closes every connection with code 1001 (going away). A taken port raises `ports.PortInUse`.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import threading
import time
from collections.abc import Callable

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from robocompose.real_robot.base import ServedPolicy
from robocompose.real_robot.http_gate import gate
from robocompose.real_robot.inference_worker import InferenceWorker
from robocompose.real_robot.loop_thread import LoopThread, run_until_signal
from robocompose.real_robot.obs_check import ObservationError, check_observation
from robocompose.real_robot.ports import PortInUse
from robocompose.real_robot.wire import WireError, pack, unpack

log = logging.getLogger(__name__)
MAX_MESSAGE_BYTES = 64 * 2**20


class PolicyServer:
    """Serve `policy` on ws://host:port (port 0: a free port, read back from `port`)."""

    def __init__(
        self,
        policy: ServedPolicy,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        grace_s: float = 5.0,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        if not 0 <= port <= 65535:
            raise ValueError(f"`port` must be in [0, 65535]. Got {port}.")
        self.policy = policy
        self.host, self.port = host, port
        self.api_key = api_key or None
        self.grace_s = grace_s
        self.max_message_bytes = max_message_bytes
        self.stats = {"connections": 0, "replies": 0, "errors": 0}
        self._metadata = pack(policy.spec.to_metadata())
        self._worker = InferenceWorker(policy)
        self._thread: LoopThread | None = None

    @property
    def address(self) -> str:
        return f"ws://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.running

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
        """Serve on this thread until SIGINT or SIGTERM, then shut down gracefully;
        `on_ready(self)` runs once the socket listens (e.g. to print the port)."""
        run_until_signal(lambda ready, stopping: self._serve(ready, stopping, on_ready))

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
    ) -> None:
        self._worker.open()
        listening = False
        try:
            async with serve(
                self._handle,
                self.host,
                self.port,
                process_request=lambda connection, request: gate(connection, request, self.api_key),
                compression=None,
                max_size=self.max_message_bytes,
            ) as server:
                listening = True
                self.port = server.sockets[0].getsockname()[1]
                log.info("serving %s", self.address)
                ready.set()
                if on_ready is not None:
                    on_ready(self)
                await stopping.wait()
                server.close(close_connections=False)  # stop listening
                await self._worker.drain(self.grace_s)
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

    # -- protocol ------------------------------------------------------------------------------
    async def _handle(self, connection: ServerConnection) -> None:
        self.stats["connections"] += 1
        try:
            await connection.send(self._metadata)
            async for message in connection:
                await connection.send(await self._reply(message))
        except ConnectionClosed:  # a client left
            pass

    async def _reply(self, message: str | bytes) -> str | bytes:
        """The reply frame: msgpack bytes, or text naming the error (openpi clients raise it)."""
        received = time.perf_counter()
        try:
            if isinstance(message, str):
                raise WireError("got a text frame; send the observation as msgpack bytes.")
            obs = check_observation(unpack(message), self.policy.spec)
        except (WireError, ObservationError) as e:
            return self._error(f"malformed observation: {e}")
        try:
            result, timing = await self._worker.infer(obs, received)
            timing["total_ms"] = 1000 * (time.perf_counter() - received)
            self.stats["replies"] += 1
            return pack({**result, "server_timing": timing})
        except Exception as e:  # a failing policy must not take the server down
            log.exception("inference failed")
            return self._error(f"inference failed: {type(e).__name__}: {e}")

    def _error(self, text: str) -> str:
        self.stats["errors"] += 1
        log.warning("%s", text)
        return text

"""The policy server: one `ServedPolicy` behind a websocket, in openpi's wire protocol.

    connect (header `Authorization: Api-Key <key>` when the server has a key)
    <- metadata: PolicySpec.to_metadata(), msgpack
    -> observation (msgpack)      <- {"actions": (chunk, A), ..., "server_timing": {...}}
    -> malformed observation      <- a text frame naming the problem; the connection stays open
    GET /healthz                  <- HTTP 200 "OK"

Inference runs on one worker thread, so the event loop keeps answering health checks and other
connections while a chunk is sampled; calls from every connection are serialised (one policy).
`server_timing` holds `infer_ms` (the policy's call), `queue_ms` (the wait for the worker),
`delay_ms` and `stall_ms` (time a fault wrapper injected, 0 without one) and `total_ms` (message
in to reply out, without the send); a policy whose reply carries `server_timing` entries of its
own (`faults.injectors.LatencyInjector`) replaces those. `stop()` stops listening, lets the
inference under way reply (for at most `grace_s`), then closes every connection with code 1001
(going away). Faults (a slow, stalled or crashed server) are wrappers in `faults/`.
"""

from __future__ import annotations

import asyncio
import errno
import hmac
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from pathlib import Path
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from robocompose.real_robot.base import ServedPolicy
from robocompose.real_robot.obs_check import ObservationError, check_observation
from robocompose.real_robot.wire import WireError, pack, unpack

log = logging.getLogger(__name__)
HEALTH_PATH = "/healthz"
MAX_MESSAGE_BYTES = 64 * 2**20


class PortInUse(OSError):
    """The server's port is taken: which port, what holds it when that can be read, and how to
    pick another."""

    def __init__(self, host: str, port: int) -> None:
        holder = port_holder(port)
        held = f"held by {holder}" if holder else "in use"
        super().__init__(
            errno.EADDRINUSE,
            f"port {port} on {host} is {held}; pick another with --port N (or --port 0 for "
            "any free port, printed when it listens).",
        )

    def __str__(self) -> str:
        return str(self.strerror)


def port_holder(port: int) -> str | None:
    """The process listening on TCP `port` as "pid N (command)", read from /proc (Linux; only
    processes this user may inspect); None when it cannot be told."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    for fd_dir in Path("/proc").glob("[0-9]*/fd") if inodes else ():
        try:
            if any(os.readlink(fd) in inodes for fd in fd_dir.iterdir()):
                raw = (fd_dir.parent / "cmdline").read_bytes().replace(b"\0", b" ")
                command = " ".join(raw.decode(errors="replace").split())
                return f"pid {fd_dir.parent.name} ({command[:80]})"
        except OSError:  # gone, or another user's
            continue
    return None


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
        self._lock = threading.Lock()  # one inference at a time, whoever asks
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Server | None = None
        self._stopping: asyncio.Event | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._in_flight = 0

    @property
    def address(self) -> str:
        return f"ws://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self, timeout_s: float = 10.0) -> PolicyServer:
        """Serve on a background thread; returns once the socket listens (errors re-raised)."""
        if self.running:
            raise RuntimeError(f"server already running on {self.address}.")
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            try:
                asyncio.run(self._serve(ready))
            except BaseException as e:  # noqa: BLE001 - handed to the starting thread
                failure.append(e)
                ready.set()

        self._thread = threading.Thread(target=run, name="policy-server", daemon=True)
        self._thread.start()
        if not ready.wait(timeout_s):
            raise TimeoutError(f"policy server did not start within {timeout_s} s.")
        if failure:
            self._thread.join()
            if isinstance(failure[0], PortInUse):
                raise failure[0]
            raise OSError(f"policy server could not listen on {self.address}: {failure[0]}")
        return self

    def serve_forever(self, on_ready: Callable[[PolicyServer], None] | None = None) -> None:
        """Serve on this thread until SIGINT or SIGTERM, then shut down gracefully;
        `on_ready(self)` runs once the socket listens (e.g. to print the port)."""
        asyncio.run(self._serve(threading.Event(), install_signals=True, on_ready=on_ready))

    def stop(self, timeout_s: float = 10.0) -> None:
        """Graceful shutdown: stop listening, let inference under way reply (up to
        `grace_s`), close every connection with code 1001 (going away), join."""
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and self.running:
            loop.call_soon_threadsafe(stopping.set)
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                raise TimeoutError(f"policy server did not stop within {timeout_s} s.")
            self._thread = None

    def __enter__(self) -> PolicyServer:
        return self if self.running else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _serve(
        self,
        ready: threading.Event,
        install_signals: bool = False,
        on_ready: Callable[[PolicyServer], None] | None = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._in_flight = 0
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="policy-infer")
        if install_signals:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._loop.add_signal_handler(sig, self._stopping.set)
        listening = False
        try:
            async with serve(
                self._handle,
                self.host,
                self.port,
                process_request=self._process_request,
                compression=None,
                max_size=self.max_message_bytes,
            ) as server:
                listening = True
                self._server = server
                self.port = server.sockets[0].getsockname()[1]
                log.info("serving %s", self.address)
                ready.set()
                if on_ready is not None:
                    on_ready(self)
                await self._stopping.wait()
                server.close(close_connections=False)  # stop listening
                await self._drain()
                await asyncio.gather(
                    *(c.close(1001, "server shutting down") for c in list(server.connections))
                )
                await server.wait_closed()
        except OSError as e:
            if listening or e.errno != errno.EADDRINUSE:
                raise
            raise PortInUse(self.host, self.port) from None
        finally:
            self._server = None
            self._executor.shutdown(wait=False, cancel_futures=True)
            if listening:
                log.info("stopped %s", self.address)

    async def _drain(self) -> None:
        """Wait (at most `grace_s`) for the inference under way to reply."""
        deadline = time.monotonic() + self.grace_s
        while self._in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    # -- protocol ------------------------------------------------------------------------------
    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        if request.path.split("?")[0] == HEALTH_PATH:
            return connection.respond(HTTPStatus.OK, "OK\n")
        if self.api_key is not None:
            given = request.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Api-Key {self.api_key}".encode()):
                log.warning("refused %s: missing or wrong API key", connection.remote_address)
                return connection.respond(
                    HTTPStatus.UNAUTHORIZED,
                    "missing or wrong API key: send the header `Authorization: Api-Key <key>`\n",
                )
        return None

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
        assert self._loop is not None and self._executor is not None
        self._in_flight += 1
        try:
            result, timing = await self._loop.run_in_executor(
                self._executor, self._infer, obs, received
            )
            timing["total_ms"] = 1000 * (time.perf_counter() - received)
            self.stats["replies"] += 1
            return pack({**result, "server_timing": timing})
        except Exception as e:  # a failing policy must not take the server down
            log.exception("inference failed")
            return self._error(f"inference failed: {type(e).__name__}: {e}")
        finally:
            self._in_flight -= 1

    def _error(self, text: str) -> str:
        self.stats["errors"] += 1
        log.warning("%s", text)
        return text

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

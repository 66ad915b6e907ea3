"""The robot-side client of a policy server speaking openpi's wire protocol (ours or another).

    client = PolicyClient("ws://gpu-box:8000", api_key=...)   # waits for the server, bounded
    client.spec                # PolicySpec from the server's metadata (robocompose servers)
    reply = client.infer(obs)  # {"actions": (chunk, A), "server_timing": ..., "client_timing": ...}

Unlike openpi's client it never waits forever: connecting retries with exponential backoff up to
`connect_timeout_s` and then raises `ConnectionError`; a reply that takes longer than
`timeout_s` raises `TimeoutError` and drops the connection (a late reply must not be read as the
answer to the next observation); a dropped connection is re-opened on the next call. An error
reply (a text frame) raises `PolicyServerError`, a `RuntimeError` as in openpi's client. A
wss:// address is verified against the system's certificates, or `ca_file` (a self-signed
server's certificate, say).
"""

from __future__ import annotations

import ssl
import threading
import time
import urllib.error
import urllib.request
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.sync.client import ClientConnection, connect

from robocompose.real_robot.base import PolicySpec
from robocompose.real_robot.http_gate import HEALTH_PATH
from robocompose.real_robot.wire import pack, unpack


class PolicyServerError(RuntimeError):
    """The server answered an observation with an error (malformed observation, failed call)."""


class AuthenticationError(PermissionError):
    """The server refused the connection: missing or wrong API key (HTTP 401/403)."""


def _uri(address: str, port: int | None) -> str:
    uri = address if address.startswith(("ws://", "wss://")) else f"ws://{address}"
    return uri if port is None else f"{uri}:{port}"


def _tls(uri: str, ca_file: str | None) -> ssl.SSLContext | None:
    """The client's TLS context for a wss:// `uri` (None for ws://)."""
    if not uri.startswith("wss://"):
        if ca_file is not None:
            raise ValueError(f"`ca_file` is for a wss:// address. Got {uri}.")
        return None
    return ssl.create_default_context(cafile=ca_file)


class PolicyClient:
    """A synchronous, thread-safe client; `infer` may be called from any one thread at a time."""

    def __init__(
        self,
        address: str = "127.0.0.1",
        port: int | None = None,
        *,
        api_key: str | None = None,
        timeout_s: float = 10.0,
        connect_timeout_s: float = 10.0,
        backoff_s: float = 0.05,
        max_backoff_s: float = 1.0,
        ca_file: str | None = None,
    ) -> None:
        for name, value in (("timeout_s", timeout_s), ("connect_timeout_s", connect_timeout_s)):
            if value <= 0:
                raise ValueError(f"`{name}` must be > 0. Got {value}.")
        if not 0 < backoff_s <= max_backoff_s:
            raise ValueError(
                f"`backoff_s` must be in (0, max_backoff_s={max_backoff_s}]. Got {backoff_s}."
            )
        self.uri = _uri(address, port)
        self._tls = _tls(self.uri, ca_file)
        self.api_key = api_key
        self.timeout_s, self.connect_timeout_s = timeout_s, connect_timeout_s
        self.backoff_s, self.max_backoff_s = backoff_s, max_backoff_s
        self.reconnects = 0
        self._lock = threading.Lock()
        self._ws: ClientConnection | None = None
        self.metadata: dict[str, Any] = {}
        with self._lock:
            self._connect()

    @property
    def spec(self) -> PolicySpec:
        """The robocompose policy spec; a ValueError for servers that send other metadata."""
        return PolicySpec.from_metadata(self.metadata)

    def _open(self) -> ClientConnection:
        headers = {"Authorization": f"Api-Key {self.api_key}"} if self.api_key else None
        ws = connect(
            self.uri,
            additional_headers=headers,
            ssl=self._tls,
            compression=None,
            max_size=None,
            open_timeout=self.connect_timeout_s,
            close_timeout=1.0,
        ).__enter__()  # kept open across calls; websockets >= 17.1 warns unless entered
        try:
            first = ws.recv(timeout=self.timeout_s)
            if isinstance(first, str):
                raise PolicyServerError(f"server {self.uri} sent text instead of metadata: {first}")
            metadata = unpack(first)
            if not isinstance(metadata, dict):
                raise PolicyServerError(f"server {self.uri} metadata is not a map: {metadata!r}")
        except BaseException:
            ws.close()
            raise
        self.metadata = metadata
        return ws

    def _connect(self) -> None:
        """Open the connection, retrying with backoff for at most `connect_timeout_s`."""
        deadline = time.monotonic() + self.connect_timeout_s
        delay, last = self.backoff_s, None
        while True:
            try:
                self._ws = self._open()
                return
            except InvalidStatus as e:
                status = e.response.status_code
                if status in (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN):
                    raise AuthenticationError(
                        f"{self.uri} refused the connection (HTTP {status}): missing or wrong "
                        "API key."
                    ) from None
                last = e
            except (OSError, TimeoutError, WebSocketException) as e:
                last = e
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ConnectionError(
                    f"could not reach the policy server at {self.uri} within "
                    f"{self.connect_timeout_s} s: {type(last).__name__}: {last}"
                ) from None
            time.sleep(min(delay, remaining))
            delay = min(2 * delay, self.max_backoff_s)

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        """Send one observation, return the reply; reconnects (bounded) if the link dropped."""
        payload = pack(obs)
        with self._lock:
            for attempt in range(2):
                if self._ws is None:
                    self._connect()
                    self.reconnects += 1  # counted once the link is back
                assert self._ws is not None
                start = time.perf_counter()
                try:
                    self._ws.send(payload)
                    reply = self._ws.recv(timeout=self.timeout_s)
                except TimeoutError:
                    self._drop()
                    raise TimeoutError(
                        f"no reply from {self.uri} within {self.timeout_s} s."
                    ) from None
                except (ConnectionClosed, OSError) as e:
                    self._drop()
                    if attempt == 1:
                        raise ConnectionError(
                            f"the connection to {self.uri} dropped again after reconnecting: {e}"
                        ) from None
                    continue
                break
        round_trip_ms = 1000 * (time.perf_counter() - start)
        if isinstance(reply, str):
            raise PolicyServerError(f"Error in inference server:\n{reply}")
        result = unpack(reply)
        if not isinstance(result, dict):
            raise PolicyServerError(f"reply from {self.uri} is not a map: {type(result)}.")
        result["client_timing"] = {"round_trip_ms": round_trip_ms}
        return result

    def healthy(self, timeout_s: float = 1.0) -> bool:
        """Whether the server answers HTTP 200 on /healthz within `timeout_s` (503: an inference
        is stuck past its deadline)."""
        scheme, netloc, *_ = urlsplit(self.uri)
        url = urlunsplit(("https" if scheme == "wss" else "http", netloc, HEALTH_PATH, "", ""))
        try:
            with urllib.request.urlopen(url, timeout=timeout_s, context=self._tls) as response:
                return response.status == HTTPStatus.OK
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def reset(self) -> None:
        """Nothing to reset on the wire (openpi's protocol has no reset message)."""

    def _drop(self) -> None:
        if self._ws is not None:
            self._ws.close()
            self._ws = None

    def close(self) -> None:
        with self._lock:
            self._drop()

    def __enter__(self) -> PolicyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

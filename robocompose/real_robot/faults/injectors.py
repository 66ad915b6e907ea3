"""The faults themselves, as wrappers around real parts: a policy that is slow or stalls, a
server that crashes and comes back, chunks corrupted, observations malformed, a network that
drops every connection, waypoints late, corrupted or overrunning the ring.

The websocket server knows none of this: `FaultyServer` is a real `PolicyServer` serving a
`LatencyInjector` around the policy, seen by clients through a loopback `TcpRelay` whose
listener `kill()` closes (every connection cut without a close handshake, the port refusing)
and `start()` opens again on the same port.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import threading
import time
from typing import Any

import numpy as np

from robocompose.real_robot.base import ServedPolicy
from robocompose.real_robot.control import ControlProcess
from robocompose.real_robot.websocket_server import PolicyServer

STALL_S = 2.0  # how long the server_stalled fault holds every inference
LATE_S = 0.1  # how late the late_waypoints fault delivers each schedule
OUT_OF_RANGE_OFFSET_M = np.array([0.5, -0.5, 0.4])  # far outside every workspace box


class LatencyInjector:
    """A served policy made slower: `delay_s` before every inference, and `stall(duration_s)`
    holding every inference that starts before then. Each reply's `server_timing` says what was
    injected (`delay_ms`, `stall_ms`) and `infer_ms` without the stall."""

    def __init__(self, policy: ServedPolicy, delay_s: float = 0.0) -> None:
        if delay_s < 0:
            raise ValueError(f"`delay_s` must be >= 0. Got {delay_s}.")
        self.policy, self.delay_s = policy, delay_s
        self.spec = policy.spec
        self.training_bounds = getattr(policy, "training_bounds", None)
        self._stall_until = 0.0

    def stall(self, duration_s: float) -> None:
        """Hold every inference that starts before `duration_s` from now until then."""
        self._stall_until = time.monotonic() + duration_s

    def reset(self) -> None:
        self.policy.reset()

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        stall_s = max(0.0, self._stall_until - time.monotonic())
        time.sleep(stall_s)
        start = time.perf_counter()
        time.sleep(self.delay_s)
        result = self.policy.infer(obs)
        infer_ms = 1000 * (time.perf_counter() - start)
        if not isinstance(result, dict):
            return result  # the server names the problem
        timing = {"infer_ms": infer_ms, "delay_ms": 1000 * self.delay_s, "stall_ms": 1000 * stall_s}
        return {**result, "server_timing": timing}


class FaultyServer:
    """A `PolicyServer` of `policy` with the server faults: `delay_s` and `stall()` (through a
    `LatencyInjector`) and `kill()` (a crash: every connection dropped without a close
    handshake, nothing listening; `start()` brings it back on the same port). `stop()` is the
    server's graceful stop. Clients connect to `address`, the relay in front of the server.
    `running`: clients can connect."""

    def __init__(
        self, policy: ServedPolicy, *, delay_s: float = 0.0, host: str = "127.0.0.1", **server: Any
    ) -> None:
        self.injector = LatencyInjector(policy, delay_s)
        self.server = PolicyServer(self.injector, host=host, **server)
        self.host, self.port = host, 0
        self.relay: TcpRelay | None = None

    @property
    def address(self) -> str:
        return f"ws://{self.host}:{self.port}"

    @property
    def stats(self) -> dict[str, int]:
        return self.server.stats

    @property
    def running(self) -> bool:
        return self.relay is not None and self.server.running

    def start(self) -> FaultyServer:
        if not self.server.running:
            self.server.start()
        self.relay = TcpRelay(self.server.port, self.host, listen_port=self.port)
        self.port = self.relay.port
        return self

    def stall(self, duration_s: float) -> None:
        self.injector.stall(duration_s)

    def kill(self) -> None:
        """Crash: connections cut, port closed; the inference under way replies to no one (the
        server behind the relay finishes it and stays up for `start()`)."""
        if self.relay is not None:
            self.relay.close()
            self.relay = None

    def stop(self) -> None:
        """The server's graceful stop, then the relay's; also after `kill()`."""
        self.server.stop()
        if self.relay is not None:
            self.relay.close()
            self.relay = None

    def __enter__(self) -> FaultyServer:
        return self if self.running else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class CorruptingPolicy:
    """A real served policy whose chunks are corrupted while `active` is set: NaN in the
    positions ("nan") or moved far outside the workspace with the gripper beyond its range
    ("out_of_range"). It carries no `training_bounds`, so the server checks only that a chunk
    is finite: out-of-range chunks reach the robot's safety layer, which the fault exercises."""

    def __init__(self, policy: ServedPolicy, kind: str) -> None:
        if kind not in ("nan", "out_of_range"):
            raise ValueError(f"`kind` must be 'nan' or 'out_of_range'. Got {kind!r}.")
        self.policy, self.kind = policy, kind
        self.spec = policy.spec
        self.active = threading.Event()
        self.corrupted = 0

    def reset(self) -> None:
        self.policy.reset()

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        result = self.policy.infer(obs)
        if not self.active.is_set():
            return result
        actions = np.array(result["actions"], dtype=np.float32)
        if self.kind == "nan":
            actions[::2, :3] = np.nan
        else:
            actions[:, :3] += OUT_OF_RANGE_OFFSET_M.astype(np.float32)
            actions[:, 3:] *= 4.0
        self.corrupted += 1
        return {**result, "actions": actions}


class MalformingSource:
    """A chunk source that, while `active`, sends observations one history frame short."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.active = threading.Event()
        self.malformed = 0

    def __call__(self, obs: dict[str, Any]) -> np.ndarray:
        if self.active.is_set():
            self.malformed += 1
            obs = {
                k: v[1:] if isinstance(v, np.ndarray) and v.ndim >= 2 else v for k, v in obs.items()
            }
        return self.source(obs)


class TcpRelay:
    """A loopback TCP relay to `target_port` (listening on `listen_port`, 0: any free port);
    `cut(duration_s)` severs every connection and refuses new ones for that long (a network
    outage the server does not see); `close()` severs them and stops listening."""

    def __init__(self, target_port: int, host: str = "127.0.0.1", listen_port: int = 0) -> None:
        self.host, self.target_port = host, target_port
        self._listener = socket.create_server((host, listen_port))
        self._listener.settimeout(0.05)
        self.port = self._listener.getsockname()[1]
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._cut_until = 0.0
        self._quit = threading.Event()
        self.cuts = 0
        self._thread = threading.Thread(target=self._accept, name="tcp-relay", daemon=True)
        self._thread.start()

    def cut(self, duration_s: float) -> None:
        self._cut_until = time.monotonic() + duration_s
        self.cuts += 1
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for sock in pair:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def close(self) -> None:
        self._quit.set()
        self._thread.join(timeout=2)
        self.cut(0.0)
        self._listener.close()

    def _accept(self) -> None:
        while not self._quit.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if time.monotonic() < self._cut_until:
                client.close()
                continue
            try:
                upstream = socket.create_connection((self.host, self.target_port), timeout=2)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while True:
                ready, _, _ = select.select([a, b], [], [], 0.2)
                if self._quit.is_set():
                    return
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    (b if sock is a else a).sendall(data)
        except (OSError, ValueError):
            return
        finally:
            for sock in (a, b):
                sock.close()


class FaultyControl:
    """Wraps a `ControlProcess`'s scheduling with the waypoint faults while `active` is set."""

    def __init__(self, control: ControlProcess, fault: str) -> None:
        self.control, self.fault = control, fault
        self.active = threading.Event()
        self.corrupted = 0
        self._schedule = control.schedule
        control.schedule = self.schedule  # type: ignore[method-assign]

    def schedule(
        self, times_s: np.ndarray, positions_m: np.ndarray, grippers: np.ndarray | None = None
    ) -> None:
        if not self.active.is_set():
            self._schedule(times_s, positions_m, grippers)
            return
        self.corrupted += 1
        if self.fault == "late_waypoints":
            late = threading.Timer(LATE_S, self._schedule, (times_s, positions_m, grippers))
            late.daemon = True
            late.start()
        elif self.fault == "nan_waypoints":
            self._schedule(times_s, np.full_like(positions_m, np.nan), grippers)
        elif self.fault == "out_of_range_waypoints":
            grips = None if grippers is None else grippers + 3.0
            self._schedule(times_s, positions_m + OUT_OF_RANGE_OFFSET_M, grips)
        elif self.fault == "ring_overrun":  # the reader stalls while the writer laps it
            repeats = self.control.config.capacity // len(times_s) + 2
            os.kill(self.control.pid, signal.SIGSTOP)  # type: ignore[arg-type]
            try:
                for _ in range(repeats):
                    self._schedule(times_s, positions_m, grippers)
            finally:
                os.kill(self.control.pid, signal.SIGCONT)  # type: ignore[arg-type]

"""Fault injection for the deploy loop on loopback with the twin: what breaks, what the arm got.

Each fault is injected into real parts while a real episode runs (policy server, client, twin,
safety layer, executor, deploy loop):

- server_killed: the server drops every connection and stops listening, then comes back;
- server_stalled: every inference is held for 2 s;
- nan_actions / out_of_range_actions: the served policy's chunks are corrupted for a while
  (`CorruptingPolicy` wraps the real policy);
- connection_dropped: a TCP relay between client and server cuts every connection and refuses
  new ones for a while (`TcpRelay`), the server never notices;
- malformed_observation: requests go out with a wrong history length for a while; the server
  answers with an error naming the key and keeps serving.

`RecordingArm` sits between the safety layer and the twin and records every command and hold the
arm received, so a report checks what reached the arm, not what the loop meant to send.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from robocompose.real_robot.base import Arm, ArmState, ServedPolicy
from robocompose.real_robot.deploy import DeployLoop, twin_observer
from robocompose.real_robot.drivers.twin import TwinArm
from robocompose.real_robot.executor import ChunkExecutor, ExecutorConfig
from robocompose.real_robot.safety import SafetyLayer
from robocompose.real_robot.safety_limits import SafetyLimits, twin_limits
from robocompose.real_robot.steplog import JsonlWriter

FAULTS = (
    "server_killed",
    "server_stalled",
    "nan_actions",
    "out_of_range_actions",
    "connection_dropped",
    "malformed_observation",
)
STALL_S = 2.0
OUT_OF_RANGE_OFFSET_M = np.array([0.5, -0.5, 0.4])  # far outside every workspace box
TOLERANCE_M = 1e-9


class RecordingArm(Arm):
    """Passes everything to `arm` and records what it received: ("ee", t, pos, gripper),
    ("hold", t), ("stop", t)."""

    def __init__(self, arm: Arm) -> None:
        self.arm = arm
        self.received: list[tuple] = []
        self._lock = threading.Lock()

    def _note(self, *entry: Any) -> None:
        with self._lock:
            self.received.append((entry[0], time.monotonic(), *entry[1:]))

    def read_state(self) -> ArmState:
        return self.arm.read_state()

    def command_ee(self, pos_m: np.ndarray, gripper: float | None = None) -> None:
        self._note("ee", np.array(pos_m, dtype=np.float64), gripper)
        self.arm.command_ee(pos_m, gripper)

    def hold(self) -> None:
        self._note("hold")
        self.arm.hold()

    def stop(self) -> None:
        self._note("stop")
        self.arm.stop()

    def close(self) -> None:
        self.arm.close()


def limit_violations(received: list[tuple], limits: SafetyLimits, period_s: float) -> list[str]:
    """Every received command outside `limits`: box, gripper range, finiteness, and the step
    from the previous command (no hold between) above max_step_m or max_speed * period."""
    low, high = np.array(limits.workspace_low_m), np.array(limits.workspace_high_m)
    max_step = min(limits.max_step_m, limits.max_speed_m_s * period_s) + TOLERANCE_M
    problems, previous = [], None
    for entry in received:
        if entry[0] != "ee":
            previous = None
            continue
        _, t, pos, grip = entry
        if pos.shape != (3,) or not np.all(np.isfinite(pos)):
            problems.append(f"t={t:.3f}: target {pos} is not a finite (3,) vector")
            continue
        if np.any(pos < low - TOLERANCE_M) or np.any(pos > high + TOLERANCE_M):
            problems.append(f"t={t:.3f}: target {pos.round(4)} outside the workspace box")
        lo, hi = limits.gripper_range
        if grip is not None and not lo <= grip <= hi:
            problems.append(f"t={t:.3f}: gripper {grip} outside [{lo}, {hi}]")
        if previous is not None and np.linalg.norm(pos - previous) > max_step:
            problems.append(f"t={t:.3f}: step {np.linalg.norm(pos - previous):.4f} m > {max_step}")
        previous = pos
    return problems


def hold_latencies_ms(received: list[tuple], after_s: float) -> list[float]:
    """For each hold after `after_s` that follows a command: ms from that last command."""
    latencies, last_command = [], None
    for kind, t, *_ in received:
        if kind == "ee":
            last_command = t
        elif kind == "hold" and last_command is not None:
            if t >= after_s:
                latencies.append(1000 * (t - last_command))
            last_command = None
    return latencies


class CorruptingPolicy:
    """A real served policy whose chunks are corrupted while `active` is set: NaN in the
    positions ("nan") or moved far outside the workspace with the gripper beyond its range
    ("out_of_range")."""

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
    """A loopback TCP relay to `target_port`; `cut(duration_s)` severs every connection and
    refuses new ones for that long (a network outage the server does not see)."""

    def __init__(self, target_port: int, host: str = "127.0.0.1") -> None:
        self.host, self.target_port = host, target_port
        self._listener = socket.create_server((host, 0))
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


@dataclass
class FaultReport:
    """What one injected fault did, and what the arm received."""

    fault: str
    injected: int
    commands: int
    outside_limits: list[str]
    hold_latency_ms: list[float]
    commands_after_fault: int
    reconnects: int
    events: dict[str, int]
    episode: dict[str, Any]
    log: str
    details: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        worst = max(self.hold_latency_ms, default=None)
        return {
            "fault": self.fault,
            "injected": self.injected,
            "commands_outside_limits": len(self.outside_limits),
            "hold_latency_ms_max": None if worst is None else round(worst, 1),
            "resumed": self.commands_after_fault > 0,
            "reconnects": self.reconnects,
        }


@dataclass
class LoopbackRig:
    """A policy served on loopback and the robot side of a deploy, ready for episodes."""

    server: Any  # PolicyServer
    client: Any  # PolicyClient
    twin: TwinArm
    arm: RecordingArm
    layer: SafetyLayer
    executor: ChunkExecutor
    loop: DeployLoop
    log: JsonlWriter
    limits: SafetyLimits
    source: Any
    relay: TcpRelay | None = None

    def close(self) -> None:
        self.executor.close()
        self.layer.close()
        self.client.close()
        if self.relay is not None:
            self.relay.close()
        if self.server.running:
            self.server.stop()
        self.log.close()


def open_rig(
    policy: ServedPolicy,
    log_path: str | Path,
    *,
    executor: ExecutorConfig | None = None,
    time_scale: float = 1.0,
    delay_s: float = 0.0,
    relay: bool = False,
    malforming: bool = False,
    stop_on_success: bool = True,
) -> LoopbackRig:
    """Serve `policy` on a free loopback port (with `delay_s` per inference), connect a client
    (through a `TcpRelay` if asked), and build twin, recorder, safety layer, executor and loop;
    the step log is appended to `log_path`."""
    from robocompose.real_robot.client import PolicyClient
    from robocompose.real_robot.websocket_server import PolicyServer

    executor = executor or ExecutorConfig()
    server = PolicyServer(policy, delay_s=delay_s).start()
    tcp = TcpRelay(server.port) if relay else None
    port = tcp.port if tcp is not None else server.port
    client = PolicyClient(f"127.0.0.1:{port}", timeout_s=5.0, connect_timeout_s=1.0)
    source: Any = lambda obs: client.infer(obs)["actions"]  # noqa: E731
    if malforming:
        source = MalformingSource(source)
    task = str(policy.spec.extra.get("task", "PickPlace"))
    twin = TwinArm(task, time_scale=time_scale)
    arm = RecordingArm(twin)
    limits = twin_limits(task)
    layer = SafetyLayer(arm, limits, control_hz=executor.rate_hz)
    chunks = ChunkExecutor(source, client.spec, executor)
    log = JsonlWriter(Path(log_path))
    loop = DeployLoop(
        arm,
        layer,
        chunks,
        twin_observer(twin),
        log,
        time_scale=time_scale,
        client=client,
        twin=twin,
        stop_on_success=stop_on_success,
    )
    return LoopbackRig(server, client, twin, arm, layer, chunks, loop, log, limits, source, tcp)


def run_fault(
    fault: str,
    served: ServedPolicy,
    out_dir: str | Path,
    *,
    seed: int = 100_000,
    mode: str = "async",
    rate_hz: float = 10.0,
    inject_at_s: float = 1.0,
    outage_s: float = 1.5,
    episode_s: float = 6.0,
) -> FaultReport:
    """One twin episode of `served` through a loopback server with `fault` injected at
    `inject_at_s` for `outage_s` (the stall lasts STALL_S)."""
    if fault not in FAULTS:
        raise ValueError(f"`fault` must be one of {FAULTS}. Got {fault!r}.")
    policy: Any = served
    if fault in ("nan_actions", "out_of_range_actions"):
        policy = CorruptingPolicy(served, fault.removesuffix("_actions"))
    log_path = Path(out_dir) / f"{fault}_{seed}_steps.jsonl"
    log_path.unlink(missing_ok=True)
    rig = open_rig(
        policy,
        log_path,
        executor=ExecutorConfig(mode=mode, rate_hz=rate_hz),
        relay=fault == "connection_dropped",
        malforming=fault == "malformed_observation",
        stop_on_success=False,
    )
    injected: list[float] = []

    def inject() -> None:
        time.sleep(inject_at_s)
        injected.append(time.monotonic())
        if fault == "server_killed":
            rig.server.kill()
            time.sleep(outage_s)
            rig.server.start()
        elif fault == "server_stalled":
            rig.server.stall(STALL_S)
            time.sleep(STALL_S)
        elif fault == "connection_dropped":
            assert rig.relay is not None
            rig.relay.cut(outage_s)
            time.sleep(outage_s)
        else:
            target = policy if isinstance(policy, CorruptingPolicy) else rig.source
            target.active.set()
            time.sleep(outage_s)
            target.active.clear()
        injected.append(time.monotonic())

    injector = threading.Thread(target=inject, name=f"inject-{fault}", daemon=True)
    try:
        injector.start()
        episode = rig.loop.run_episode(seed, episode_s)
        injector.join(timeout=10)
    finally:
        rig.close()
    start, end = injected if len(injected) == 2 else (injected[0], float("inf"))
    received = list(rig.arm.received)
    commands = [e for e in received if e[0] == "ee"]
    details = {"server_errors": rig.server.stats["errors"]}
    if isinstance(policy, CorruptingPolicy):
        details["corrupted_chunks"] = policy.corrupted
    if isinstance(rig.source, MalformingSource):
        details["malformed_requests"] = rig.source.malformed
    return FaultReport(
        fault=fault,
        injected=1,
        commands=len(commands),
        outside_limits=limit_violations(received, rig.limits, rig.layer.period_s),
        hold_latency_ms=hold_latencies_ms(received, after_s=start),
        commands_after_fault=sum(e[1] > end for e in commands),
        reconnects=rig.client.reconnects,
        events=dict(episode["events"]),
        episode=episode,
        log=str(log_path),
        details=details,
    )

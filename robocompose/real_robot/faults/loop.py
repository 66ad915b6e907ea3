"""Fault injection for the deploy loop on loopback with the twin: what breaks, what the arm got.

Each fault is injected into real parts while a real episode runs (policy server, client, twin,
safety layer, executor, deploy loop):

- server_killed: the server drops every connection and stops listening, then comes back
  (`injectors.FaultyServer`);
- server_stalled: every inference is held for `injectors.STALL_S`;
- nan_actions / out_of_range_actions: the served policy's chunks are corrupted for a while
  (`injectors.CorruptingPolicy` wraps the real policy);
- connection_dropped: a TCP relay between client and server cuts every connection and refuses
  new ones for a while (`injectors.TcpRelay`), the server never notices;
- malformed_observation: requests go out with a wrong history length for a while; the server
  answers with an error naming the key and keeps serving.

`report.RecordingArm` sits between the safety layer and the twin and records every command and
hold the arm received, so a report checks what reached the arm, not what the loop meant to send.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robocompose.real_robot.base import ServedPolicy
from robocompose.real_robot.deploy import DeployLoop
from robocompose.real_robot.deploy_io import twin_observer
from robocompose.real_robot.drivers.twin import TwinArm
from robocompose.real_robot.executor import ChunkExecutor, ExecutorConfig
from robocompose.real_robot.faults.injectors import (
    STALL_S,
    CorruptingPolicy,
    FaultyServer,
    MalformingSource,
    TcpRelay,
)
from robocompose.real_robot.faults.report import (
    FaultReport,
    RecordingArm,
    hold_latencies_ms,
    limit_violations,
)
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


@dataclass
class LoopbackRig:
    """A policy served on loopback and the robot side of a deploy, ready for episodes."""

    server: FaultyServer
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

    executor = executor or ExecutorConfig()
    server = FaultyServer(policy, delay_s=delay_s).start()
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

"""What a fault run reports: what reached the arm (recorded by `RecordingArm` in the deploy loop,
read from the telemetry of a control process) and the checks on it (commands outside the
limits, how long after the last command the arm held)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from robocompose.real_robot.base import Arm, ArmState
from robocompose.real_robot.control_config import HOLDING, SENT
from robocompose.real_robot.safety_limits import SafetyLimits

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


def received_from_telemetry(rows: np.ndarray) -> list[tuple]:
    """Telemetry as what the arm received: ("ee", t, pos, gripper) per sent target and ("hold", t)
    when a hold began (the format of `RecordingArm.received`)."""
    received: list[tuple] = []
    holding = True
    for row in rows:
        flags = int(row[10])
        if flags & SENT:
            grip = None if not np.isfinite(row[8]) else float(row[8])
            received.append(("ee", float(row[1]), row[5:8].copy(), grip))
        if flags & HOLDING and not holding:
            received.append(("hold", float(row[1])))
        holding = bool(flags & HOLDING)
    return received


def watchdog_details(log_path: Path) -> dict[str, Any]:
    """From the step log: how long after the last fresh waypoint each watchdog hold began, and
    how many ticks the braking took."""
    silent, braking = [], []
    with open(log_path) as f:
        for line in map(json.loads, f):
            kind = line.get("kind")
            for event in (
                line["events"] if kind == "step" else [line] if kind == "control_event" else []
            ):
                if event.get("event") == "control:watchdog_hold":
                    silent.append(event["silent_ms"])
                elif event.get("event") == "control:held":
                    braking.append(event["braking_ticks"])
    return {"watchdog_silent_ms": silent, "braking_ticks": braking}


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

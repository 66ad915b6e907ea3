"""What the policy process and the control process agree on: the settings (`ControlConfig`), each
arm's default servo rate and what it does when the control process dies, and the layout of the
shared-memory rings and flags (telemetry columns and flag bits, event codes, the state head).
`control.py` starts the process; `control_loop.py` is what runs in it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from robocompose.real_robot.base import Arm
from robocompose.real_robot.safety_limits import SafetyLimits
from robocompose.real_robot.trajectory import INTERPOLATIONS, INVALID_KINDS

ArmFactory = Callable[[], Arm]  # picklable (a module-level function or partial): runs in the child

# The servo rate each arm runs at by default, and why.
DEFAULT_RATES_HZ: dict[str, float] = {
    "twin": 500.0,  # as the UR: dry runs exercise the fastest path
    "ur5e": 500.0,  # the e-Series controller's cycle; servoL/servoJ with servo_time = 2 ms
    "xarm6": 250.0,  # servo mode (mode 1) runs the latest target each 4 ms controller cycle
    "franka": 100.0,  # franky replans (Ruckig) on every takeover; its own 1 kHz loop fills in
}
# What each arm does when the control process dies (nothing streams any more).
ARM_TIMEOUTS: dict[str, str] = {
    "twin": "runs inside the control process: physics stops with it; on its own the twin holds "
    "after `command_timeout_s` without a command, as the UR does",
    "ur5e": "ur-rtde's RTDE input watchdog (`setWatchdog(watchdog_hz)`, kicked by every command "
    "and by `keepalive`) stops the control script once no input arrives for 1 / watchdog_hz",
    "xarm6": "servo mode executes only the latest target: the arm stops at the last one, at most "
    "one tick's step away; the SDK's connection drop leaves it holding there",
    "franka": "libfranka's 1 kHz loop runs inside the control process: the robot detects the "
    "missing packets (communication_constraints_violation) and brakes",
}

TELEMETRY_WIDTH = 14  # [due, start, plan xyz, sent xyz, gripper, flags, ee xyz (measured)]
EVENT_WIDTH = 4  # [time, code, value, value]
SENT, HOLDING, BRAKING, ESTOPPED, CLAMPED = 1, 2, 4, 8, 16  # telemetry flag bits
EVENT_CODES = (
    "late_waypoint",  # value: how late (s)
    "invalid_waypoint",  # value: index into INVALID_KINDS
    "overrun",  # value: waypoints lost
    "torn_read",  # value: records caught mid-write
    "watchdog_hold",  # value: ms since the last fresh waypoint
    "policy_process_gone",
    "estop",  # value: ms from the flag being set to the arm's stop
    "resume",
    "held",  # braking done, the arm holds; value: ticks spent braking
    "arm_error",
    "safety",  # value: index into SAFETY_KINDS
    "ticks_missed",  # value: ticks skipped because the loop was late
)
SAFETY_KINDS = ("workspace", "accel", "speed", "delta", "gripper", "workspace_start", "other")
FLAG_ESTOP, FLAG_QUIT, FLAG_ESTOP_SET_AT = 0, 1, 2  # shared flag words

STATE_HEAD = 8  # [time, ee xyz, gripper, success, score, sim time], then the observation


@dataclass(kw_only=True)
class ControlConfig:
    """The control process's settings.

    Args:
        rate_hz: servo rate (ticks per wall second).
        limits: the safety limits, applied to the interpolated stream per tick.
        interpolation: positions between waypoints, "linear" or "cubic".
        blend_s: a new plan is blended in by time over this long (wall seconds).
        time_scale: the twin's sim seconds per wall second (sim limits use sim time).
        watchdog_ms: brake and hold after this long without a fresh waypoint (None: the limits').
        capacity: waypoint ring size (records).
        spin_s: the busy wait before each deadline (sleep covers the rest).
        cpu: pin the process to this core (None: leave it).
        fifo_priority: SCHED_FIFO priority when permitted (None: the normal scheduler).
        publish_every: publish the arm's state (and the twin's observation) every n ticks.
        obs_dim: the twin's "state" observation size to publish (0: none).
    """

    rate_hz: float
    limits: SafetyLimits
    interpolation: str = "linear"
    blend_s: float = 0.1
    time_scale: float = 1.0
    watchdog_ms: float | None = None
    capacity: int = 1024
    spin_s: float = 0.0003
    cpu: int | None = None
    fifo_priority: int | None = None
    publish_every: int = 1
    obs_dim: int = 0

    def __post_init__(self) -> None:
        if not (np.isfinite(self.rate_hz) and 1.0 <= self.rate_hz <= 1000.0):
            raise ValueError(f"`rate_hz` must be in [1, 1000]. Got {self.rate_hz}.")
        if self.interpolation not in INTERPOLATIONS:
            raise ValueError(
                f"`interpolation` must be one of {INTERPOLATIONS}. Got {self.interpolation!r}."
            )
        if not (np.isfinite(self.time_scale) and self.time_scale > 0):
            raise ValueError(f"`time_scale` must be > 0. Got {self.time_scale}.")
        if self.capacity < 16 or self.publish_every < 1:
            raise ValueError(
                f"`capacity` must be >= 16 and `publish_every` >= 1. Got {self.capacity}, "
                f"{self.publish_every}."
            )

    @property
    def period_s(self) -> float:
        return 1.0 / self.rate_hz

    @property
    def watchdog_s(self) -> float:
        return (self.watchdog_ms or self.limits.watchdog_ms) / 1000.0


@dataclass(frozen=True)
class Rings:
    """The shared-memory segments' names, handed to the child."""

    waypoints: str
    telemetry: str
    events: str
    state: str


def event_line(row: np.ndarray) -> dict[str, Any]:
    """An event record as a log line that says what happened."""
    code = EVENT_CODES[int(row[1])]
    line: dict[str, Any] = {"event": f"control:{code}", "t_s": float(row[0])}
    value = float(row[2])
    if code == "late_waypoint":
        line["late_ms"] = round(1000 * value, 2)
    elif code == "overrun":
        line["lost"] = int(value)
    elif code == "torn_read":
        line["torn"] = int(value)
    elif code == "watchdog_hold":
        line["silent_ms"] = round(value, 1)
    elif code == "estop":
        line["latency_ms"] = round(value, 3)
    elif code == "held":
        line["braking_ticks"] = int(value)
    elif code == "invalid_waypoint":
        line["reason"] = INVALID_KINDS[int(value)]
    elif code == "safety":
        line["kind"] = SAFETY_KINDS[int(value)]
    elif code == "ticks_missed":
        line["ticks"] = int(value)
    return line

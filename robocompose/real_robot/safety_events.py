"""What the safety layer reports, and how it reads untrusted input.

A `SafetyEvent` is one clamp, refusal, watchdog hold or e-stop, with its raw and sent values made
JSON-safe (non-finite numbers become the strings "nan", "inf", "-inf"; input that is not numeric
becomes a short repr). A `CommandResult` is what became of one command.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

REFUSALS = ("shape", "nonfinite", "estop", "joints", "workspace_start", "arm_error")
CLAMPS = ("workspace", "accel", "speed", "delta", "gripper", "joint_range", "joint_delta")
KINDS = (*REFUSALS, *CLAMPS, "watchdog", "estop_engaged")


@dataclass(frozen=True)
class SafetyEvent:
    """One clamp, refusal, watchdog hold or e-stop."""

    time_s: float  # time.monotonic()
    kind: str  # one of KINDS
    reason: str
    raw: Any  # what came in, JSON-safe
    sent: Any  # what went to the arm (None if nothing did), JSON-safe

    def as_dict(self) -> dict[str, Any]:
        return {
            "time_s": self.time_s,
            "kind": self.kind,
            "reason": self.reason,
            "raw": self.raw,
            "sent": self.sent,
        }


@dataclass(frozen=True)
class CommandResult:
    """What became of one command: whether anything reached the arm, what, and why."""

    sent: bool
    target: np.ndarray | None  # the end-effector position (m) or joints (rad) sent
    gripper: float | None
    events: tuple[SafetyEvent, ...]


def to_jsonable(value: Any) -> Any:
    """Numbers, lists of them and None as they are (non-finite floats as strings); anything
    else as a short repr."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, int | float | bool | str) or value is None:
        return value
    return repr(value)[:200]


def as_vector(value: Any, n: int, what: str) -> tuple[np.ndarray | None, str, str]:
    """(vector, "", "") for input that is a finite float (n,), else (None, refusal kind, why)."""
    try:
        vec = np.array(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return None, "shape", f"{what} is not numeric: {type(value).__name__}"
    if vec.shape != (n,):
        return None, "shape", f"{what} must have shape ({n},). Got {vec.shape}."
    if not np.all(np.isfinite(vec)):
        return None, "nonfinite", f"{what} has non-finite entries: {vec.tolist()}"
    return vec, "", ""

"""Per-robot safety limits as data: what the safety layer lets through to each arm.

The real-arm boxes are conservative tabletop volumes in front of the base, in the base frame;
measure your own cell and pass your own `SafetyLimits` (or override fields in the deploy config).
Joint ranges are the manufacturers' published ones (UR5e: +-360 deg on every joint; xArm 6;
Franka Panda / FR3).
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass

from robocompose.sim import gantry
from robocompose.sim.tasks import get_task

TAU = 2 * math.pi


@dataclass(frozen=True)
class SafetyLimits:
    """Limits on commands, in the robot's base frame. Speeds and accelerations are turned into
    per-command bounds with the control period the safety layer is given.

    Args:
        workspace_low_m, workspace_high_m: the box every end-effector target is clipped into.
        max_step_m: largest move between two consecutive end-effector commands.
        max_speed_m_s: largest commanded end-effector speed.
        max_accel_m_s2: largest change of the commanded velocity per second (braking too).
        gripper_range: the gripper command is clipped into it (-1 open .. +1 closed).
        watchdog_ms: with no fresh command for this long, the arm is told to hold.
        joint_low_rad, joint_high_rad: joint targets are clipped into them; None refuses joint
            commands.
        max_joint_step_rad: largest change of any joint between two joint commands.
    """

    workspace_low_m: tuple[float, float, float]
    workspace_high_m: tuple[float, float, float]
    max_step_m: float
    max_speed_m_s: float
    max_accel_m_s2: float
    gripper_range: tuple[float, float] = (-1.0, 1.0)
    watchdog_ms: float = 250.0
    joint_low_rad: tuple[float, ...] | None = None
    joint_high_rad: tuple[float, ...] | None = None
    max_joint_step_rad: float = 0.1

    def __post_init__(self) -> None:
        for name in ("workspace_low_m", "workspace_high_m"):
            box = getattr(self, name)
            if len(box) != 3 or not all(math.isfinite(v) for v in box):
                raise ValueError(f"`{name}` must be 3 finite numbers (x, y, z in m). Got {box}.")
        if not all(
            lo < hi for lo, hi in zip(self.workspace_low_m, self.workspace_high_m, strict=True)
        ):
            raise ValueError(
                "`workspace_low_m` must be below `workspace_high_m` on every axis. "
                f"Got {self.workspace_low_m} and {self.workspace_high_m}."
            )
        for name in (
            "max_step_m",
            "max_speed_m_s",
            "max_accel_m_s2",
            "watchdog_ms",
            "max_joint_step_rad",
        ):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"`{name}` must be a finite number > 0. Got {value}.")
        low, high = self.gripper_range
        if not -1.0 <= low <= high <= 1.0:
            raise ValueError(
                f"`gripper_range` must satisfy -1 <= low <= high <= 1. Got {self.gripper_range}."
            )
        if (self.joint_low_rad is None) != (self.joint_high_rad is None):
            raise ValueError("`joint_low_rad` and `joint_high_rad` must be given together.")
        if self.joint_low_rad is not None and self.joint_high_rad is not None:
            if len(self.joint_low_rad) != len(self.joint_high_rad) or not self.joint_low_rad:
                raise ValueError(
                    "`joint_low_rad` and `joint_high_rad` must have one entry per joint. Got "
                    f"{len(self.joint_low_rad)} and {len(self.joint_high_rad)}."
                )
            if not all(
                lo < hi for lo, hi in zip(self.joint_low_rad, self.joint_high_rad, strict=True)
            ):
                raise ValueError(
                    "`joint_low_rad` must be below `joint_high_rad` for every joint. Got "
                    f"{self.joint_low_rad} and {self.joint_high_rad}."
                )

    @property
    def n_joints(self) -> int | None:
        return None if self.joint_low_rad is None else len(self.joint_low_rad)


def _deg(*values: float) -> tuple[float, ...]:
    return tuple(math.radians(v) for v in values)


ROBOT_LIMITS: dict[str, SafetyLimits] = {
    # The twin's gantry: its whole workspace; the scripted experts peak at 0.48 m/s, 6 m/s^2.
    "twin_gantry": SafetyLimits(
        tuple(gantry.WORKSPACE_LOW),
        tuple(gantry.WORKSPACE_HIGH),
        max_step_m=0.08,
        max_speed_m_s=0.6,
        max_accel_m_s2=8.0,
    ),
    # The twin's PushT pusher: x, y in its workspace; z is ignored by the twin.
    "twin_pusht": SafetyLimits(
        (-0.25, -0.25, 0.0),
        (0.25, 0.25, 0.05),
        max_step_m=0.08,
        max_speed_m_s=0.6,
        max_accel_m_s2=8.0,
    ),
    "ur5e": SafetyLimits(
        (0.25, -0.35, 0.05),
        (0.65, 0.35, 0.6),
        max_step_m=0.03,
        max_speed_m_s=0.25,
        max_accel_m_s2=1.0,
        watchdog_ms=200.0,
        joint_low_rad=(-TAU,) * 6,
        joint_high_rad=(TAU,) * 6,
    ),
    "xarm6": SafetyLimits(
        (0.2, -0.35, 0.05),
        (0.55, 0.35, 0.5),
        max_step_m=0.03,
        max_speed_m_s=0.25,
        max_accel_m_s2=1.0,
        watchdog_ms=200.0,
        joint_low_rad=_deg(-360, -118, -225, -360, -97, -360),
        joint_high_rad=_deg(360, 120, 11, 360, 180, 360),
    ),
    "franka": SafetyLimits(
        (0.3, -0.35, 0.05),
        (0.7, 0.35, 0.6),
        max_step_m=0.03,
        max_speed_m_s=0.25,
        max_accel_m_s2=1.0,
        watchdog_ms=200.0,
        joint_low_rad=(-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973),
        joint_high_rad=(2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973),
    ),
}


def limits_for(robot: str) -> SafetyLimits:
    """The default limits of `robot`; unknown names list the choices and the nearest one."""
    limits = ROBOT_LIMITS.get(robot.lower())
    if limits is None:
        nearest = difflib.get_close_matches(robot.lower(), list(ROBOT_LIMITS), 1)
        hint = f" Did you mean {nearest[0]!r}?" if nearest else ""
        raise ValueError(
            f"no safety limits for robot {robot!r}. Choices: {', '.join(ROBOT_LIMITS)}.{hint}"
        )
    return limits


def twin_limits(task: str) -> SafetyLimits:
    """The twin's limits for a task: PushT's pusher or the gantry."""
    return ROBOT_LIMITS["twin_pusht" if get_task(task).name == "PushT" else "twin_gantry"]

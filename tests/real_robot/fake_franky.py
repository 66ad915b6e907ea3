"""A stand-in for franky's `Robot` and `Gripper` (libfranka's UDP link has no loopback peer here):
recorders that define only methods the real classes have, handed franky's real motion, pose and
state objects. In a control process (a spawned child) `franka_on_fake_robot` swaps them in and
builds the real driver; the robot recorder then appends each motion as a JSON line to the file
named by `fake_rtde.CALL_LOG_ENV`."""

from __future__ import annotations

import os
from typing import Any

import franky
import numpy as np

from tests.real_robot.fake_rtde import CALL_LOG_ENV, CallLog


class FakeRobot:
    def __init__(self, fci_hostname, relative_dynamics_factor=1.0, realtime_config=None):
        self.motions: list = []
        self.pose = franky.Affine(np.array([0.4, 0.0, 0.4]), np.array([1.0, 0.0, 0.0, 0.0]))
        self.q = np.array([0.0, -0.78, 0.0, -2.36, 0.0, 1.57, 0.78])
        self.factor, self.realtime_config = relative_dynamics_factor, realtime_config
        self.stops = 0
        self.log = CallLog(os.environ.get(CALL_LOG_ENV))
        FakeRobot.last = self

    @property
    def current_cartesian_state(self):
        return franky.CartesianState(franky.RobotPose(self.pose))

    @property
    def current_joint_state(self):
        return franky.JointState(self.q)

    def move(self, motion, asynchronous=False, limit_rate=False, cutoff_frequency=100.0):
        self.motions.append((motion, asynchronous))
        self.log.append(("move", type(motion).__name__, _translation(motion), asynchronous))

    def stop(self) -> None:
        self.stops += 1

    def recover_from_errors(self) -> bool:
        return True


def _translation(motion: Any) -> list[float] | None:
    if isinstance(motion, franky.CartesianMotion):
        return [float(v) for v in motion.target.pose.end_effector_pose.translation]
    return None


class FakeGripper:
    def __init__(self, fci_hostname) -> None:
        self.calls: list[tuple] = []
        FakeGripper.last = self

    @property
    def width(self) -> float:
        return 0.02

    @property
    def max_width(self) -> float:
        return 0.08

    def move_async(self, width, speed):
        self.calls.append(("move", width, speed))

    def grasp_async(self, width, speed, force, epsilon_inner=0.005, epsilon_outer=0.005):
        self.calls.append(("grasp", width, speed, force, epsilon_outer))

    def stop(self) -> bool:
        self.calls.append(("stop",))
        return True


def franka_on_fake_robot(rate_hz: float, options: dict[str, Any]) -> Any:
    """In a control process: franky's Robot and Gripper replaced, then the real driver built."""
    from robocompose.real_robot.process_loop import build_driver

    franky.Robot = FakeRobot
    franky.Gripper = FakeGripper
    return build_driver("franka", "172.16.0.2", {"realtime": False, **options}, rate_hz)

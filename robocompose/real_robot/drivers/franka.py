"""Franka Panda / FR3 over franky (franky-control): `Robot`, `Gripper`; metres and quaternions.

Every end-effector command is `robot.move(CartesianMotion(Affine(position, the quaternion read at
connect)), asynchronous=True)`: franky lets the new target take over the running motion
seamlessly, which is what a fixed-rate loop wants; joint commands are `JointMotion`s. franky
refuses to switch the control signal type mid-motion, so keep to one kind of command per run.
`hold` is a stop motion of the running kind (`CartesianStopMotion` / `JointStopMotion`); `stop`
is `robot.stop()` and `gripper.stop()`, after which commands are refused until `reenable()`
(franky's automatic error recovery).

The gripper command maps linearly onto the opening width (`move_async`); at or above
`grasp_threshold` it becomes a grasp (`grasp_async` at width 0 with wide tolerances and
`grasp_force_n`), so an object between the fingers is held with force instead of stalling a move.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from robocompose.real_robot.base import Arm, ArmState, ArmStoppedError
from robocompose.real_robot.drivers import closed_fraction, gripper_command, import_sdk

N_JOINTS = 7


class FrankaDriver(Arm):
    """Args:
    host: the robot's FCI address.
    relative_dynamics_factor: franky's global scale of velocity, acceleration and jerk (0, 1].
    realtime: require a real-time kernel (franky's `RealtimeConfig.Enforce`).
    gripper: connect the Franka Hand.
    gripper_speed_m_s, grasp_force_n, grasp_threshold: see the module docstring.
    gripper_deadband: gripper command changes smaller than this are not sent.
    """

    def __init__(
        self,
        host: str,
        *,
        relative_dynamics_factor: float = 0.1,
        realtime: bool = True,
        gripper: bool = True,
        gripper_speed_m_s: float = 0.05,
        grasp_force_n: float = 20.0,
        grasp_threshold: float = 0.5,
        gripper_deadband: float = 0.02,
    ) -> None:
        if not 0.0 < relative_dynamics_factor <= 1.0:
            raise ValueError(
                f"`relative_dynamics_factor` must be in (0, 1]. Got {relative_dynamics_factor}."
            )
        self.franky: Any = import_sdk("franky", "franky-control")
        modes = self.franky.RealtimeConfig
        config = modes.Enforce if realtime else modes.Ignore
        try:
            self.robot: Any = self.franky.Robot(
                host, relative_dynamics_factor=relative_dynamics_factor, realtime_config=config
            )
            self.gripper: Any = self.franky.Gripper(host) if gripper else None
        except self.franky.Exception as e:
            raise ConnectionError(f"could not connect to the Franka at {host!r}: {e}") from e
        self.gripper_speed_m_s, self.grasp_force_n = gripper_speed_m_s, grasp_force_n
        self.grasp_threshold, self.gripper_deadband = grasp_threshold, gripper_deadband
        pose = self.robot.current_cartesian_state.pose.end_effector_pose
        self.quaternion = np.asarray(pose.quaternion, dtype=np.float64).copy()
        self._gripper: float | None = None
        self._kind = "cartesian"
        self._stopped = False

    # -- the Arm interface -------------------------------------------------------------------
    def read_state(self) -> ArmState:
        pose = self.robot.current_cartesian_state.pose.end_effector_pose
        joints = self.robot.current_joint_state.position
        gripper = -1.0 if self._gripper is None else self._gripper
        if self.gripper is not None:
            gripper = gripper_command(1.0 - float(self.gripper.width) / self.gripper.max_width)
        return ArmState(
            time.monotonic(),
            np.asarray(pose.translation, dtype=np.float64).reshape(3).copy(),
            gripper,
            np.asarray(joints, dtype=np.float64).reshape(-1).copy(),
        )

    def command_ee(self, pos_m: np.ndarray, gripper: float | None = None) -> None:
        self._check_ready()
        target = self.franky.Affine(np.asarray(pos_m, dtype=np.float64).reshape(3), self.quaternion)
        self.robot.move(
            self.franky.CartesianMotion(target, self.franky.ReferenceType.Absolute),
            asynchronous=True,
        )
        self._kind = "cartesian"
        self._command_gripper(gripper)

    def command_joints(self, joints_rad: np.ndarray, gripper: float | None = None) -> None:
        self._check_ready()
        q = np.asarray(joints_rad, dtype=np.float64).reshape(-1)
        if q.shape != (N_JOINTS,):
            raise ValueError(f"`joints_rad` must have {N_JOINTS} entries. Got {q.shape[0]}.")
        self.robot.move(
            self.franky.JointMotion(self.franky.JointState(q), self.franky.ReferenceType.Absolute),
            asynchronous=True,
        )
        self._kind = "joint"
        self._command_gripper(gripper)

    def hold(self) -> None:
        if self._stopped:
            return
        stop = (
            self.franky.CartesianStopMotion()
            if self._kind == "cartesian"
            else self.franky.JointStopMotion()
        )
        self.robot.move(stop, asynchronous=True)

    def stop(self) -> None:
        self._stopped = True
        self.robot.stop()
        if self.gripper is not None:
            self.gripper.stop()

    # -- Franka-only ---------------------------------------------------------------------------
    def reenable(self) -> None:
        """Accept commands again after `stop` (franky's automatic error recovery)."""
        if not self.robot.recover_from_errors():
            raise RuntimeError("the Franka's automatic error recovery failed")
        self._stopped = False

    # -- internals -------------------------------------------------------------------------------
    def _check_ready(self) -> None:
        if self._stopped:
            raise ArmStoppedError("the Franka was stopped: reenable() it before commanding again.")

    def _command_gripper(self, gripper: float | None) -> None:
        if gripper is None or self.gripper is None:
            return
        if self._gripper is not None and abs(gripper - self._gripper) < self.gripper_deadband:
            return
        max_width = float(self.gripper.max_width)
        if gripper >= self.grasp_threshold:
            self.gripper.grasp_async(
                0.0, self.gripper_speed_m_s, self.grasp_force_n, 0.005, max_width
            )
        else:
            width = max_width * (1.0 - closed_fraction(gripper))
            self.gripper.move_async(width, self.gripper_speed_m_s)
        self._gripper = float(gripper)

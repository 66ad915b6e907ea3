"""UFACTORY xArm over `xarm.wrapper.XArmAPI` (xarm-python-sdk): servo mode, mm and degrees.

Connect: clear errors and warnings, enable motion, servo mode (`set_mode(1)`), ready state
(`set_state(0)`), enable the gripper. Every command is `set_servo_cartesian([x, y, z] mm + the
roll/pitch/yaw read at connect, deg)`: the controller executes only the latest one, which is what
a fixed-rate loop wants. The gripper (the xArm Gripper, position in pulses, `gripper_open_pulse`
open .. `gripper_closed_pulse` closed) moves with `set_gripper_position(..., wait=False)` only
when its command changes. `hold` re-sends the current pose; `stop` is the SDK's
`emergency_stop()` (state 4), after which commands are refused until `reenable()`.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from robocompose.real_robot.base import Arm, ArmState, ArmStoppedError
from robocompose.real_robot.drivers import closed_fraction, gripper_command, import_sdk

M_TO_MM = 1000.0
SERVO_MODE = 1
READY_STATE = 0


class XArmError(RuntimeError):
    """An xArm SDK call returned a non-zero code (see the SDK's API code table)."""


class XArmDriver(Arm):
    """Args:
    ip: the controller's address.
    n_joints: 5, 6 or 7 (the joint targets of `command_joints`).
    gripper: an xArm Gripper is attached (False: gripper commands are ignored, reading -1).
    gripper_open_pulse, gripper_closed_pulse: the gripper's pulse range.
    gripper_speed: gripper speed, pulses/s.
    gripper_deadband: gripper command changes smaller than this are not sent.
    """

    def __init__(
        self,
        ip: str,
        *,
        n_joints: int = 6,
        gripper: bool = True,
        gripper_open_pulse: float = 850.0,
        gripper_closed_pulse: float = 0.0,
        gripper_speed: float = 3000.0,
        gripper_deadband: float = 0.02,
    ) -> None:
        if n_joints not in (5, 6, 7):
            raise ValueError(f"`n_joints` must be 5, 6 or 7. Got {n_joints}.")
        wrapper = import_sdk("xarm.wrapper", "xarm-python-sdk")
        self.n_joints = n_joints
        self.has_gripper = gripper
        self.gripper_open_pulse = float(gripper_open_pulse)
        self.gripper_closed_pulse = float(gripper_closed_pulse)
        self.gripper_speed = float(gripper_speed)
        self.gripper_deadband = float(gripper_deadband)
        self.api: Any = wrapper.XArmAPI(ip, is_radian=False)
        if not self.api.connected:
            raise ConnectionError(f"could not connect to the xArm at {ip!r}")
        self._gripper: float | None = None
        self._stopped = False
        self._closed = False
        self.reenable()
        _, pose = self._call("get_position", is_radian=False)
        self.orientation_deg = [float(v) for v in pose[3:6]]

    # -- the Arm interface -------------------------------------------------------------------
    def read_state(self) -> ArmState:
        _, pose = self._call("get_position", is_radian=False)
        _, angles = self._call("get_servo_angle", is_radian=True)
        code, pulse = self.api.get_gripper_position() if self.has_gripper else (-1, None)
        gripper = self._gripper if self._gripper is not None else -1.0
        if code == 0 and pulse is not None:
            span = self.gripper_closed_pulse - self.gripper_open_pulse
            gripper = gripper_command((float(pulse) - self.gripper_open_pulse) / span)
        return ArmState(
            time.monotonic(),
            np.asarray(pose[:3], dtype=np.float64) / M_TO_MM,
            gripper,
            np.asarray(angles[: self.n_joints], dtype=np.float64),
        )

    def command_ee(self, pos_m: np.ndarray, gripper: float | None = None) -> None:
        self._check_ready()
        xyz_mm = [float(v) * M_TO_MM for v in np.asarray(pos_m, dtype=np.float64).reshape(3)]
        self._call("set_servo_cartesian", xyz_mm + self.orientation_deg, is_radian=False)
        self._command_gripper(gripper)

    def command_joints(self, joints_rad: np.ndarray, gripper: float | None = None) -> None:
        self._check_ready()
        joints = [float(v) for v in np.asarray(joints_rad, dtype=np.float64).reshape(-1)]
        if len(joints) != self.n_joints:
            raise ValueError(f"`joints_rad` must have {self.n_joints} entries. Got {len(joints)}.")
        self._call("set_servo_angle_j", joints, is_radian=True)
        self._command_gripper(gripper)

    def hold(self) -> None:
        if self._stopped:
            return
        _, pose = self._call("get_position", is_radian=False)
        self._call("set_servo_cartesian", list(pose[:3]) + self.orientation_deg, is_radian=False)

    def stop(self) -> None:
        self._stopped = True
        self.api.emergency_stop()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.api.disconnect()

    # -- xArm-only ---------------------------------------------------------------------------
    def reenable(self) -> None:
        """Clear errors, enable motion, servo mode, ready state, gripper on: after connect and
        after a stop."""
        self._call("clean_error")
        self._call("clean_warn")
        self._call("motion_enable", enable=True)
        self._call("set_mode", SERVO_MODE)
        self._call("set_state", READY_STATE)
        if self.has_gripper:
            self._call("set_gripper_mode", 0)
            self._call("set_gripper_enable", True)
        self._stopped = False

    # -- internals ---------------------------------------------------------------------------
    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Call an SDK method; raise `XArmError` naming it when its code is not 0."""
        result = getattr(self.api, name)(*args, **kwargs)
        code = result[0] if isinstance(result, tuple) else result
        if code != 0:
            raise XArmError(f"xArm {name}{args} returned code {code}")
        return result

    def _check_ready(self) -> None:
        if self._stopped:
            raise ArmStoppedError("the xArm was stopped: reenable() it before commanding again.")

    def _command_gripper(self, gripper: float | None) -> None:
        if gripper is None or not self.has_gripper:
            return
        if self._gripper is not None and abs(gripper - self._gripper) < self.gripper_deadband:
            return
        span = self.gripper_closed_pulse - self.gripper_open_pulse
        pulse = self.gripper_open_pulse + closed_fraction(gripper) * span
        self._call(
            "set_gripper_position", pulse, wait=False, speed=self.gripper_speed, wait_motion=False
        )
        self._gripper = float(gripper)

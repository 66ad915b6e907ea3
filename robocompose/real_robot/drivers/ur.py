"""Universal Robots (e-Series) over ur-rtde: `RTDEControlInterface` + `RTDEReceiveInterface`.

Poses on the wire are [x, y, z (m), rx, ry, rz (axis-angle, rad)] in the base frame. Every
end-effector command is `servoL(position + the rotation vector read at connect, ...)` with
`servo_time_s` (set it to the control period), `lookahead_time_s` and `gain` as ur-rtde
documents them; joint commands are `servoJ`. `hold` is `servoStop` (decelerate, leave servo
mode; the next command re-enters it); `stop` is `servoStop` at `stop_decel_m_s2` then
`stopScript`, and commands are refused until `reenable()` (which re-uploads the control script).
With `watchdog_hz`, ur-rtde's RTDE input watchdog (`setWatchdog`) stops the control script when
no input (a command, or `keepalive` = `kickWatchdog`) arrives for 1 / watchdog_hz: a control
process that dies leaves the arm stopped, not servoing toward its last target.
A command raises `URError` when the controller reports a protective or emergency stop.

The gripper: ur-rtde drives no gripper itself; with `gripper_tool_output` set, the gripper
command switches that tool digital output through `RTDEIOInterface` (closed = on), the usual
wiring of a pneumatic or electric two-state gripper. Without it gripper commands are ignored (the
first one logs a warning) and the reading is the last command.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from robocompose.real_robot.base import Arm, ArmState, ArmStoppedError
from robocompose.real_robot.drivers import import_sdk

logger = logging.getLogger(__name__)

N_JOINTS = 6
# what read_state and the stop checks read (`-1.0`: the SDK picks the controller's rate)
RECEIVE_VARIABLES = [
    "timestamp",
    "actual_TCP_pose",
    "actual_q",
    "safety_status_bits",
    "safety_mode",
]
UNUSED_SPEED, UNUSED_ACCEL = 0.25, 1.0  # servoL/servoJ take them but ur-rtde ignores them


class URError(RuntimeError):
    """The UR controller refused a command or is in a stop."""


class URDriver(Arm):
    """Args:
    host: the controller's address.
    servo_time_s: how long each servo target is tracked (the control period).
    lookahead_time_s: servo smoothing, [0.03, 0.2] s.
    gain: servo proportional gain, [100, 2000].
    stop_decel_m_s2: deceleration of `stop`; `hold_decel_m_s2` of `hold`.
    gripper_tool_output: tool digital output wired to the gripper, or None.
    watchdog_hz: the least input rate the controller accepts before it stops (None: no watchdog).
    """

    def __init__(
        self,
        host: str,
        *,
        servo_time_s: float = 0.1,
        lookahead_time_s: float = 0.1,
        gain: float = 300.0,
        hold_decel_m_s2: float = 2.0,
        stop_decel_m_s2: float = 10.0,
        gripper_tool_output: int | None = None,
        watchdog_hz: float | None = None,
    ) -> None:
        if not 0.002 <= servo_time_s <= 1.0:
            raise ValueError(f"`servo_time_s` must be in [0.002, 1]. Got {servo_time_s}.")
        if not 0.03 <= lookahead_time_s <= 0.2:
            raise ValueError(f"`lookahead_time_s` must be in [0.03, 0.2]. Got {lookahead_time_s}.")
        if not 100 <= gain <= 2000:
            raise ValueError(f"`gain` must be in [100, 2000]. Got {gain}.")
        control = import_sdk("rtde_control", "ur-rtde")
        receive = import_sdk("rtde_receive", "ur-rtde")
        self.servo_time_s, self.lookahead_time_s, self.gain = servo_time_s, lookahead_time_s, gain
        self.hold_decel_m_s2, self.stop_decel_m_s2 = hold_decel_m_s2, stop_decel_m_s2
        try:
            self.receive: Any = receive.RTDEReceiveInterface(host, -1.0, RECEIVE_VARIABLES)
            self.control: Any = control.RTDEControlInterface(host)
        except RuntimeError as e:
            raise ConnectionError(f"could not connect to the UR controller at {host!r}: {e}") from e
        self.io: Any = None
        self.gripper_tool_output = gripper_tool_output
        if gripper_tool_output is not None:
            self.io = import_sdk("rtde_io", "ur-rtde").RTDEIOInterface(host)
        self.watchdog_hz = watchdog_hz
        if watchdog_hz is not None:
            self._expect("setWatchdog", self.control.setWatchdog(float(watchdog_hz)))
        self.rotvec = [float(v) for v in self.receive.getActualTCPPose()[3:6]]
        self._gripper = -1.0
        self._warned_gripper = False
        self._stopped = False
        self._closed = False

    # -- the Arm interface -------------------------------------------------------------------
    def read_state(self) -> ArmState:
        pose = self.receive.getActualTCPPose()
        joints = self.receive.getActualQ()
        return ArmState(
            time.monotonic(),
            np.asarray(pose[:3], dtype=np.float64),
            self._gripper,
            np.asarray(joints, dtype=np.float64),
        )

    def command_ee(self, pos_m: np.ndarray, gripper: float | None = None) -> None:
        self._check_ready()
        pose = [float(v) for v in np.asarray(pos_m, dtype=np.float64).reshape(3)] + self.rotvec
        self._expect("servoL", self.control.servoL(pose, *self._servo_args()))
        self._command_gripper(gripper)

    def command_joints(self, joints_rad: np.ndarray, gripper: float | None = None) -> None:
        self._check_ready()
        q = [float(v) for v in np.asarray(joints_rad, dtype=np.float64).reshape(-1)]
        if len(q) != N_JOINTS:
            raise ValueError(f"`joints_rad` must have {N_JOINTS} entries. Got {len(q)}.")
        self._expect("servoJ", self.control.servoJ(q, *self._servo_args()))
        self._command_gripper(gripper)

    def hold(self) -> None:
        if not self._stopped:
            self._expect("servoStop", self.control.servoStop(self.hold_decel_m_s2))

    def stop(self) -> None:
        self._stopped = True
        self.control.servoStop(self.stop_decel_m_s2)
        self.control.stopScript()

    def keepalive(self) -> None:
        """Kick ur-rtde's watchdog while no command is sent (a hold)."""
        if self.watchdog_hz is not None and not self._stopped:
            self.control.kickWatchdog()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.control.disconnect()
            self.receive.disconnect()
            if self.io is not None:
                self.io.disconnect()

    # -- UR-only -------------------------------------------------------------------------------
    def reenable(self) -> None:
        """Accept commands again after `stop` (re-uploads ur-rtde's control script)."""
        self._expect("reuploadScript", self.control.reuploadScript())
        self._stopped = False

    # -- internals -------------------------------------------------------------------------------
    def _check_ready(self) -> None:
        if self._stopped:
            raise ArmStoppedError("the UR arm was stopped: reenable() it before commanding again.")
        if self.receive.isProtectiveStopped() or self.receive.isEmergencyStopped():
            raise URError(
                f"the UR controller is in a stop (safety mode {self.receive.getSafetyMode()})"
            )

    def _servo_args(self) -> tuple[float, float, float, float, float]:
        """speed, acceleration, time, lookahead time, gain: servoL/servoJ's trailing arguments."""
        return UNUSED_SPEED, UNUSED_ACCEL, self.servo_time_s, self.lookahead_time_s, self.gain

    @staticmethod
    def _expect(call: str, ok: bool) -> None:
        if not ok:
            raise URError(f"the UR controller refused {call} (is the control script running?)")

    def _command_gripper(self, gripper: float | None) -> None:
        if gripper is None:
            return
        if self.io is None or self.gripper_tool_output is None:
            if not self._warned_gripper:
                logger.warning("UR: no `gripper_tool_output` set; gripper commands are ignored")
                self._warned_gripper = True
            self._gripper = float(gripper)
            return
        closed = gripper > 0.0
        if closed != (self._gripper > 0.0):
            self._expect(
                "setToolDigitalOut", self.io.setToolDigitalOut(self.gripper_tool_output, closed)
            )
        self._gripper = 1.0 if closed else -1.0

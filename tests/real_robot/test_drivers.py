"""The vendor drivers against the installed SDKs, with only the connection to an arm replaced.

- xArm (pure Python SDK): the real `XArmAPI` connects over TCP to a fake controller on a loopback
  address, port 502, that speaks the controller's private Modbus-TCP framing; the SDK's own
  connect handshake, packing and parsing all run.
- UR: the real `RTDEReceiveInterface` (C++) connects to a fake RTDE server on loopback port 30004
  and parses its data packages. `RTDEControlInterface` and `RTDEIOInterface` need ur-rtde's
  URScript program running on a controller, so there the lowest replaceable level is the binding
  class itself: recorders checked to define only methods the real classes have, with the real
  parameter counts.
- franky (C++, libfranka's UDP protocol): `Robot` and `Gripper` are replaced by recorders checked
  the same way; the motion, pose and state objects passed through them are franky's real ones.

Connecting to a loopback address where nothing listens runs each SDK's real network code and
must raise a clear error naming the address.
"""

from __future__ import annotations

import re
import socket
import struct
import sys
import threading
import time
from dataclasses import replace

import numpy as np
import pytest

from robocompose.real_robot.base import ArmStoppedError
from robocompose.real_robot.drivers import make_arm
from robocompose.real_robot.drivers.twin import TwinArm
from robocompose.real_robot.safety import SafetyLayer
from robocompose.real_robot.safety_limits import limits_for
from tests.real_robot.fake_rtde import (
    PROTECTIVE_STOP_BITS,
    RECORDERS,
    UR_POSE,
    UR_Q,
    FakeRTDEControl,
    FakeRTDEController,
    FakeRTDEIO,
    assert_speaks,
    loopback_host,
)

# against the wall clock: `make test` runs these on their own, after the parallel pass
pytestmark = pytest.mark.realtime

# -- xArm: a fake controller on loopback TCP ------------------------------------------------------

XARM_REG = {
    "GET_VERSION": 1,
    "GET_ROBOT_SN": 2,
    "SET_STATE": 12,
    "GET_STATE": 13,
    "GET_ERROR": 15,
    "SET_MODE": 19,
    "MOVE_SERVOJ": 29,
    "MOVE_SERVO_CART": 30,
    "GET_TCP_POSE": 41,
    "GET_JOINT_POS": 42,
    "RS485_RTU": 124,
    "TGPIO_R16B": 128,
}
GRIPPER_BAUD_INDEX = 11  # 2 Mbaud in the SDK's baud table: the gripper's default


class FakeXArmController:
    """The controller side of xArm's private Modbus-TCP: 6-byte header (transaction, protocol,
    length, big-endian), function code, parameters; replies add a state byte. fp32 values are
    little-endian; the gripper is reached by Modbus-RTU frames passed through RS485."""

    def __init__(self) -> None:
        self.host = loopback_host()
        self.server = socket.create_server((self.host, 502))
        self.pose = [300.0, 0.0, 200.0, np.pi, 0.0, 0.0]  # mm, rad
        self.joints = [0.0] * 7
        self.state, self.mode, self.gripper_pulse = 0, 0, 850
        self.requests: list[tuple[int, bytes]] = []
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def calls(self, name: str) -> list[bytes]:
        return [params for code, params in self.requests if code == XARM_REG[name]]

    def close(self) -> None:
        self.server.close()
        for conn in self._conns:
            conn.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buffer = b""
        while True:
            try:
                chunk = conn.recv(4096)
            except OSError:
                return
            if not chunk:
                return
            buffer += chunk
            while len(buffer) >= 6:
                trans, prot, length = struct.unpack(">HHH", buffer[:6])
                if len(buffer) < 6 + length:
                    break
                body, buffer = buffer[6 : 6 + length], buffer[6 + length :]
                if prot not in (2, 3):  # 1: the SDK's heartbeat
                    continue
                self.requests.append((body[0], body[1:]))
                payload = self._answer(body[0], body[1:])
                header = struct.pack(">HHHBB", trans, prot, len(payload) + 2, body[0], 0)
                conn.sendall(header + payload)

    def _answer(self, code: int, params: bytes) -> bytes:
        reg = XARM_REG
        if code == reg["GET_VERSION"]:
            return b"6,1,XI1304,AC1303,v2.6.0".ljust(40, b"\0")
        if code == reg["GET_ROBOT_SN"]:
            return b"XI130400000000".ljust(40, b"\0")
        if code == reg["GET_STATE"]:
            return bytes([self.state])
        if code == reg["GET_ERROR"]:
            return bytes(2)
        if code == reg["GET_TCP_POSE"]:
            return struct.pack("<6f", *self.pose)
        if code == reg["GET_JOINT_POS"]:
            return struct.pack("<7f", *self.joints)
        if code == reg["TGPIO_R16B"]:
            return struct.pack(">i", GRIPPER_BAUD_INDEX)
        if code == reg["RS485_RTU"]:
            return self._gripper(params)
        if code == reg["SET_STATE"]:
            self.state = params[0]
        elif code == reg["SET_MODE"]:
            self.mode = params[0]
        elif code == reg["MOVE_SERVO_CART"]:
            self.pose = list(struct.unpack("<9f", params[:36])[:6])
        elif code == reg["MOVE_SERVOJ"]:
            self.joints = list(struct.unpack("<10f", params[:40])[:7])
        return b""

    def _gripper(self, params: bytes) -> bytes:
        """Modbus-RTU to the gripper: 0x10 writes registers (two of them: the target), 0x03
        reads them (two: the position)."""
        host, device, function = params[0], params[1], params[2]
        _, count = struct.unpack(">HH", params[3:7])
        if function == 0x10:
            if count == 2:
                self.gripper_pulse = struct.unpack(">i", params[8:12])[0]
            return bytes([host, device, function]) + params[3:7]
        value = struct.pack(">i", self.gripper_pulse) if count == 2 else bytes(2 * count)
        return bytes([host, device, function, 2 * count]) + value


@pytest.fixture
def xarm_controller():
    pytest.importorskip("xarm.wrapper", reason="xarm-python-sdk (extra `arms`) not installed")
    try:
        controller = FakeXArmController()
    except PermissionError:
        pytest.skip("binding port 502 needs root; the fake xArm controller cannot listen")
    yield controller
    controller.close()


def test_xarm_connects_and_maps_commands_to_servo_mode(xarm_controller) -> None:
    arm = make_arm("xarm6", ip=xarm_controller.host)
    assert xarm_controller.mode == 1 and xarm_controller.state == 0  # servo mode, ready
    state = arm.read_state()
    np.testing.assert_allclose(state.ee_pos_m, [0.3, 0.0, 0.2], atol=1e-6)
    assert state.gripper == pytest.approx(-1.0)  # 850 pulses: open

    arm.command_ee(np.array([0.31, -0.02, 0.25]), 1.0)
    x, y, z, roll, pitch, yaw = xarm_controller.pose
    np.testing.assert_allclose([x, y, z], [310.0, -20.0, 250.0], atol=1e-3)  # mm on the wire
    np.testing.assert_allclose([roll, pitch, yaw], [np.pi, 0.0, 0.0], atol=1e-5)  # kept
    assert xarm_controller.gripper_pulse == 0  # closed
    np.testing.assert_allclose(arm.read_state().ee_pos_m, [0.31, -0.02, 0.25], atol=1e-6)
    assert arm.read_state().gripper == pytest.approx(1.0)

    n_gripper = len(xarm_controller.calls("RS485_RTU"))
    arm.command_ee(np.array([0.31, -0.02, 0.25]), 0.995)  # inside the deadband: not sent
    assert len(xarm_controller.calls("RS485_RTU")) == n_gripper

    arm.command_joints(np.array([0.1, -0.2, 0.3, 0.0, 0.5, -0.6]))
    np.testing.assert_allclose(xarm_controller.joints[:6], [0.1, -0.2, 0.3, 0.0, 0.5, -0.6], 1e-6)
    with pytest.raises(ValueError, match="6 entries. Got 7"):
        arm.command_joints(np.zeros(7))
    arm.close()


def test_xarm_hold_stop_and_reenable(xarm_controller) -> None:
    arm = make_arm("xarm6", ip=xarm_controller.host)
    arm.command_ee(np.array([0.35, 0.0, 0.2]))
    n_servo = len(xarm_controller.calls("MOVE_SERVO_CART"))
    arm.hold()  # re-sends the pose the arm reports
    assert len(xarm_controller.calls("MOVE_SERVO_CART")) == n_servo + 1
    np.testing.assert_allclose(xarm_controller.pose[:3], [350.0, 0.0, 200.0], atol=1e-3)
    arm.stop()
    assert xarm_controller.state == 4  # the SDK's emergency stop state
    with pytest.raises(ArmStoppedError, match="reenable"):
        arm.command_ee(np.array([0.3, 0.0, 0.2]))
    arm.reenable()
    assert xarm_controller.state == 0
    arm.command_ee(np.array([0.3, 0.0, 0.2]))
    arm.close()
    arm.close()  # idempotent


def test_xarm_behind_the_safety_layer_gets_only_limited_targets(xarm_controller) -> None:
    limits = replace(limits_for("xarm6"), watchdog_ms=5000.0)
    layer = SafetyLayer(make_arm("xarm6", ip=xarm_controller.host), limits, control_hz=10.0)
    result = layer.command_ee([0.9, 0.0, 0.3], 5.0)  # far outside the box and the gripper range
    assert result.sent
    assert {e.kind for e in result.events} >= {"workspace", "gripper"}
    x_mm = xarm_controller.pose[0]
    assert 300.0 < x_mm <= 300.0 + 1000 * limits.max_step_m + 1e-3
    assert not layer.command_ee([np.nan, 0.0, 0.3]).sent
    layer.close()


def test_xarm_without_a_gripper_sends_no_gripper_frames(xarm_controller) -> None:
    arm = make_arm("xarm6", ip=xarm_controller.host, gripper=False)
    arm.command_ee(np.array([0.3, 0.0, 0.2]), 1.0)
    assert arm.read_state().gripper == -1.0
    assert xarm_controller.calls("RS485_RTU") == [] and xarm_controller.calls("TGPIO_R16B") == []
    arm.close()


def test_xarm_unreachable_controller_raises() -> None:
    pytest.importorskip("xarm.wrapper", reason="xarm-python-sdk (extra `arms`) not installed")
    with pytest.raises(Exception, match="connect"):
        make_arm("xarm6", ip=loopback_host())


# -- UR: the real RTDE receive interface against a fake controller; control and IO replaced ------


@pytest.fixture
def ur(monkeypatch):
    """A fake RTDE controller on loopback; the control and IO binding classes replaced."""
    control = pytest.importorskip("rtde_control", reason="ur-rtde (extra `arms`) not installed")
    io = pytest.importorskip("rtde_io", reason="ur-rtde (extra `arms`) not installed")
    assert_speaks(FakeRTDEControl, control.RTDEControlInterface)
    assert_speaks(FakeRTDEIO, io.RTDEIOInterface)
    monkeypatch.setattr(control, "RTDEControlInterface", FakeRTDEControl)
    monkeypatch.setattr(io, "RTDEIOInterface", FakeRTDEIO)
    controller = FakeRTDEController()
    yield controller
    controller.close()


def wait_until(condition, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_ur_maps_commands_to_servo_calls(ur) -> None:
    arm = make_arm("ur5e", host=ur.host, servo_time_s=0.02, gripper_tool_output=0)
    control, io = RECORDERS["control"], RECORDERS["io"]
    state = arm.read_state()  # streamed by RTDE, parsed by ur-rtde
    np.testing.assert_allclose(state.ee_pos_m, UR_POSE[:3])
    np.testing.assert_allclose(state.joints_rad, UR_Q)

    arm.command_ee(np.array([0.45, 0.0, 0.25]), 1.0)
    name, pose, servo_time, lookahead, gain = control.calls[-1]
    assert name == "servoL" and servo_time == 0.02 and lookahead == 0.1 and gain == 300.0
    assert pose == pytest.approx([0.45, 0.0, 0.25, *UR_POSE[3:]])  # the rotation at connect
    arm.command_ee(np.array([0.45, 0.0, 0.25]), 0.8)
    arm.command_ee(np.array([0.45, 0.0, 0.25]), -1.0)
    assert io.outputs == [(0, True), (0, False)]  # switched on changes only

    arm.command_joints(np.array(UR_Q))
    assert control.calls[-1][0] == "servoJ" and control.calls[-1][1] == UR_Q
    with pytest.raises(ValueError, match="6 entries. Got 7"):
        arm.command_joints(np.zeros(7))

    ur.set("actual_TCP_pose", [0.5, 0.1, 0.2, *UR_POSE[3:]])
    wait_until(lambda: arm.read_state().ee_pos_m[0] == pytest.approx(0.5))
    arm.close()


def test_ur_hold_stop_refusals(ur, caplog) -> None:
    arm = make_arm("ur5e", host=ur.host)
    control = RECORDERS["control"]
    with caplog.at_level("WARNING"):
        arm.command_ee(np.array([0.4, 0.0, 0.3]), 1.0)
        arm.command_ee(np.array([0.4, 0.0, 0.3]), 1.0)
    assert caplog.text.count("gripper commands are ignored") == 1
    arm.hold()
    assert control.calls[-1] == ("servoStop", 2.0)
    control.accept = False
    with pytest.raises(RuntimeError, match="refused servoL"):
        arm.command_ee(np.array([0.4, 0.0, 0.3]))
    control.accept = True

    ur.set("safety_status_bits", PROTECTIVE_STOP_BITS)
    ur.set("safety_mode", 3)
    wait_until(lambda: arm.receive.isProtectiveStopped())
    with pytest.raises(RuntimeError, match="in a stop"):
        arm.command_ee(np.array([0.4, 0.0, 0.3]))
    ur.set("safety_status_bits", 1)
    wait_until(lambda: not arm.receive.isProtectiveStopped())

    arm.stop()
    assert control.calls[-2:] == [("servoStop", 10.0), ("stopScript",)]
    with pytest.raises(ArmStoppedError):
        arm.command_ee(np.array([0.4, 0.0, 0.3]))
    arm.hold()  # a stopped arm is not restarted by a hold
    assert control.calls[-1] == ("stopScript",)
    arm.reenable()
    arm.command_ee(np.array([0.4, 0.0, 0.3]))
    assert control.calls[-1][0] == "servoL"
    arm.close()
    arm.close()
    assert control.calls.count(("disconnect",)) == 1


def test_ur_bad_arguments_are_named(ur) -> None:
    with pytest.raises(ValueError, match="`lookahead_time_s` must be in \\[0.03, 0.2\\]"):
        make_arm("ur5e", host=ur.host, lookahead_time_s=0.5)
    with pytest.raises(ValueError, match="Did you mean 'ur5e'"):
        make_arm("ur5")


def test_ur_unreachable_controller_raises_with_the_real_sdk() -> None:
    pytest.importorskip("rtde_receive", reason="ur-rtde (extra `arms`) not installed")
    host = loopback_host()
    with pytest.raises(ConnectionError, match=re.escape(host)):
        make_arm("ur5e", host=host)


# -- Franka: franky's Robot and Gripper replaced by recorders ------------------------------------


@pytest.fixture
def franky(monkeypatch):
    franky = pytest.importorskip("franky", reason="franky-control (extra `arms`) not installed")
    from tests.real_robot.fake_franky import FakeGripper, FakeRobot

    assert_speaks(FakeRobot, franky.Robot)
    assert_speaks(FakeGripper, franky.Gripper)
    monkeypatch.setattr(franky, "Robot", FakeRobot)
    monkeypatch.setattr(franky, "Gripper", FakeGripper)
    return franky, FakeRobot, FakeGripper


def test_franka_maps_commands_to_franky_motions(franky) -> None:
    module, robot_cls, gripper_cls = franky
    arm = make_arm("franka", host="172.16.0.2", relative_dynamics_factor=0.2)
    robot, gripper = robot_cls.last, gripper_cls.last
    assert robot.factor == 0.2 and robot.realtime_config == module.RealtimeConfig.Enforce
    state = arm.read_state()
    np.testing.assert_allclose(state.ee_pos_m, [0.4, 0.0, 0.4])
    assert state.gripper == pytest.approx(0.5)  # 2 of 8 cm open
    np.testing.assert_allclose(state.joints_rad, robot.q)

    arm.command_ee(np.array([0.45, 0.05, 0.3]), -1.0)
    motion, asynchronous = robot.motions[-1]
    assert isinstance(motion, module.CartesianMotion) and asynchronous
    target = motion.target.pose.end_effector_pose
    np.testing.assert_allclose(target.translation, [0.45, 0.05, 0.3])
    np.testing.assert_allclose(target.quaternion, [1.0, 0.0, 0.0, 0.0])  # kept from connect
    assert motion.reference_type == module.ReferenceType.Absolute
    assert gripper.calls[-1] == ("move", pytest.approx(0.08), 0.05)
    arm.command_ee(np.array([0.45, 0.05, 0.3]), 1.0)
    assert gripper.calls[-1][:2] == ("grasp", 0.0)  # closing is a grasp

    arm.hold()
    assert isinstance(robot.motions[-1][0], module.CartesianStopMotion)
    arm.command_joints(robot.q)
    motion = robot.motions[-1][0]
    assert isinstance(motion, module.JointMotion)
    np.testing.assert_allclose(motion.target.position, robot.q)
    arm.hold()
    assert isinstance(robot.motions[-1][0], module.JointStopMotion)
    with pytest.raises(ValueError, match="7 entries. Got 6"):
        arm.command_joints(np.zeros(6))


def test_franka_stop_refuses_until_reenabled(franky) -> None:
    _, robot_cls, gripper_cls = franky
    arm = make_arm("franka", host="172.16.0.2")
    arm.stop()
    assert robot_cls.last.stops == 1 and gripper_cls.last.calls[-1] == ("stop",)
    with pytest.raises(ArmStoppedError):
        arm.command_ee(np.array([0.4, 0.0, 0.4]))
    n_motions = len(robot_cls.last.motions)
    arm.hold()
    assert len(robot_cls.last.motions) == n_motions
    arm.reenable()
    arm.command_ee(np.array([0.4, 0.0, 0.4]))


def test_franka_unreachable_robot_raises_with_the_real_sdk() -> None:
    pytest.importorskip("franky", reason="franky-control (extra `arms`) not installed")
    host = loopback_host()
    with pytest.raises(ConnectionError, match=re.escape(host)):
        make_arm("franka", host=host, realtime=False)


def test_make_arm_builds_the_twin_and_names_a_missing_sdk(monkeypatch) -> None:
    twin = make_arm("twin", task="PushT", realtime=False)
    assert isinstance(twin, TwinArm) and twin.spec.name == "PushT"
    twin.close()
    monkeypatch.setitem(sys.modules, "franky", None)  # as if franky-control were not installed
    with pytest.raises(ImportError, match=r"'franky-control' SDK is not installed.*\[arms\]"):
        make_arm("franka", host="172.16.0.2")

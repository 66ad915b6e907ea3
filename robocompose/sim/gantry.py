"""A Cartesian gantry with a parallel gripper: the robot part of the grasping tasks.

The hand is one body with three slide joints (x, y, z), each driven by a position servo (stiffness
`kp` on the actuator, damping on the joint, a force limit) with gravity compensation, so a joint's
qpos is the world coordinate of the grasp point ("ee": midway between the finger pads, at the height
of the pads' centre of grip). Two slide fingers close along y, one position servo each. The hand
has no wrist: a cube squeezed between the flat pads turns square to them by itself.

Action of a task using it, `Box(4,)`: absolute ee target (x, y, z) in metres inside
`WORKSPACE_LOW..WORKSPACE_HIGH`, then the gripper command in [-1, 1] (-1 open, +1 closed),
mapped linearly onto the target finger opening `MAX_OPENING_M..0`.

Geom collision bits: the gripper geoms have contype 2 / conaffinity 1, everything else the MuJoCo
default 1 / 1, so the gripper touches the scene but not itself.
"""

from __future__ import annotations

from typing import NamedTuple

import gymnasium as gym
import mujoco
import numpy as np

WORKSPACE_LOW = np.array([-0.2, -0.2, 0.015])  # ee target bounds (m); tips clear the table
WORKSPACE_HIGH = np.array([0.2, 0.2, 0.25])
MAX_OPENING_M = 0.09  # gap between the finger pads when fully open
PAD_BELOW_EE_M = 0.015  # fingertips reach this far below the ee point
PALM_ABOVE_EE_M = 0.04  # underside of the palm, above the ee point
HOME = np.array([0.0, 0.0, 0.15])

ARM_JOINTS = ("gantry_x", "gantry_y", "gantry_z")
FINGER_JOINTS = ("finger_left", "finger_right")
ACTUATORS = (*ARM_JOINTS, *FINGER_JOINTS)  # one actuator per joint, same names, this order
FINGER_GEOMS = ("finger_left_pad", "finger_right_pad")

ARM_KP, ARM_DAMPING, ARM_FORCE_N = 1000.0, 50.0, 40.0
FINGER_KP, FINGER_DAMPING, FINGER_FORCE_N = 200.0, 5.0, 8.0  # 4 N grip on a 4 cm cube


class GantryMJCF(NamedTuple):
    """MJCF text of the gantry: a `<body>` for `<worldbody>` and the `<actuator>` section."""

    worldbody: str
    actuator: str


def gantry_mjcf() -> GantryMJCF:
    half_open = MAX_OPENING_M / 2
    pad_half_z = (PALM_ABOVE_EE_M + PAD_BELOW_EE_M) / 2
    pad_z = PALM_ABOVE_EE_M - pad_half_z
    pad = (
        f'type="box" size="0.012 0.005 {pad_half_z}" condim="4" friction="1.5 0.02 0.0001"'
        ' solref="0.01 1" contype="2" conaffinity="1" mass="0.05" rgba="0.15 0.15 0.17 1"'
    )
    worldbody = f"""
    <body name="gantry_hand" pos="0 0 0" gravcomp="1">
      <joint name="gantry_x" type="slide" axis="1 0 0" damping="{ARM_DAMPING}"
             range="-0.25 0.25" limited="true"/>
      <joint name="gantry_y" type="slide" axis="0 1 0" damping="{ARM_DAMPING}"
             range="-0.25 0.25" limited="true"/>
      <joint name="gantry_z" type="slide" axis="0 0 1" damping="{ARM_DAMPING}"
             range="0 0.3" limited="true"/>
      <site name="ee" pos="0 0 0" size="0.004" rgba="1 1 0 0"/>
      <geom name="palm" type="box" pos="0 0 {PALM_ABOVE_EE_M + 0.01}" size="0.02 0.065 0.01"
            mass="0.4" contype="2" conaffinity="1" rgba="0.35 0.36 0.4 1"/>
      <geom name="mast" type="cylinder" fromto="0 0 {PALM_ABOVE_EE_M + 0.02} 0 0 0.16"
            size="0.008" mass="0.05" contype="0" conaffinity="0" rgba="0.55 0.56 0.6 1"/>
      <body name="finger_left" pos="0 0 0" gravcomp="1">
        <joint name="finger_left" type="slide" axis="0 1 0" damping="{FINGER_DAMPING}"
               range="0 {half_open}" limited="true"/>
        <geom name="finger_left_pad" pos="0 0.005 {pad_z}" {pad}/>
      </body>
      <body name="finger_right" pos="0 0 0" gravcomp="1">
        <joint name="finger_right" type="slide" axis="0 -1 0" damping="{FINGER_DAMPING}"
               range="0 {half_open}" limited="true"/>
        <geom name="finger_right_pad" pos="0 -0.005 {pad_z}" {pad}/>
      </body>
    </body>"""
    servos = []
    for name, low, high in zip(ARM_JOINTS, WORKSPACE_LOW, WORKSPACE_HIGH, strict=True):
        servos.append(
            f'<position name="{name}" joint="{name}" kp="{ARM_KP}" ctrlrange="{low} {high}"'
            f' forcerange="-{ARM_FORCE_N} {ARM_FORCE_N}" forcelimited="true"/>'
        )
    for name in FINGER_JOINTS:
        servos.append(
            f'<position name="{name}" joint="{name}" kp="{FINGER_KP}" ctrlrange="0 {half_open}"'
            f' forcerange="-{FINGER_FORCE_N} {FINGER_FORCE_N}" forcelimited="true"/>'
        )
    actuator = "<actuator>\n    " + "\n    ".join(servos) + "\n  </actuator>"
    return GantryMJCF(worldbody, actuator)


def action_space() -> gym.spaces.Box:
    """`Box(4,)`: ee target x, y, z (m) in the workspace, gripper command in [-1, 1]."""
    low = np.append(WORKSPACE_LOW, -1.0).astype(np.float32)
    high = np.append(WORKSPACE_HIGH, 1.0).astype(np.float32)
    return gym.spaces.Box(low, high, dtype=np.float32)


class Gantry:
    """Name -> id lookups into a compiled model holding `gantry_mjcf()`, done once by `bind`."""

    def __init__(self, model: mujoco.MjModel) -> None:
        self._arm_qpos = np.array([model.joint(n).qposadr[0] for n in ARM_JOINTS])
        self._finger_qpos = np.array([model.joint(n).qposadr[0] for n in FINGER_JOINTS])
        self._dofs = np.array([model.joint(n).dofadr[0] for n in (*ARM_JOINTS, *FINGER_JOINTS)])
        self._ctrl = np.array([model.actuator(n).id for n in ACTUATORS])
        self.finger_geoms = np.array([model.geom(n).id for n in FINGER_GEOMS])
        self.body_ids = np.array(
            [model.body(n).id for n in ("gantry_hand", "finger_left", "finger_right")]
        )

    def ee_pos(self, data: mujoco.MjData) -> np.ndarray:
        """(3,) grasp point in the world frame, m."""
        return data.qpos[self._arm_qpos].copy()

    def opening(self, data: mujoco.MjData) -> float:
        """Gap between the finger pads, m (0 closed, `MAX_OPENING_M` open)."""
        return float(data.qpos[self._finger_qpos].sum())

    def command(self, data: mujoco.MjData, action: np.ndarray) -> None:
        """Write a (clipped) `Box(4,)` action into the servo targets."""
        xyz = np.clip(action[:3], WORKSPACE_LOW, WORKSPACE_HIGH)
        grip = float(np.clip(action[3], -1.0, 1.0))
        half_gap = 0.25 * MAX_OPENING_M * (1.0 - grip)
        data.ctrl[self._ctrl] = (*xyz, half_gap, half_gap)

    def place(self, data: mujoco.MjData, ee_pos: np.ndarray, grip: float = -1.0) -> None:
        """Teleport the hand to `ee_pos` at rest with fingers at the `grip` command, servos too."""
        self.command(data, np.append(ee_pos, grip))
        data.qpos[self._arm_qpos] = data.ctrl[self._ctrl[:3]]
        data.qpos[self._finger_qpos] = data.ctrl[self._ctrl[3:]]
        data.qvel[self._dofs] = 0.0

    def touching(self, data: mujoco.MjData, geom_ids: np.ndarray) -> bool:
        """Whether a finger pad is in contact with any of `geom_ids`."""
        if data.ncon == 0:
            return False
        pairs = data.contact.geom[: data.ncon]
        finger = np.isin(pairs, self.finger_geoms)
        other = np.isin(pairs, geom_ids)
        return bool(np.any((finger[:, 0] & other[:, 1]) | (finger[:, 1] & other[:, 0])))

"""PushT: push a T-shaped block onto a fixed goal pose with a round, position-controlled pusher.

## Description
The planar pushing task of Diffusion Policy (Chi et al. 2023), rebuilt in MuJoCo. The block slides
on the table with viscous damping and a little Coulomb friction (joint damping and frictionloss on
its planar joints), so it stops soon after the pusher lets go.

## Action space
`Box(-0.25, 0.25, (2,))`: absolute target (x, y) of the pusher in metres; a PD position servo
tracks it (as the pymunk original does).

## Observation space
- `state` (6,): pusher x, y; block x, y (centre of mass); cos and sin of the block yaw.
- `image` (96, 96, 3) uint8, optional: top-down camera.

## Score and success
score = area of the goal T covered by the block / area of the goal T (exact polygon overlap).
success = score >= `success_coverage` (0.95, the Diffusion Policy definition); the episode
terminates at success. reward = score.

## Starting state
Block centre uniform in [-init_xy_range, init_xy_range]^2 (0.12 m), yaw = goal yaw + uniform in
[-init_yaw_range, init_yaw_range] (pi); pusher uniform in 80% of the workspace, clear of the
block. Starts that already cover half the goal are redrawn.

## Episode end
Terminates at success; truncated at 300 steps (30 s) by the registered time limit.

## Version history
- v0: first release.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np

from robocompose.sim.base import MujocoTaskEnv
from robocompose.sim.planar import Rect, shape_overlap

WORKSPACE_M = 0.25
PUSHER_RADIUS_M = 0.015
BAR = (0.12, 0.03)  # width, height of the T's top bar (m)
STEM = (0.03, 0.09)  # width, height of the T's stem (m)
GOAL_POSE = (0.0, 0.0, math.pi / 4)


def t_shape() -> tuple[Rect, ...]:
    """The T as two disjoint rectangles in a frame centred on its centre of mass."""
    bar_area, stem_area = BAR[0] * BAR[1], STEM[0] * STEM[1]
    bar_y, stem_y = BAR[1] / 2, -STEM[1] / 2  # stem hangs below the bar's lower edge at y=0
    com_y = (bar_area * bar_y + stem_area * stem_y) / (bar_area + stem_area)
    return (
        Rect(0.0, bar_y - com_y, BAR[0] / 2, BAR[1] / 2),
        Rect(0.0, stem_y - com_y, STEM[0] / 2, STEM[1] / 2),
    )


T_RECTS = t_shape()
T_AREA = sum(r.area for r in T_RECTS)
T_RADIUS_M = max(
    math.hypot(abs(r.cx) + r.hx, abs(r.cy) + r.hy) for r in T_RECTS
)  # bounding circle around the centre of mass


def _t_geoms(prefix: str, rgba: str, collide: bool) -> str:
    flags = "" if collide else ' contype="0" conaffinity="0"'
    return "\n".join(
        f'<geom name="{prefix}{i}" type="box" pos="{r.cx} {r.cy} 0" size="{r.hx} {r.hy} 0.01"'
        f' rgba="{rgba}"{flags}/>'
        for i, r in enumerate(T_RECTS)
    )


def pusht_xml() -> str:
    gx, gy, gyaw = GOAL_POSE
    return f"""
<mujoco model="pusht">
  <compiler angle="radian"/>
  <option timestep="0.005" gravity="0 0 -9.81"/>
  <visual>
    <global offwidth="512" offheight="512"/>
    <quality shadowsize="0"/>
    <headlight ambient="0.5 0.5 0.5" diffuse="0.4 0.4 0.4" specular="0 0 0"/>
  </visual>
  <default><geom friction="0.5 0.005 0.0001" solref="0.01 1"/></default>
  <worldbody>
    <camera name="top" pos="0 0 0.62" xyaxes="1 0 0 0 1 0" fovy="45"/>
    <geom name="table" type="plane" size="0.3 0.3 0.01" rgba="0.85 0.85 0.82 1"
          contype="0" conaffinity="0"/>
    <body name="goal" pos="{gx} {gy} 0.0005" euler="0 0 {gyaw}">
      {_t_geoms("goal", "0.2 0.75 0.3 0.6", collide=False)}
    </body>
    <body name="block" pos="0 0 0.011">
      <joint name="block_x" type="slide" axis="1 0 0" damping="3" frictionloss="0.05"
             range="-0.24 0.24" limited="true"/>
      <joint name="block_y" type="slide" axis="0 1 0" damping="3" frictionloss="0.05"
             range="-0.24 0.24" limited="true"/>
      <joint name="block_yaw" type="hinge" axis="0 0 1" damping="0.004" frictionloss="0.0002"/>
      {_t_geoms("block", "0.25 0.35 0.6 1", collide=True)}
    </body>
    <body name="pusher" pos="0 0 0.011">
      <joint name="pusher_x" type="slide" axis="1 0 0" damping="20"/>
      <joint name="pusher_y" type="slide" axis="0 1 0" damping="20"/>
      <geom name="pusher" type="cylinder" size="{PUSHER_RADIUS_M} 0.01" mass="0.5"
            rgba="0.85 0.2 0.2 1"/>
    </body>
  </worldbody>
  <actuator>
    <position name="pusher_x" joint="pusher_x" kp="200" forcerange="-30 30"
              forcelimited="true"/>
    <position name="pusher_y" joint="pusher_y" kp="200" forcerange="-30 30"
              forcelimited="true"/>
  </actuator>
</mujoco>
"""


class PushTEnv(MujocoTaskEnv):
    """Push the T-shaped block onto the green goal T. See the module docstring for details."""

    def __init__(
        self,
        *,
        obs_keys: tuple[str, ...] = ("state",),
        image_size: int = 96,
        render_mode: str | None = None,
        success_coverage: float = 0.95,
        init_xy_range: float = 0.12,
        init_yaw_range: float = math.pi,
    ) -> None:
        if not 0.0 < success_coverage <= 1.0:
            raise ValueError(f"`success_coverage` must be in (0, 1]. Got {success_coverage}.")
        self.success_coverage = success_coverage
        self.init_xy_range = init_xy_range
        self.init_yaw_range = init_yaw_range
        super().__init__(
            pusht_xml(), obs_keys=obs_keys, image_size=image_size, render_mode=render_mode
        )
        self.action_space = gym.spaces.Box(-WORKSPACE_M, WORKSPACE_M, (2,), np.float32)

    def _bind(self) -> None:
        self.block_qpos_adr = self.model.joint("block_x").qposadr[0]
        self._pusher_qpos = self.model.joint("pusher_x").qposadr[0]

    def block_pose(self) -> tuple[float, float, float]:
        x, y, yaw = self.data.qpos[self.block_qpos_adr : self.block_qpos_adr + 3]
        return float(x), float(y), float(yaw)

    def pusher_xy(self) -> np.ndarray:
        return self.data.qpos[self._pusher_qpos : self._pusher_qpos + 2].copy()

    def coverage(self) -> float:
        return self.coverage_of(self.block_pose())

    @staticmethod
    def coverage_of(pose: tuple[float, float, float]) -> float:
        """Share of the goal T covered by a block at `pose` = (x, y, yaw)."""
        return shape_overlap(T_RECTS, pose, GOAL_POSE) / T_AREA

    def _apply_action(self, action: np.ndarray) -> None:
        self.data.ctrl[:2] = action

    def _state_obs(self) -> np.ndarray:
        x, y, yaw = self.block_pose()
        return np.array([*self.pusher_xy(), x, y, math.cos(yaw), math.sin(yaw)])

    def _evaluate(self) -> tuple[bool, float]:
        coverage = self.coverage()
        return coverage >= self.success_coverage, coverage

    def _randomize(self, rng: np.random.Generator) -> None:
        while True:
            block = rng.uniform(-self.init_xy_range, self.init_xy_range, 2)
            yaw = GOAL_POSE[2] + rng.uniform(-self.init_yaw_range, self.init_yaw_range)
            pusher = rng.uniform(-0.8 * WORKSPACE_M, 0.8 * WORKSPACE_M, 2)
            self.data.qpos[self.block_qpos_adr : self.block_qpos_adr + 3] = (*block, yaw)
            if np.linalg.norm(pusher - block) > T_RADIUS_M + 3 * PUSHER_RADIUS_M and (
                self.coverage() < 0.5
            ):
                break
        self.data.qpos[self._pusher_qpos : self._pusher_qpos + 2] = pusher
        self.data.ctrl[:2] = pusher

"""PickPlace: pick up a 4 cm cube with a gantry gripper and put it down inside a target disc.

## Description
A table, the Cartesian gantry gripper of `robocompose.sim.gantry`, `n_cubes` identical 4 cm cubes
and a flat green target disc (visual only). With two cubes either one may be brought to the
target (the expert's `cube_choice` says which one its demos take). This module also holds the
tabletop scene shared with `robocompose.sim.stack` (`TabletopEnv`, `tabletop_xml`, `cube_xml`).

Physics: timestep 4 ms (25 substeps per 10 Hz control step), elliptic friction cones with
impratio 10 (grasps do not creep), cubes 50 g with friction 1, finger pads friction 1.5 with
torsional friction (condim 4).

## Action space
`Box(4,)`: absolute ee target (x, y, z) in metres within the gantry workspace
(x, y in [-0.2, 0.2], z in [0.015, 0.25]), then the gripper command in [-1, 1] (-1 open, +1
closed). The table top is at z = 0; a cube on the table has its centre at z = 0.02.

## Observation space
- `state` (4 + 5 * n_cubes + 2,): ee x, y, z (m); finger opening (m, 0..0.09); per cube: x, y, z
  (m), cos(4 yaw), sin(4 yaw); target x, y (m). Yaw is taken from the cube's most horizontal
  body axis, so it is well defined for any face down; 4 yaw makes it invariant to the cube's
  quarter-turn symmetry.
- `proprio` (4,), optional: ee x, y, z (m) and finger opening (m): the first 4 of `state`, what
  the gantry senses of itself (no cube, no target).
- `image` (96, 96, 3) uint8, optional: the angled camera (`camera="angled"`) or the top-down one
  (`camera="top"`).

## Score and success
A cube is *placed* when its centre is within `TARGET_RADIUS_M` (5 cm) of the target centre in xy,
it rests on the table (centre height within 5 mm of 2 cm, speed < 5 cm/s), no finger pad touches
it and the gripper is open wider than the cube by 5 mm. success = any cube placed; the episode
terminates at success. score = 1 at success, else `0.9 * max_c max(0, 1 - max(0, d_c - r) /
0.25)` with d_c the xy distance of cube c to the target centre and r the target radius: it rises
as the best cube approaches the disc and stays below 0.9 until the cube is let go there.
reward = score.

## Starting state
Target centre uniform in [-0.12, 0.12]^2. Cubes uniform in [-0.15, 0.15]^2 with random yaw, centres
at least 10 cm apart and at least 10 cm from the target centre. Gripper open, ee uniform in
[-0.1, 0.1]^2 x [0.12, 0.18].

## Episode end
Termination at success. No truncation in the env itself: wrap with `TimeLimit` at
`MAX_EPISODE_STEPS` (150 steps = 15 s at 10 Hz).

## Arguments
`obs_keys`, `image_size`, `render_mode` as in `MujocoTaskEnv`; `n_cubes` in {1, 2}; `camera`.

## Version history
- v0: first release.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from robocompose.sim import gantry
from robocompose.sim.base import MujocoTaskEnv

MAX_EPISODE_STEPS = 150
CUBE_HALF_M = 0.02
TARGET_RADIUS_M = 0.05
TIMESTEP_S = 0.004
REST_TOL_M = 0.005  # height tolerance of "resting on"
REST_SPEED_M_S = 0.05
CUBE_RANGE_M = 0.15  # cubes start in [-range, range]^2
CUBE_MIN_GAP_M = 0.10  # between cube centres: room for the open fingers
SCORE_SCALE_M = 0.25
CAMERAS = ("angled", "top")
ANGLED_EYE = (0.38, -0.42, 0.55)  # the angled camera looks from here at the table centre


def _look_at(eye: Sequence[float], target: Sequence[float] = (0.0, 0.03, 0.05)) -> str:
    """MJCF `xyaxes` of a camera at `eye` looking at `target` with the world z axis up."""
    forward = np.subtract(target, eye, dtype=float)
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, (0.0, 0.0, 1.0))
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    return " ".join(f"{v:.5f}" for v in (*right, *up))


def cube_xml(name: str, rgba: Sequence[float], pos: Sequence[float]) -> str:
    """A free 4 cm cube body; the joint and geom share the body's name."""
    color = " ".join(f"{c:g}" for c in rgba)
    x, y, z = pos
    return f"""
    <body name="{name}" pos="{x} {y} {z}">
      <freejoint name="{name}"/>
      <geom name="{name}" type="box" size="{CUBE_HALF_M} {CUBE_HALF_M} {CUBE_HALF_M}"
            mass="0.05" rgba="{color}"/>
    </body>"""


def tabletop_xml(model_name: str, bodies: str) -> str:
    """The whole scene: table, lights, cameras, the gantry, and the task's `bodies`."""
    robot = gantry.gantry_mjcf()
    return f"""
<mujoco model="{model_name}">
  <compiler angle="radian"/>
  <option timestep="{TIMESTEP_S}" gravity="0 0 -9.81" cone="elliptic" impratio="10"/>
  <visual>
    <global offwidth="512" offheight="512"/>
    <quality shadowsize="0"/>
    <headlight ambient="0.5 0.5 0.5" diffuse="0.45 0.45 0.45" specular="0 0 0"/>
  </visual>
  <default><geom friction="1 0.005 0.0001"/></default>
  <worldbody>
    <camera name="angled" pos="{" ".join(map(str, ANGLED_EYE))}"
            xyaxes="{_look_at(ANGLED_EYE)}" fovy="50"/>
    <camera name="top" pos="0 0 0.8" xyaxes="1 0 0 0 1 0" fovy="42"/>
    <geom name="floor" type="plane" pos="0 0 -0.4" size="2 2 0.01" rgba="0.3 0.3 0.32 1"
          contype="0" conaffinity="0"/>
    <geom name="table" type="box" pos="0 0 -0.02" size="0.32 0.32 0.02"
          rgba="0.82 0.8 0.76 1"/>
    {bodies}
    {robot.worldbody}
  </worldbody>
  {robot.actuator}
</mujoco>
"""


def yaw4(xmat: np.ndarray) -> tuple[float, float]:
    """(cos 4 yaw, sin 4 yaw) of a cube from its 3x3 rotation, using its most horizontal axis."""
    axis = xmat[:, int(np.argmin(np.abs(xmat[2])))]  # columns are the body axes in world
    yaw = np.arctan2(axis[1], axis[0])
    return float(np.cos(4 * yaw)), float(np.sin(4 * yaw))


def sample_positions(
    rng: np.random.Generator,
    n: int,
    *,
    keep_out: Sequence[np.ndarray] = (),
    keep_out_m: float = 0.0,
    max_tries: int = 10_000,
) -> np.ndarray:
    """(n, 2) xy in [-CUBE_RANGE_M, CUBE_RANGE_M]^2, pairwise >= CUBE_MIN_GAP_M apart and
    >= keep_out_m from every point in `keep_out`. Rejection sampling, one point at a time."""
    points: list[np.ndarray] = []
    for _ in range(max_tries):
        p = rng.uniform(-CUBE_RANGE_M, CUBE_RANGE_M, 2)
        if all(np.linalg.norm(p - q) >= CUBE_MIN_GAP_M for q in points) and all(
            np.linalg.norm(p - q) >= keep_out_m for q in keep_out
        ):
            points.append(p)
            if len(points) == n:
                return np.array(points)
    raise RuntimeError(f"could not place {n} cubes apart in {max_tries} draws")


class TabletopEnv(MujocoTaskEnv):
    """Gantry + named free cubes on a table: action, robot/cube state and random placement.

    Subclasses pass the cube names (bodies built by `cube_xml` inside `bodies`) and implement
    `_evaluate`, `_randomize` and `_state_obs` (usually `robot_obs()` + `cube_obs(i)` + ...).
    """

    def __init__(
        self,
        model_name: str,
        bodies: str,
        cube_names: Sequence[str],
        *,
        obs_keys: tuple[str, ...],
        image_size: int,
        render_mode: str | None,
        camera: str,
    ) -> None:
        if camera not in CAMERAS:
            raise ValueError(f"`camera` must be one of {CAMERAS}. Got {camera!r}.")
        self.cube_names = tuple(cube_names)
        super().__init__(
            tabletop_xml(model_name, bodies),
            obs_keys=obs_keys,
            image_size=image_size,
            control_hz=10.0,
            camera=camera,
            render_mode=render_mode,
        )
        self.action_space = gantry.action_space()

    def _bind(self) -> None:
        self.gantry = gantry.Gantry(self.model)
        m = self.model
        self._cube_body = np.array([m.body(n).id for n in self.cube_names])
        self._cube_qpos = np.array([m.joint(n).qposadr[0] for n in self.cube_names])
        self._cube_dof = np.array([m.joint(n).dofadr[0] for n in self.cube_names])
        self.cube_geoms = np.array([m.geom(n).id for n in self.cube_names])

    # -- state accessors (privileged; experts read these) --------------------------------------
    def ee_pos(self) -> np.ndarray:
        return self.gantry.ee_pos(self.data)

    def opening(self) -> float:
        return self.gantry.opening(self.data)

    def cube_pos(self, i: int) -> np.ndarray:
        return self.data.xpos[self._cube_body[i]].copy()

    def cube_speed(self, i: int) -> float:
        adr = self._cube_dof[i]
        return float(np.linalg.norm(self.data.qvel[adr : adr + 3]))

    def gripper_touches(self, i: int) -> bool:
        return self.gantry.touching(self.data, self.cube_geoms[i : i + 1])

    def released(self, i: int) -> bool:
        """No pad touches cube i and the fingers are open wider than the cube by 5 mm."""
        return self.opening() > 2 * CUBE_HALF_M + 0.005 and not self.gripper_touches(i)

    def at_rest(self, i: int, centre_z: float) -> bool:
        """Cube i is still with its centre at `centre_z` (within `REST_TOL_M`)."""
        z = self.data.xpos[self._cube_body[i], 2]
        return abs(z - centre_z) < REST_TOL_M and self.cube_speed(i) < REST_SPEED_M_S

    def placed_in_disc(self, i: int, centre_xy: np.ndarray, radius_m: float) -> bool:
        """Cube i rests on the table inside the disc at `centre_xy`, let go by the gripper."""
        in_disc = np.linalg.norm(self.cube_pos(i)[:2] - centre_xy) < radius_m
        return bool(in_disc and self.at_rest(i, CUBE_HALF_M) and self.released(i))

    def robot_obs(self) -> np.ndarray:
        return np.append(self.ee_pos(), self.opening())

    def _proprio_obs(self) -> np.ndarray:
        return self.robot_obs()

    def cube_obs(self, i: int) -> np.ndarray:
        xmat = self.data.xmat[self._cube_body[i]].reshape(3, 3)
        return np.concatenate([self.cube_pos(i), yaw4(xmat)])

    # -- shared hooks ---------------------------------------------------------------------------
    def _apply_action(self, action: np.ndarray) -> None:
        self.gantry.command(self.data, action)

    def _place_cube(self, i: int, xy: np.ndarray, yaw: float) -> None:
        adr = self._cube_qpos[i]
        self.data.qpos[adr : adr + 3] = (xy[0], xy[1], CUBE_HALF_M)
        self.data.qpos[adr + 3 : adr + 7] = (np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2))

    def _randomize_scene(
        self, rng: np.random.Generator, keep_out: Sequence[np.ndarray] = (), keep_out_m: float = 0
    ) -> None:
        """Cubes at random non-overlapping xy and yaw; gripper open at a random height."""
        xys = sample_positions(rng, len(self.cube_names), keep_out=keep_out, keep_out_m=keep_out_m)
        for i, xy in enumerate(xys):
            self._place_cube(i, xy, rng.uniform(0.0, np.pi / 2))
        ee = np.array([*rng.uniform(-0.1, 0.1, 2), rng.uniform(0.12, 0.18)])
        self.gantry.place(self.data, ee, grip=-1.0)


class PickPlaceEnv(TabletopEnv):
    """Put any cube down inside the green target disc. See the module docstring for details."""

    def __init__(
        self,
        *,
        obs_keys: tuple[str, ...] = ("state",),
        image_size: int = 96,
        render_mode: str | None = None,
        n_cubes: int = 1,
        camera: str = "angled",
    ) -> None:
        if n_cubes not in (1, 2):
            raise ValueError(f"`n_cubes` must be 1 or 2. Got {n_cubes!r}.")
        self.n_cubes = n_cubes
        names = [f"cube{i}" for i in range(n_cubes)]
        target = f"""
    <body name="target" mocap="true" pos="0 0 0.0005">
      <geom name="target" type="cylinder" size="{TARGET_RADIUS_M} 0.0005"
            rgba="0.2 0.75 0.3 1" contype="0" conaffinity="0"/>
    </body>"""
        cubes = "".join(
            cube_xml(n, (0.85, 0.35, 0.15, 1), (0.1 * i, 0.0, CUBE_HALF_M))
            for i, n in enumerate(names)
        )
        super().__init__(
            "pick_place",
            target + cubes,
            names,
            obs_keys=obs_keys,
            image_size=image_size,
            render_mode=render_mode,
            camera=camera,
        )

    def _bind(self) -> None:
        super()._bind()
        self._target_mocap = self.model.body("target").mocapid[0]

    def target_xy(self) -> np.ndarray:
        return self.data.mocap_pos[self._target_mocap, :2].copy()

    def placed(self, i: int) -> bool:
        """Cube i rests on the table inside the target, let go by the gripper."""
        return self.placed_in_disc(i, self.target_xy(), TARGET_RADIUS_M)

    def _state_obs(self) -> np.ndarray:
        cubes = [self.cube_obs(i) for i in range(self.n_cubes)]
        return np.concatenate([self.robot_obs(), *cubes, self.target_xy()])

    def _evaluate(self) -> tuple[bool, float]:
        if any(self.placed(i) for i in range(self.n_cubes)):
            return True, 1.0
        target = self.target_xy()
        gaps = [
            max(0.0, np.linalg.norm(self.cube_pos(i)[:2] - target) - TARGET_RADIUS_M)
            for i in range(self.n_cubes)
        ]
        return False, 0.9 * max(0.0, 1.0 - min(gaps) / SCORE_SCALE_M)

    def _randomize(self, rng: np.random.Generator) -> None:
        target = rng.uniform(-0.12, 0.12, 2)
        self.data.mocap_pos[self._target_mocap, :2] = target
        self._randomize_scene(rng, keep_out=[target], keep_out_m=TARGET_RADIUS_M + 0.05)

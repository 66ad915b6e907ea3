"""Scripted experts for robosuite's Lift and PickPlaceCan, reading privileged simulator state.

A waypoint script (a generator, as in `grasping.py`) yields (target xyz, target yaw, gripper)
commands; `act` turns the command into robosuite's OSC delta action: the position part is
proportional to the distance to the target (`gain`), its norm capped at `max_action`; the
rotation part (world-frame axis-angle, as robosuite's OSC applies it) turns the gripper to point
down at the target yaw.
Waypoints are re-read every step from the live object pose, and a grasp that did not lift the
object is retried. Per episode the expert draws its hover height, action cap and grasp offsets, and
`action_noise` adds Gaussian noise to the position action: the variety between demos.

Lift: align the jaws with the cube's faces, descend, close, raise (success: cube 4 cm up).
PickPlaceCan: grasp the can upright, raise it over the bin walls, carry it over the can's bin
quadrant, lower, open and rise (success needs the hand 4.2 cm away from the can, in its bin).
After the script the expert holds its last command; `done` turns true `done_margin` steps later.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
from scipy.spatial.transform import Rotation

from robocompose.sim.robosuite_env import RobosuiteEnv

Command = tuple[np.ndarray, float, float]  # target ee xyz, target yaw (rad), gripper
OPEN, CLOSED = -1.0, 1.0
POS_SCALE_M = 0.05  # robosuite's OSC: a position action of 1 moves the goal 5 cm
ROT_SCALE_RAD = 0.5  # and a rotation action of 1 turns it 0.5 rad
DOWN = Rotation.from_euler("x", np.pi)  # gripper pointing at the table, yaw 0


@dataclass
class RobosuiteExpertConfig:
    action_noise: float = 0.05  # std of the Gaussian added to the position action (1 = 5 cm)
    done_margin: int = 5  # steps of holding the final command before `done`
    gain: float = 2.5  # position action per POS_SCALE_M of distance to the target
    max_action: float = 1.0  # cap on the norm of the position action (about 0.25 m/s)
    tol_m: float = 0.01  # a waypoint counts as reached within this distance
    max_attempts: int = 3  # grasp attempts before giving up

    def __post_init__(self) -> None:
        if self.action_noise < 0:
            raise ValueError(f"`action_noise` must be >= 0. Got {self.action_noise}.")
        if self.done_margin < 0:
            raise ValueError(f"`done_margin` must be >= 0. Got {self.done_margin}.")
        for name in ("gain", "max_action", "tol_m"):
            if getattr(self, name) <= 0:
                raise ValueError(f"`{name}` must be > 0. Got {getattr(self, name)}.")
        if self.max_attempts < 1:
            raise ValueError(f"`max_attempts` must be >= 1. Got {self.max_attempts}.")


@dataclass
class LiftExpertConfig(RobosuiteExpertConfig):
    """`RobosuiteExpertConfig` under the name the Lift expert looks up."""


@dataclass
class PickPlaceCanExpertConfig(RobosuiteExpertConfig):
    """`RobosuiteExpertConfig` under the name the PickPlaceCan expert looks up."""


class _RobosuiteExpert:
    """`reset(env, rng)`, then `act(env) -> (7,) float32` each step; `done` after the script."""

    task = ""  # the RobosuiteEnv task this expert drives
    config_type: type[RobosuiteExpertConfig] = RobosuiteExpertConfig

    def __init__(self, config: RobosuiteExpertConfig | None = None) -> None:
        self.config = config or self.config_type()
        self._rng = np.random.default_rng(0)
        self._script: Iterator[Command] | None = None
        self._idle, self._finished = 0, False

    @property
    def done(self) -> bool:
        """True once the script has ended and the final command was held `done_margin` steps."""
        return self._finished and self._idle >= self.config.done_margin

    def reset(self, env: gym.Env, rng: np.random.Generator) -> None:
        self._sim = self._robosuite(env)
        self._rng = rng
        self._idle, self._finished = 0, False
        self.hover_m = rng.uniform(0.06, 0.1)
        self.max_action = self.config.max_action * rng.uniform(0.7, 1.0)
        self.grasp_offset = np.append(rng.uniform(-0.006, 0.006, 2), rng.uniform(-0.005, 0.005))
        self._last: Command = (self.ee_pos(), self.ee_yaw(), OPEN)
        self._script = self._plan()

    def act(self, env: gym.Env) -> np.ndarray:
        if self._script is None:
            raise RuntimeError("call reset(env, rng) before act(env)")
        if self._robosuite(env) is not self._sim:
            raise RuntimeError("act(env) got another env than reset(env, rng)")
        command = next(self._script, None)
        if command is None:  # the script is over: hold the final command
            self._finished = True
            self._idle += 1
        else:
            self._last = command
        return self._action(*self._last)

    # -- to fill in ------------------------------------------------------------------------
    def _plan(self) -> Iterator[Command]:
        raise NotImplementedError

    # -- privileged state ------------------------------------------------------------------
    def ee_pos(self) -> np.ndarray:
        sim = self._sim
        return sim.sim.data.site_xpos[sim.robots[0].eef_site_id["right"]].copy()

    def ee_rotation(self) -> Rotation:
        sim = self._sim
        return Rotation.from_matrix(
            sim.sim.data.site_xmat[sim.robots[0].eef_site_id["right"]].reshape(3, 3)
        )

    def ee_yaw(self) -> float:
        """The yaw of the gripper about the world z axis, relative to `DOWN`."""
        return float((self.ee_rotation() * DOWN.inv()).as_euler("zyx")[0])

    def gripper_closed_on_object(self) -> bool:
        """The fingers stopped short of closing (qpos gap above 1 cm): something is between."""
        sim = self._sim
        qpos = sim.sim.data.qpos[sim.robots[0]._ref_gripper_joint_pos_indexes["right"]]
        return float(qpos[0] - qpos[1]) > 0.01

    def body_pos(self, body_id: int) -> np.ndarray:
        return self._sim.sim.data.body_xpos[body_id].copy()

    def body_yaw(self, body_id: int) -> float:
        w, x, y, z = self._sim.sim.data.body_xquat[body_id]
        return float(Rotation.from_quat([x, y, z, w]).as_euler("zyx")[0])

    # -- commands to actions ---------------------------------------------------------------
    def _action(self, target: np.ndarray, yaw: float, grip: float) -> np.ndarray:
        pos = self.config.gain * (target - self.ee_pos()) / POS_SCALE_M
        norm = float(np.linalg.norm(pos))
        if norm > self.max_action:
            pos *= self.max_action / norm
        if self.config.action_noise > 0:
            pos = pos + self._rng.normal(0.0, self.config.action_noise, 3)
        goal = Rotation.from_euler("z", yaw) * DOWN
        rot = (goal * self.ee_rotation().inv()).as_rotvec() / ROT_SCALE_RAD
        action = np.concatenate([np.clip(pos, -1, 1), np.clip(rot, -1, 1), [grip]])
        return action.astype(np.float32)

    # -- building blocks -------------------------------------------------------------------
    def _go(
        self,
        goal: Callable[[], np.ndarray],
        yaw: Callable[[], float],
        grip: float,
        *,
        tol_m: float | None = None,
        max_steps: int = 60,
    ) -> Iterator[Command]:
        """Head for the live `goal()` until the end effector is within tol of it."""
        tol = tol_m or self.config.tol_m
        for _ in range(max_steps):
            target = goal()
            yield target, yaw(), grip
            if np.linalg.norm(self.ee_pos() - goal()) < tol:
                return

    def _hold(self, grip: float, steps: int) -> Iterator[Command]:
        here, yaw = self.ee_pos(), self.ee_yaw()
        for _ in range(steps):
            yield here, yaw, grip

    def _grasp(
        self, body_id: int, yaw: Callable[[], float], lift_z: float
    ) -> Generator[Command, None, bool]:
        """Above the object, down, close, up to `lift_z`; returns whether it is held."""
        obj = lambda: self.body_pos(body_id)  # noqa: E731
        hover_z = lambda: obj()[2] + self.hover_m  # noqa: E731
        yield from self._go(lambda: np.append(obj()[:2], hover_z()), yaw, OPEN, tol_m=0.015)
        yield from self._go(lambda: obj() + self.grasp_offset, yaw, OPEN, tol_m=0.008)
        yield from self._hold(CLOSED, 8)
        up = np.append(self.ee_pos()[:2], lift_z)
        yield from self._go(lambda: up, yaw, CLOSED, tol_m=0.02)
        return self.gripper_closed_on_object() and self.body_pos(body_id)[2] > lift_z - 0.1

    def _grasp_retrying(
        self, body_id: int, yaw: Callable[[], float], lift_z: float
    ) -> Generator[Command, None, bool]:
        for _ in range(self.config.max_attempts):
            if (yield from self._grasp(body_id, yaw, lift_z)):
                return True
            up = self.ee_pos() + (0.0, 0.0, 0.05)
            yield from self._go(lambda up=up: up, yaw, OPEN, tol_m=0.02)
        return False

    def _robosuite(self, env: gym.Env) -> object:
        task = env.unwrapped
        if not isinstance(task, RobosuiteEnv) or task.task != self.task:
            raise TypeError(
                f"{type(self).__name__} drives a RobosuiteEnv of task {self.task!r}. "
                f"Got {type(task).__name__} {getattr(task, 'task', '')!r}."
            )
        return task.sim_env


class LiftExpert(_RobosuiteExpert):
    """Grasps the cube with the jaws square to its faces and lifts it."""

    task = "Lift"
    config_type = LiftExpertConfig

    def _plan(self) -> Iterator[Command]:
        cube = self._sim.cube_body_id
        lift_z = self.body_pos(cube)[2] + self._rng.uniform(0.12, 0.18)
        yield from self._grasp_retrying(cube, lambda: self._square_yaw(cube), lift_z)

    def _square_yaw(self, body_id: int) -> float:
        """The cube yaw, modulo a quarter turn, nearest to the gripper's."""
        quarter = np.pi / 2
        now = self.ee_yaw()
        yaw = self.body_yaw(body_id)
        return float(yaw + quarter * np.round((now - yaw) / quarter))


class PickPlaceCanExpert(_RobosuiteExpert):
    """Carries the can over the bin walls into its quadrant of the second bin."""

    task = "PickPlaceCan"
    config_type = PickPlaceCanExpertConfig

    def _plan(self) -> Iterator[Command]:
        sim = self._sim
        can = sim.obj_body_id["Can"]
        yaw0 = self.ee_yaw() + self._rng.uniform(-0.3, 0.3)
        yaw = lambda: yaw0  # noqa: E731
        carry_z = sim.bin2_pos[2] + self._rng.uniform(0.22, 0.28)
        if not (yield from self._grasp_retrying(can, yaw, carry_z)):
            return
        goal_xy = sim.target_bin_placements[sim.object_to_id["can"], :2] + self._rng.uniform(
            -0.03, 0.03, 2
        )
        held = lambda: self.body_pos(can) - self.ee_pos()  # noqa: E731
        over = lambda z: np.append(goal_xy - held()[:2], z)  # noqa: E731
        yield from self._go(lambda: over(carry_z), yaw, CLOSED, tol_m=0.02)
        drop_z = sim.bin2_pos[2] + self._rng.uniform(0.12, 0.16)
        yield from self._go(lambda: over(drop_z), yaw, CLOSED, tol_m=0.02)
        yield from self._hold(OPEN, 6)
        top = self.ee_pos() + (0.0, 0.0, 0.12)
        yield from self._go(lambda: top, yaw, OPEN, tol_m=0.02)

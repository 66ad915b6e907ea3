"""Scripted experts for the gantry tasks (PickPlace, Stack): a waypoint state machine.

One pick-and-place reads top to bottom in `_pick_and_place` and `_grasp`: above the cube,
descend, close, lift, carry above the goal, descend, open, retreat. It is a generator of clean
(xyz, grip) commands; `act` adds Gaussian noise to xyz. Waypoints are recomputed every step from
privileged state (`env.unwrapped`), so the script follows a cube that moves, and a failed grasp
(cube not lifted) is retried. The commanded point advances at most `speed_m` per step toward each
waypoint.

Cube choice, with two cubes (`cube_choice`): "first" (default) always takes cube 0; "nearest"
the one nearer the gripper at the start; "uniform" either at random (multimodal demos). State
policies trained on 400-1000 demos of "nearest" or "uniform" do not learn the choice (5-7%
success: they grasp the air between the cubes; even the training demos' first chunk is missed),
while 400 demos of "first" give 84% after 6000 steps. Per episode the expert also draws its
hover and carry heights, speed, grasp offset along the jaws and place offset.

Stack places the first block of the order where it lies and builds on it; after every placement
it re-reads which pairs are stacked and continues from the first one that is not, so a block
knocked off gets put back.

After the script ends the expert holds its last command; `done` turns true `done_margin` steps
later (collectors stop on env success or `done`).

`skill` is the `SkillLabel` of the step `act` last returned: pick(obj) while grasping (retries
included), place(obj, target) from carrying to the retreat; the final hold keeps the last label.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from robocompose.sim.gantry import WORKSPACE_HIGH, WORKSPACE_LOW
from robocompose.sim.pick_place import CUBE_HALF_M, PickPlaceEnv, TabletopEnv
from robocompose.sim.skill_labels import SkillLabel, pick_label, place_label
from robocompose.sim.stack import StackEnv

CUBE_CHOICES = ("first", "nearest", "uniform")
Command = tuple[np.ndarray, float]  # clean ee target (3,), gripper command
OPEN, CLOSED = -1.0, 1.0


@dataclass
class GraspExpertConfig:
    action_noise_m: float = 0.003  # std of the Gaussian added to the xyz target each step
    done_margin: int = 5  # steps of holding the final pose before `done`
    speed_m: float = 0.03  # max advance of the commanded point per step (0.3 m/s at 10 Hz)
    tol_m: float = 0.01  # a waypoint counts as reached within this distance
    max_attempts: int = 3  # grasp attempts per cube before giving up

    def __post_init__(self) -> None:
        if self.action_noise_m < 0:
            raise ValueError(f"`action_noise_m` must be >= 0. Got {self.action_noise_m}.")
        if self.done_margin < 0:
            raise ValueError(f"`done_margin` must be >= 0. Got {self.done_margin}.")
        if self.speed_m <= 0:
            raise ValueError(f"`speed_m` must be > 0. Got {self.speed_m}.")


@dataclass
class PickPlaceExpertConfig(GraspExpertConfig):
    """`GraspExpertConfig` plus which cube to bring when there are two."""

    cube_choice: str = "first"  # one of CUBE_CHOICES

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.cube_choice not in CUBE_CHOICES:
            raise ValueError(
                f"`cube_choice` must be one of {CUBE_CHOICES}. Got {self.cube_choice!r}."
            )


@dataclass
class StackExpertConfig(GraspExpertConfig):
    """`GraspExpertConfig` under the name `robocompose.sim.tasks.make_expert` looks up."""


class _GraspingExpert:
    """`reset(env, rng)`, then `act(env) -> (4,) float32` each step; `done` after the script."""

    task_type: type[TabletopEnv] = TabletopEnv
    config_type: type[GraspExpertConfig] = GraspExpertConfig

    def __init__(self, config: GraspExpertConfig | None = None) -> None:
        self.config = config or self.config_type()
        self._rng = np.random.default_rng(0)
        self._script: Iterator[Command] | None = None
        self._last: Command = (np.zeros(3), OPEN)
        self._idle, self._finished = 0, False
        self.skill: SkillLabel | None = None

    @property
    def done(self) -> bool:
        """True once the script has ended and the final pose was held `done_margin` steps."""
        return self._finished and self._idle >= self.config.done_margin

    def reset(self, env: gym.Env, rng: np.random.Generator) -> None:
        task = self._task(env)
        self._rng = rng
        self._cmd = task.ee_pos()
        self._last = (self._cmd.copy(), OPEN)
        self._idle, self._finished = 0, False
        self.skill = None
        self._draw_style()
        self._script = self._plan(task)

    def act(self, env: gym.Env) -> np.ndarray:
        if self._script is None:
            raise RuntimeError("call reset(env, rng) before act(env)")
        self._task(env)
        command = next(self._script, None)
        if command is None:  # the script is over: hold the final pose
            self._finished = True
            self._idle += 1
        else:
            self._last = command
        xyz, grip = self._last
        if self.config.action_noise_m > 0:
            xyz = xyz + self._rng.normal(0.0, self.config.action_noise_m, 3)
        return np.append(np.clip(xyz, WORKSPACE_LOW, WORKSPACE_HIGH), grip).astype(np.float32)

    # -- to fill in ------------------------------------------------------------------------
    def _plan(self, task: TabletopEnv) -> Iterator[Command]:
        raise NotImplementedError

    # -- building blocks -------------------------------------------------------------------
    def _task(self, env: gym.Env) -> TabletopEnv:
        task = env.unwrapped
        if not isinstance(task, self.task_type):
            raise TypeError(
                f"{type(self).__name__} drives a {self.task_type.__name__}. "
                f"Got {type(task).__name__}."
            )
        return task

    def _draw_style(self) -> None:
        """Per-episode style: the source of variety between demos of the same start."""
        rng = self._rng
        self.hover_m = rng.uniform(0.07, 0.11)  # above the cube top before descending
        self.carry_m = rng.uniform(0.05, 0.09)  # clearance of the held cube over obstacles
        self.speed_m = self.config.speed_m * rng.uniform(0.8, 1.2)
        self.grasp_dx_m = rng.uniform(-0.005, 0.005)  # along the jaws (x); y self-centres
        self.grasp_dz_m = rng.uniform(-0.004, 0.004)
        self.retreat_m = rng.uniform(0.06, 0.1)

    def _go(
        self,
        task: TabletopEnv,
        goal: Callable[[], np.ndarray],
        grip: float,
        *,
        speed_m: float | None = None,
        tol_m: float | None = None,
        max_steps: int = 40,
    ) -> Iterator[Command]:
        """Advance the commanded point toward the live `goal()` until the ee is within tol."""
        speed = speed_m or self.speed_m
        tol = tol_m or self.config.tol_m
        for _ in range(max_steps):
            target = np.clip(goal(), WORKSPACE_LOW, WORKSPACE_HIGH)
            delta = target - self._cmd
            dist = np.linalg.norm(delta)
            self._cmd = target.copy() if dist <= speed else self._cmd + delta * (speed / dist)
            yield self._cmd.copy(), grip
            if np.linalg.norm(task.ee_pos() - target) < tol:
                return

    def _rise(self, task: TabletopEnv, dz_m: float, grip: float) -> Iterator[Command]:
        goal = self._cmd + (0.0, 0.0, dz_m)
        yield from self._go(task, lambda: goal, grip, tol_m=0.02)

    def _hold(self, grip: float, steps: int) -> Iterator[Command]:
        for _ in range(steps):
            yield self._cmd.copy(), grip

    def _pick_and_place(
        self,
        task: TabletopEnv,
        i: int,
        place_xy: Callable[[], np.ndarray],
        place_z: Callable[[], float],
        target: str,
    ) -> Iterator[Command]:
        """Move cube i so that its centre lands at (place_xy(), place_z()), both read live;
        `target` names where (a block, a bin, "target") for the skill labels."""
        obj = block_name(task, i)
        self.skill = pick_label(obj)
        if (yield from self._grasp_retrying(task, i)):
            self.skill = place_label(obj, target)
            yield from self._place_held(task, i, place_xy, place_z)

    def _grasp_retrying(self, task: TabletopEnv, i: int) -> Generator[Command, None, bool]:
        """`_grasp` up to `max_attempts` times, rising open between tries; whether it holds."""
        for _ in range(self.config.max_attempts):
            if (yield from self._grasp(task, i)):
                return True
            yield from self._rise(task, 0.05, OPEN)  # let go and try again
        return False

    def _place_held(
        self,
        task: TabletopEnv,
        i: int,
        place_xy: Callable[[], np.ndarray],
        place_z: Callable[[], float],
    ) -> Iterator[Command]:
        """Carry the held cube i at the current height, lower it onto the goal, open, retreat."""
        carry_z = float(self._cmd[2])

        def held() -> np.ndarray:  # where the cube sits in the hand, relative to the ee
            return task.cube_pos(i) - task.ee_pos()

        def ee_xy() -> np.ndarray:  # ee xy that puts the held cube over place_xy
            return place_xy() - held()[:2]

        yield from self._go(task, lambda: np.append(ee_xy(), carry_z), CLOSED, tol_m=0.006)
        yield from self._go(
            task,
            lambda: np.append(ee_xy(), place_z() - held()[2]),
            CLOSED,
            speed_m=0.015,
            tol_m=0.005,
        )
        yield from self._hold(OPEN, 3)
        yield from self._rise(task, self.retreat_m, OPEN)

    def _grasp(self, task: TabletopEnv, i: int) -> Generator[Command, None, bool]:
        """Above cube i, down, close, up to carry height; returns whether it is held."""
        hover_z = max(
            task.cube_pos(i)[2] + CUBE_HALF_M + self.hover_m, self._obstacle_top(task, i) + 0.05
        )
        offset = np.array([self.grasp_dx_m, 0.0, self.grasp_dz_m])
        yield from self._go(
            task, lambda: np.append(task.cube_pos(i)[:2] + offset[:2], hover_z), OPEN
        )
        yield from self._go(
            task, lambda: task.cube_pos(i) + offset, OPEN, speed_m=0.02, tol_m=0.006
        )
        yield from self._hold(CLOSED, 4)
        carry_z = self._obstacle_top(task, i) + CUBE_HALF_M + self.carry_m
        yield from self._go(task, lambda: np.append(self._cmd[:2], carry_z), CLOSED, tol_m=0.015)
        return task.gripper_touches(i) and task.cube_pos(i)[2] > CUBE_HALF_M + 0.02

    @staticmethod
    def _obstacle_top(task: TabletopEnv, i: int) -> float:
        """Highest top face among the cubes other than i (0 when there are none)."""
        tops = [task.cube_pos(j)[2] + CUBE_HALF_M for j in range(len(task.cube_names)) if j != i]
        return max(tops, default=0.0)


def block_name(task: TabletopEnv, i: int) -> str:
    """Cube i's name in skill labels: "<cube name>_block" (e.g. "red_block")."""
    return f"{task.cube_names[i]}_block"


class PickPlaceExpert(_GraspingExpert):
    """Brings one cube (with two: the one `cube_choice` names) into the target disc."""

    task_type = PickPlaceEnv
    config_type = PickPlaceExpertConfig

    def _plan(self, task: TabletopEnv) -> Iterator[Command]:
        assert isinstance(task, PickPlaceEnv)
        i = self._choose_cube(task)
        offset = self._rng.uniform(-0.012, 0.012, 2)
        place_z = CUBE_HALF_M + 0.004
        yield from self._pick_and_place(
            task, i, lambda: task.target_xy() + offset, lambda: place_z, "target"
        )

    def _choose_cube(self, task: PickPlaceEnv) -> int:
        draw = int(self._rng.integers(task.n_cubes))  # drawn always: the rng stream stays put
        if self.config.cube_choice == "uniform":
            return draw
        if self.config.cube_choice == "first":
            return 0
        ee_xy = task.ee_pos()[:2]
        dist = [np.linalg.norm(task.cube_pos(c)[:2] - ee_xy) for c in range(task.n_cubes)]
        return int(np.argmin(dist))


class StackExpert(_GraspingExpert):
    """Stacks the order bottom to top, leaving the bottom block where it starts."""

    task_type = StackEnv
    config_type = StackExpertConfig

    def _plan(self, task: TabletopEnv) -> Iterator[Command]:
        assert isinstance(task, StackEnv)
        order = task.order_ids
        for _ in range(2 * len(order)):
            k = task.n_stacked_from_bottom()
            if k == len(order) - 1:
                return
            lower, upper = order[k], order[k + 1]
            yield from self._pick_and_place(
                task,
                upper,
                lambda lower=lower: task.cube_pos(lower)[:2],
                lambda lower=lower: task.cube_pos(lower)[2] + 2 * CUBE_HALF_M + 0.004,
                block_name(task, lower),
            )

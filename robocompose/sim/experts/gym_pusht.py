"""An expert for gym-pusht (the original pymunk PushT): sampling MPC over push primitives, planned
in a scratch copy of its own pymunk world.

The same planner as our MuJoCo PushT expert (`robocompose.sim.experts.pusht`), in gym-pusht's
pixel units: a push primitive = go around the block (outside its bounding circle) to a contact
point on its outline, then push along (or up to 0.5 rad off) the inward normal by a chosen depth.
At each decision every candidate is rolled out from the live state in a scratch world
(`PymunkSnapshot`), the ones that best reduce the pose error to the goal are kept, one of them is
picked at random (the demos' multimodality: which side to push from) and played open loop.

gym-pusht's block has no damping (space damping 0: it stops as soon as nothing pushes it) and its
shapes no friction, so a push moves it almost exactly as planned; success (coverage > 0.95) asks
for ~2 px and ~1 degree, which the small push depths reach.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from robocompose.sim.experts.push_paths import PushShape, push_paths

ACTION_LOW, ACTION_HIGH = 20.0, 492.0  # pusher targets stay clear of the walls at 5 and 506 px
PUSHER_RADIUS_PX = 15.0
# The T in its body frame (pixels): bar x in [-60, 60], y in [0, 30]; stem x in [-15, 15],
# y in [30, 120]; centre of gravity at (0, 45), 76.5 px from the farthest corner.
BAR_HX, BAR_H, STEM_HX, STEM_TOP = 60.0, 30.0, 15.0, 120.0
T_COG = np.array([0.0, 45.0])
T_RADIUS_PX = math.hypot(STEM_HX, STEM_TOP - T_COG[1])
# Angle error is weighted so that both terms cost about the same coverage (the bar is 120 px).
YAW_WEIGHT_PX_PER_RAD = 60.0


def _contacts() -> list[tuple[np.ndarray, np.ndarray]]:
    """Contact points on the T outline with outward normals, in the block's body frame."""
    r = PUSHER_RADIUS_PX
    points = [((x, 0.0), (0, -1)) for x in np.linspace(-0.8, 0.8, 5) * BAR_HX]
    points += [((s * BAR_HX, BAR_H / 2), (s, 0)) for s in (-1, 1)]
    above_x = (STEM_HX + r + BAR_HX) / 2 + r / 2
    points += [((s * above_x, BAR_H), (0, 1)) for s in (-1, 1)]
    for y in np.linspace(BAR_H + r + 5, STEM_TOP - 5, 3):
        points += [((s * STEM_HX, y), (s, 0)) for s in (-1, 1)]
    points.append(((0.0, STEM_TOP), (0, 1)))
    return [(np.array(p, float), np.array(n, float)) for p, n in points]


CONTACTS = _contacts()


def _task(env: gym.Env) -> Any:
    """gym_pusht's PushTEnv under the wrappers (checked by what the expert reads from it)."""
    task = env.unwrapped
    if not all(hasattr(task, a) for a in ("space", "agent", "block", "goal_pose", "k_p")):
        raise TypeError(
            f"GymPushTExpert drives gym_pusht's PushTEnv (gym_pusht/PushT-v0). "
            f"Got {type(task).__name__}."
        )
    return task


class PymunkSnapshot:
    """The state of a gym_pusht PushTEnv's bodies, and a scratch world to replay it in.

    `take(task)` remembers the pusher's and the block's positions, angles and velocities;
    `restore()` rebuilds the scratch world (gym_pusht's own `_setup`, so the geometry and the
    order of shapes are the env's) and puts the bodies at that state. A fresh world on every
    restore carries no contact cache from the previous rollout, so two rollouts of the same
    targets from one snapshot are identical."""

    def __init__(self, task: Any, scratch: Any | None = None) -> None:
        self.scratch = scratch or type(task)(
            obs_type="state", block_cog=task.block_cog, damping=task.damping
        )
        self.substeps = int(round(1 / (task.dt * task.control_hz)))
        self._state: tuple[Any, ...] | None = None

    def take(self, task: Any) -> None:
        agent, block = task.agent, task.block
        self._state = (
            agent.position,
            agent.velocity,
            block.angle,
            block.position,
            block.velocity,
            block.angular_velocity,
        )

    def restore(self) -> Any:
        """The scratch PushTEnv at the remembered state (step it with `step_physics`)."""
        if self._state is None:
            raise RuntimeError("PymunkSnapshot.restore() before take(task).")
        world = self.scratch
        world._setup()  # gym_pusht's own world: walls, then the pusher, then the T
        world.collision_handeler.post_solve = _uncounted  # the env counts contacts for its info
        agent_pos, agent_vel, angle, block_pos, block_vel, block_w = self._state
        world.agent.position, world.agent.velocity = agent_pos, agent_vel
        world.block.angle = angle  # before the position: setting the angle turns about the cog
        world.block.position = block_pos
        world.block.velocity, world.block.angular_velocity = block_vel, block_w
        world.space.reindex_shapes_for_body(world.block)
        world.space.reindex_shapes_for_body(world.agent)
        return world


def _uncounted(arbiter: Any, space: Any, data: Any) -> None:
    """The scratch world's contact callback: nothing to count there."""


def step_physics(task: Any, target: np.ndarray, substeps: int) -> None:
    """One control step of gym_pusht's PD pusher towards `target`: its `step`'s arithmetic in
    the same order (so the same floats), without the coverage and observation it also computes."""
    tx, ty = float(target[0]), float(target[1])
    k_p, k_v, dt = task.k_p, task.k_v, task.dt
    agent, space = task.agent, task.space
    for _ in range(substeps):
        (px, py), (vx, vy) = agent.position, agent.velocity
        ax = k_p * (tx - px) + k_v * (0.0 - vx)
        ay = k_p * (ty - py) + k_v * (0.0 - vy)
        agent.velocity = (vx + ax * dt, vy + ay * dt)
        space.step(dt)


def block_pose(task: Any) -> tuple[float, float, float]:
    """The block's body-frame origin (x, y) and angle, as gym_pusht's goal pose is given."""
    x, y = task.block.position
    return float(x), float(y), float(task.block.angle)


def pose_error(task: Any, pose: tuple[float, float, float]) -> float:
    """Distance of the block's centre of gravity to the goal's (px) + weighted angle error."""
    gx, gy, gyaw = (float(v) for v in task.goal_pose)
    dyaw = math.remainder(pose[2] - gyaw, 2 * math.pi)
    cog = _to_world(pose, T_COG) - _to_world((gx, gy, gyaw), T_COG)
    return math.hypot(*cog) + YAW_WEIGHT_PX_PER_RAD * abs(dyaw)


def _to_world(pose: tuple[float, float, float], local: np.ndarray) -> np.ndarray:
    c, s = math.cos(pose[2]), math.sin(pose[2])
    return np.array([pose[0] + c * local[0] - s * local[1], pose[1] + s * local[0] + c * local[1]])


@dataclass
class GymPushTExpertConfig:
    push_depths_px: tuple[float, ...] = (2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 100.0)
    push_angles_rad: tuple[float, ...] = (-0.5, 0.0, 0.5)  # push direction off the normal
    travel_step_px: float = 30.0  # target advance per control step while going around
    push_step_px: float = 8.0  # target advance per control step while pushing
    settle_steps: int = 1
    clearance_px: float = 12.0  # margin outside the block's bounding circle
    choose_within: float = 0.1  # pick among candidates within this share of the best gain
    check_error_px: float = 12.0  # pose errors below this are checked for success (coverage)
    action_noise_px: float = 0.0

    def __post_init__(self) -> None:
        if not self.push_depths_px or min(self.push_depths_px) <= 0:
            raise ValueError(f"`push_depths_px` must be positive. Got {self.push_depths_px}.")
        if self.travel_step_px <= 0 or self.push_step_px <= 0:
            raise ValueError("`travel_step_px` and `push_step_px` must be > 0.")


class GymPushTExpert:
    """Sampling-MPC pusher for gym_pusht/PushT-v0; `act` needs the live env (it reads and
    simulates its pymunk state). Actions are pusher targets in pixels, as the env takes them."""

    def __init__(self, config: GymPushTExpertConfig | None = None) -> None:
        self.config = config or GymPushTExpertConfig()
        self._plan: list[np.ndarray] = []
        self._rng = np.random.default_rng(0)
        self._snapshot: PymunkSnapshot | None = None

    def reset(self, env: gym.Env, rng: np.random.Generator) -> None:
        self._plan = []
        self._rng = rng
        self._snapshot = PymunkSnapshot(_task(env))

    def act(self, env: gym.Env) -> np.ndarray:
        if self._snapshot is None:
            raise RuntimeError("call reset(env, rng) before act(env)")
        if not self._plan:
            self._plan = self._best_primitive(_task(env), self._snapshot)
        action = self._plan.pop(0)
        if self.config.action_noise_px > 0:
            action = action + self._rng.normal(0.0, self.config.action_noise_px, 2)
        return np.clip(action, ACTION_LOW, ACTION_HIGH).astype(np.float32)

    def _best_primitive(self, task: Any, snapshot: PymunkSnapshot) -> list[np.ndarray]:
        snapshot.take(task)
        approached = PymunkSnapshot(task, snapshot.scratch)
        current = pose_error(task, block_pose(task))
        candidates: list[tuple[float, list[np.ndarray]]] = []
        for contact, normal in CONTACTS:
            approach, pushes = self._primitive_targets(task, contact, normal)
            world = snapshot.restore()
            if self._simulate(world, snapshot.substeps, approach):
                candidates.append((-1.0, approach))
                continue
            # Every push from this contact starts where the approach ended.
            approached.take(world)
            for push in pushes:
                world = approached.restore()
                done = self._simulate(world, snapshot.substeps, push)
                cost = -1.0 if done else pose_error(world, block_pose(world))
                candidates.append((cost, approach + push))
        best = min(cost for cost, _ in candidates)
        tolerance = self.config.choose_within * max(current - best, 0.0) + 1e-6
        good = [plan for cost, plan in candidates if cost <= best + tolerance]
        return [a.copy() for a in good[self._rng.integers(len(good))]]

    def _simulate(self, world: Any, substeps: int, targets: list[np.ndarray]) -> bool:
        """Play `targets` in the scratch world; True if the block reached success on the way."""
        for target in targets:
            step_physics(world, np.clip(target, ACTION_LOW, ACTION_HIGH), substeps)
            pose = block_pose(world)
            if pose_error(world, pose) < self.config.check_error_px and (
                world._get_coverage() > world.success_threshold
            ):
                return True
        return False

    def _primitive_targets(
        self, task: Any, contact: np.ndarray, normal: np.ndarray
    ) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
        """Pusher targets: around the block to the pre-contact point, then one push per depth
        and angle."""
        cfg = self.config
        pose = block_pose(task)
        c, s = math.cos(pose[2]), math.sin(pose[2])
        rot = np.array([[c, -s], [s, c]])
        shape = PushShape(
            radius=T_RADIUS_PX + PUSHER_RADIUS_PX + cfg.clearance_px,
            pusher_radius=PUSHER_RADIUS_PX,
            gap=4.0,  # px between the pusher and the face before the push
            travel_step=cfg.travel_step_px,
            push_step=cfg.push_step_px,
            angles=cfg.push_angles_rad,
            depths=cfg.push_depths_px,
            settle_steps=cfg.settle_steps,
        )
        agent = np.array(task.agent.position, float)
        centre = _to_world(pose, T_COG)
        return push_paths(shape, agent, centre, _to_world(pose, contact), rot @ normal)

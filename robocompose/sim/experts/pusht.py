"""A PushT expert that plans pushes with the simulator itself (sampling MPC over push primitives).

A push primitive = go around the block (outside its bounding circle) to a contact point on its
outline, then push along the inward normal by a chosen depth. At each decision the expert
simulates every (contact point, depth) candidate from the current state on a scratch copy of the
MuJoCo data, keeps those that best reduce the pose error to the goal, picks one of them at random
(this is where the demos get their multimodality: which side to push from), and plays it open
loop. Contact approaches are simulated once and shared by all depths at that contact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import gymnasium as gym
import mujoco
import numpy as np

from robocompose.sim.experts.push_paths import PushShape, push_paths
from robocompose.sim.pusht import (
    GOAL_POSE,
    PUSHER_RADIUS_M,
    T_RADIUS_M,
    T_RECTS,
    WORKSPACE_M,
    PushTEnv,
)
from robocompose.sim.skill_labels import PUSH_T_LABEL
from robocompose.sim.snapshot import SimSnapshot

# Angle error is weighted so that the two terms cost about the same coverage: 2 mm ~ 2 degrees.
YAW_WEIGHT_M_PER_RAD = 0.06


def _contacts() -> list[tuple[np.ndarray, np.ndarray]]:
    """Contact points on the T outline with outward normals, in the block frame."""
    bar, stem = T_RECTS
    r = PUSHER_RADIUS_M
    bar_top, bar_bottom = bar.cy + bar.hy, bar.cy - bar.hy
    stem_bottom = stem.cy - stem.hy
    points = [((x, bar_top), (0, 1)) for x in np.linspace(-0.8, 0.8, 5) * bar.hx]
    points += [((s * bar.hx, bar.cy), (s, 0)) for s in (-1, 1)]
    under_x = (stem.hx + r + bar.hx) / 2 + r / 2
    points += [((s * under_x, bar_bottom), (0, -1)) for s in (-1, 1)]
    for y in np.linspace(stem_bottom + 0.01, bar_bottom - r - 0.005, 3):
        points += [((s * stem.hx, y), (s, 0)) for s in (-1, 1)]
    points.append(((0.0, stem_bottom), (0, -1)))
    return [(np.array(p, float), np.array(n, float)) for p, n in points]


CONTACTS = _contacts()


def pose_error(pose: tuple[float, float, float]) -> float:
    dx, dy = pose[0] - GOAL_POSE[0], pose[1] - GOAL_POSE[1]
    dyaw = math.remainder(pose[2] - GOAL_POSE[2], 2 * math.pi)
    return math.hypot(dx, dy) + YAW_WEIGHT_M_PER_RAD * abs(dyaw)


@dataclass
class PushTExpertConfig:
    push_depths_m: tuple[float, ...] = (0.003, 0.007, 0.015, 0.03, 0.06, 0.1)
    push_angles_rad: tuple[float, ...] = (-0.5, 0.0, 0.5)  # push direction off the normal
    travel_step_m: float = 0.04  # target advance per control step while going around
    push_step_m: float = 0.01  # target advance per control step while pushing
    settle_steps: int = 2
    clearance_m: float = 0.015  # margin outside the block's bounding circle
    choose_within: float = 0.1  # pick among candidates within this share of the best gain
    action_noise_m: float = 0.0


class PushTExpert:
    """Sampling-MPC pusher; `act` needs the live env (it reads and simulates its MuJoCo state).

    Its whole episode is one skill, `skill` = push(t_block, goal)."""

    skill = PUSH_T_LABEL

    def __init__(self, config: PushTExpertConfig | None = None) -> None:
        self.config = config or PushTExpertConfig()
        self._plan: list[np.ndarray] = []
        self._rng = np.random.default_rng(0)
        self._start: SimSnapshot | None = None
        self._approached: SimSnapshot | None = None

    def reset(self, env: gym.Env, rng: np.random.Generator) -> None:
        self._plan = []
        self._rng = rng
        self._start = SimSnapshot(_task(env).model)
        self._approached = SimSnapshot(_task(env).model, self._start.scratch)

    def act(self, env: gym.Env) -> np.ndarray:
        if not self._plan:
            self._plan = self._best_primitive(_task(env))
        action = self._plan.pop(0)
        if self.config.action_noise_m > 0:
            action = action + self._rng.normal(0.0, self.config.action_noise_m, 2)
        return np.clip(action, -WORKSPACE_M, WORKSPACE_M).astype(np.float32)

    # -- planning ----------------------------------------------------------------------
    def _best_primitive(self, task: PushTEnv) -> list[np.ndarray]:
        start, approached = self._start, self._approached
        assert start is not None and approached is not None, "call reset(env, rng) before act(env)"
        start.take(task.data)
        current = self.cost(task.block_pose())

        candidates: list[tuple[float, list[np.ndarray]]] = []
        for contact, normal in CONTACTS:
            approach, pushes = self._primitive_targets(task, contact, normal)
            scratch = start.restore()
            done = self._simulate(task, scratch, approach)
            if done:
                candidates.append((-1.0, approach))
                continue
            approached.take(scratch)
            for push in pushes:
                scratch = approached.restore()
                done = self._simulate(task, scratch, push)
                pose = _block_pose(task, scratch)
                cost = -1.0 if done else self.cost(pose)
                candidates.append((cost, approach + push))

        best = min(cost for cost, _ in candidates)
        gain = max(current - best, 0.0)
        tolerance = self.config.choose_within * gain + 1e-6
        good = [plan for cost, plan in candidates if cost <= best + tolerance]
        return [a.copy() for a in good[self._rng.integers(len(good))]]

    def _simulate(self, task: PushTEnv, data: mujoco.MjData, targets: list[np.ndarray]) -> bool:
        """Play `targets` on `data`; True if the block reached success on the way."""
        for target in targets:
            data.ctrl[:2] = target
            mujoco.mj_step(task.model, data, nstep=task.n_substeps)
            if self.reached(task, _block_pose(task, data)):
                return True
        return False

    def cost(self, pose: tuple[float, float, float]) -> float:
        """What a push should make small: the pose error to the goal T (subclasses aim
        elsewhere)."""
        return pose_error(pose)

    def reached(self, task: PushTEnv, pose: tuple[float, float, float]) -> bool:
        """A simulated push that gets here ends the plan: the task's success."""
        return task.coverage_of(pose) >= task.success_coverage

    def _primitive_targets(
        self, task: PushTEnv, contact: np.ndarray, normal: np.ndarray
    ) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
        """Pusher targets: around the block to the pre-contact point, then one push per depth."""
        cfg = self.config
        bx, by, yaw = task.block_pose()
        centre = np.array([bx, by])
        rot = np.array([[math.cos(yaw), -math.sin(yaw)], [math.sin(yaw), math.cos(yaw)]])
        shape = PushShape(
            radius=T_RADIUS_M + PUSHER_RADIUS_M + cfg.clearance_m,
            pusher_radius=PUSHER_RADIUS_M,
            gap=0.008,
            travel_step=cfg.travel_step_m,
            push_step=cfg.push_step_m,
            angles=cfg.push_angles_rad,
            depths=cfg.push_depths_m,
            settle_steps=cfg.settle_steps,
            limit=WORKSPACE_M,
        )
        return push_paths(shape, task.pusher_xy(), centre, centre + rot @ contact, rot @ normal)


def _task(env: gym.Env) -> PushTEnv:
    task = env.unwrapped
    if not isinstance(task, PushTEnv):
        raise TypeError(f"PushTExpert drives a PushTEnv. Got {type(task).__name__}.")
    return task


def _block_pose(task: PushTEnv, data: mujoco.MjData) -> tuple[float, float, float]:
    i = task.block_qpos_adr
    return float(data.qpos[i]), float(data.qpos[i + 1]), float(data.qpos[i + 2])

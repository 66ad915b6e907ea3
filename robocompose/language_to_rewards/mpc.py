"""Predictive sampling: a sampling MPC over MuJoCo rollouts of a reward (Language to Rewards).

The low level of Language to Rewards (Yu et al. 2023) is MuJoCo MPC; its simplest planner,
predictive sampling (Howell et al. 2022), is this one. A plan is a piecewise-linear action
spline (`knots` points over `horizon` control steps). At every control step the MPC copies the
live state onto a scratch `MjData`, rolls out the warm-started nominal plan and `samples - 1`
Gaussian perturbations of it, scores each by the summed reward of its states, keeps the best
as the new nominal, and returns its first action; the nominal is then shifted one step forward
in time (the warm start of the next call). The PushT expert plans the same way over push
primitives instead of splines; both simulate on a copy of the live state (`SimSnapshot`).

    mpc = SamplingMPC(gantry_plant(env), reward, MPCConfig(samples=16, horizon=12))
    mpc.reset(env.data, first_action)
    action = mpc.act(env.data)   # every control step
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import mujoco
import numpy as np

from robocompose.sim.snapshot import SimSnapshot

Reward = Callable[[mujoco.MjData], float]  # a state's reward (higher is better)


@dataclass(frozen=True)
class Plant:
    """How a control step acts on a MuJoCo model: what the MPC samples and simulates."""

    model: mujoco.MjModel
    n_substeps: int  # physics steps per control step
    apply: Callable[[mujoco.MjData, np.ndarray], None]  # write an action into data.ctrl
    low: np.ndarray  # action bounds
    high: np.ndarray
    noise: np.ndarray  # std of the knot perturbations, per action dimension

    def __post_init__(self) -> None:
        shapes = {a.shape for a in (self.low, self.high, self.noise)}
        if len(shapes) != 1 or len(self.low.shape) != 1:
            raise ValueError(
                f"`low`, `high` and `noise` must be 1-d of one length. Got shapes {shapes}."
            )
        if np.any(self.low >= self.high) or np.any(self.noise < 0):
            raise ValueError("need `low` < `high` and `noise` >= 0 in every action dimension.")


@dataclass
class MPCConfig:
    samples: int = 16  # rollouts per control step, the nominal plan included
    horizon: int = 12  # control steps per rollout
    knots: int = 4  # spline points over the horizon
    seed: int = 0

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise ValueError(f"`samples` must be >= 1. Got {self.samples}.")
        if self.horizon < 2 or not 2 <= self.knots <= self.horizon:
            raise ValueError(
                f"need `horizon` >= 2 and 2 <= `knots` <= `horizon`. Got horizon={self.horizon}, "
                f"knots={self.knots}."
            )


class SamplingMPC:
    """Predictive sampling of `reward` on `plant`; see the module docstring."""

    def __init__(self, plant: Plant, reward: Reward, config: MPCConfig | None = None) -> None:
        self.plant, self.reward = plant, reward
        self.config = config or MPCConfig()
        self.snapshot = SimSnapshot(plant.model)
        self._times = np.linspace(0.0, self.config.horizon - 1, self.config.knots)
        self._rng = np.random.default_rng(self.config.seed)
        self.nominal = np.zeros((self.config.knots, len(plant.low)))
        self.last_return = float("nan")

    def reset(self, action: np.ndarray) -> None:
        """Start from a plan that holds `action` (e.g. the current commanded pose)."""
        action = np.clip(np.asarray(action, float), self.plant.low, self.plant.high)
        if action.shape != self.plant.low.shape:
            raise ValueError(
                f"`action` must have shape {self.plant.low.shape}. Got {action.shape}."
            )
        self.nominal = np.tile(action, (self.config.knots, 1))
        self._rng = np.random.default_rng(self.config.seed)

    def act(self, data: mujoco.MjData) -> np.ndarray:
        """The first action of the best sampled plan from `data`'s state (data is not changed)."""
        self.snapshot.take(data)
        best, best_return = self.nominal, -np.inf
        for knots in self._candidates():
            total = self.rollout(knots)
            if total > best_return:
                best, best_return = knots, total
        self.last_return = best_return
        actions = self.actions(best)
        self.nominal = self._knots_of(np.vstack([actions[1:], actions[-1:]]))
        return actions[0]

    def rollout(self, knots: np.ndarray) -> float:
        """Summed reward of playing the spline `knots` from the snapshot's state."""
        plant, data = self.plant, self.snapshot.restore()
        total = 0.0
        for action in self.actions(knots):
            plant.apply(data, action)
            mujoco.mj_step(plant.model, data, nstep=plant.n_substeps)
            total += self.reward(data)
        return total

    def actions(self, knots: np.ndarray) -> np.ndarray:
        """(horizon, action dim) actions of a spline, linear between its knots."""
        steps = np.arange(self.config.horizon)
        return np.stack([np.interp(steps, self._times, k) for k in knots.T], axis=1)

    def _knots_of(self, actions: np.ndarray) -> np.ndarray:
        steps = np.arange(self.config.horizon)
        return np.stack([np.interp(self._times, steps, a) for a in actions.T], axis=1)

    def _candidates(self) -> list[np.ndarray]:
        plant, shape = self.plant, self.nominal.shape
        noisy = [
            np.clip(
                self.nominal + self._rng.normal(size=shape) * plant.noise, plant.low, plant.high
            )
            for _ in range(self.config.samples - 1)
        ]
        return [self.nominal, *noisy]

"""A generic expert for goal-conditioned envs: a proportional controller on the goal error.

For envs whose observation is gymnasium-robotics' goal dict and whose action moves the achieved
goal directly along some action dimensions (Fetch reach: the gripper's x, y, z), the action
`gain * (desired_goal - achieved_goal)`, clipped to the action space, reaches the goal. Which
action dimensions move the goal, and what the others hold, are config, so a preset can point it
at another env of that shape with no code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class GoalReachingExpertConfig:
    gain: float = 10.0
    goal_dims: tuple[int, ...] = (0, 1, 2)  # the action dimensions that move the achieved goal
    rest: float = 0.0  # the value of every other action dimension (Fetch: the gripper)
    action_noise: float = 0.0  # std of Gaussian noise on the goal dimensions, in action units

    def __post_init__(self) -> None:
        self.goal_dims = tuple(int(d) for d in self.goal_dims)
        if not self.goal_dims:
            raise ValueError("`goal_dims` must name at least one action dimension. Got ().")
        if self.gain <= 0 or self.action_noise < 0:
            raise ValueError(
                f"`gain` must be > 0 and `action_noise` >= 0. Got {self.gain}, {self.action_noise}."
            )


class GoalReachingExpert:
    """Acts on the adapter's last raw observation (`raw_observation`, a goal dict)."""

    def __init__(self, config: GoalReachingExpertConfig) -> None:
        self.config = config
        self.rng = np.random.default_rng(0)

    def reset(self, env: Any, rng: np.random.Generator) -> None:
        self.rng = rng
        space = env.action_space
        if max(self.config.goal_dims) >= space.shape[0]:
            raise ValueError(
                f"`goal_dims` {self.config.goal_dims} exceed the env's action shape {space.shape}."
            )

    def act(self, env: Any) -> np.ndarray:
        raw = env.get_wrapper_attr("raw_observation")
        if not isinstance(raw, dict) or not {"achieved_goal", "desired_goal"} <= set(raw):
            raise ValueError(
                "GoalReachingExpert needs a goal dict observation (achieved_goal, desired_goal); "
                f"the env gives {type(raw).__name__}."
            )
        error = np.asarray(raw["desired_goal"], float) - np.asarray(raw["achieved_goal"], float)
        dims = list(self.config.goal_dims)
        if len(error) != len(dims):
            raise ValueError(
                f"the goal has {len(error)} dimensions, `goal_dims` names {len(dims)}: one "
                "action dimension per goal dimension."
            )
        space = env.action_space
        action = np.full(space.shape, self.config.rest, dtype=np.float64)
        action[dims] = self.config.gain * error
        if self.config.action_noise:
            action[dims] += self.rng.normal(0.0, self.config.action_noise, len(dims))
        return np.clip(action, space.low, space.high).astype(space.dtype)

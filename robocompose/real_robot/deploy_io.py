"""What both deploy loops share (the in-process one in `deploy.py`, the control process's in
`process_loop.py`): the fixed-rate tick clock, reading the robot's observation, and the check
that the policy takes what the robot observes and commands what it moves."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from robocompose.real_robot.base import Arm, PolicySpec
from robocompose.real_robot.drivers.twin import TwinArm


def twin_observer(twin: TwinArm) -> Callable[[], tuple[dict, bool | None, float]]:
    """The twin's observation, success and score, now."""

    def observe() -> tuple[dict, bool | None, float]:
        seen = twin.observe()
        return seen.obs, seen.success, seen.score

    return observe


def observer_for(
    observer: str | None, arm: Arm | None
) -> Callable[[], tuple[dict, bool | None, float]]:
    """A function giving (observation dict, success or None, score) now: the twin's own, else
    the deploy config's `observer` ('module:function')."""
    if isinstance(arm, TwinArm):
        return twin_observer(arm)
    assert observer is not None  # DeployConfig refuses a real arm without one
    from robocompose.sim.external import import_preset_module

    module, _, name = observer.partition(":")
    try:  # a module in the current folder imports too
        function = getattr(import_preset_module(module, "observer"), name)
    except (ImportError, AttributeError, ValueError) as e:
        raise ValueError(
            f"`observer` {observer!r} must name an importable 'module:function': {e}"
        ) from None
    return lambda: (function(), None, 0.0)


def arm_action_dim(arm: Arm) -> int:
    """What the arm takes as one action: x, y, z and the gripper; PushT's pusher x, y."""
    return 2 if isinstance(arm, TwinArm) and arm.spec.name == "PushT" else 4


def check_compatible(spec: PolicySpec, obs: dict[str, np.ndarray], action_dim: int) -> None:
    """The policy must take what the robot observes and command what it moves."""
    for key, key_spec in spec.obs.items():
        if key not in obs:
            raise ValueError(f"the policy needs observation `{key}`; the robot gives {list(obs)}.")
        if tuple(np.shape(obs[key])) != key_spec.shape:
            raise ValueError(
                f"observation `{key}`: the policy takes shape {key_spec.shape}, the robot gives "
                f"{np.shape(obs[key])}."
            )
    if spec.action_dim != action_dim:
        raise ValueError(
            f"the policy's actions have dimension {spec.action_dim}; this arm takes {action_dim}."
        )


class Ticker:
    """A fixed-rate clock: tick k starts at t0 + k * period_s; a late loop skips to the current
    tick instead of bunching the ticks it missed."""

    def __init__(self, period_s: float) -> None:
        self.period_s = period_s
        self.t0 = time.monotonic()

    def deadline(self, tick: int) -> float:
        """When tick `tick`'s time is up (the next tick's start)."""
        return self.t0 + (tick + 1) * self.period_s

    def wait_next(self, tick: int) -> int:
        """Sleep until the tick after `tick` starts; the tick to run now."""
        due = self.deadline(tick)
        now = time.monotonic()
        if now < due:
            time.sleep(due - now)
            return tick + 1
        return max(tick + 1, int((now - self.t0) / self.period_s))

"""Inputs and actions held to the range the policy was trained on, so that no finite but absurd
value (a state of 1e35, a prefix of 1e308) turns into inf inside the network and a chunk of NaN.

    bounds = {"state": (scale, offset), "action": (scale, offset)}   # x * scale + offset maps
    check = RangeCheck(bounds, factor=10.0, clip=False)              # the training [min, max]
    obs, clipped = check.inputs(obs)                                 # to [-1, 1]
    check_actions(reply, spec, check)                                # before the reply leaves

A value is out of range when its normalised magnitude exceeds `factor` (factor 1: the training
data's own [min, max]). Out-of-range inputs raise `OutOfRange` naming the key, or are clipped to
the bound when `clip`; actions are never clipped: a chunk that is not finite, not of the spec's
shape, or beyond `action_factor` raises `UnsafeActions`, and the server answers with that error
instead (a prefix clipped to the bound pulls the chunk there, so the two factors are separate).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from robocompose.real_robot.base import PolicySpec
from robocompose.real_robot.obs_check import PREFIX_KEY

ACTION_KEY = "action"
Bounds = Mapping[str, tuple[np.ndarray, np.ndarray]]  # key -> (scale, offset), per dimension


class OutOfRange(ValueError):
    """An input far outside the training data's range (the text names the key)."""


class UnsafeActions(ValueError):
    """A chunk the server refuses to send (the text names the cause)."""


def _normalized(x: np.ndarray, scale: np.ndarray, offset: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x, np.float64) * scale + offset


@dataclass(frozen=True)
class RangeCheck:
    """`bounds` per observation key and for `ACTION_KEY`; keys without bounds are unchecked."""

    bounds: Bounds
    factor: float = 10.0
    clip: bool = False
    action_factor: float = 10.0

    def _excess(self, x: np.ndarray, bound: str) -> tuple[np.ndarray, float]:
        """(x normalised by `bound`'s statistics, its largest magnitude)."""
        scale, offset = self.bounds[bound]
        y = _normalized(x, scale, offset)
        return y, float(np.max(np.abs(y))) if y.size else 0.0

    def inputs(self, obs: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """`obs` with every bounded key in range, and the keys that were clipped."""
        checked, clipped = dict(obs), []
        keys = [(k, k) for k in obs if k in self.bounds and k != ACTION_KEY]
        if PREFIX_KEY in obs and ACTION_KEY in self.bounds:
            keys.append((PREFIX_KEY, ACTION_KEY))
        for key, bound in keys:
            y, worst = self._excess(obs[key], bound)
            if worst <= self.factor:
                continue
            if not self.clip:
                raise OutOfRange(
                    f"`{key}` lies {worst:.3g} half-ranges from the centre of the policy's "
                    f"training data; at most {self.factor:g} (limits.range_factor) are served."
                )
            scale, offset = self.bounds[bound]
            inside = (np.clip(y, -self.factor, self.factor) - offset) / scale
            checked[key] = inside.astype(obs[key].dtype)
            clipped.append(key)
        return checked, clipped

    def actions(self, actions: np.ndarray) -> None:
        """Raise `UnsafeActions` when `actions` lie out of range."""
        if ACTION_KEY not in self.bounds:
            return
        _, worst = self._excess(actions, ACTION_KEY)
        if worst > self.action_factor:
            raise UnsafeActions(
                f"`actions` lie {worst:.3g} half-ranges from the centre of the policy's "
                f"training actions; at most {self.action_factor:g} (limits.action_range_factor) "
                "are sent."
            )


def check_actions(reply: dict[str, Any], spec: PolicySpec, check: RangeCheck | None) -> None:
    """Raise `UnsafeActions` unless `reply["actions"]` is a finite (chunk_length, A) array in
    range."""
    actions = reply.get("actions")
    shape = (spec.chunk_length, spec.action_dim)
    if not isinstance(actions, np.ndarray) or actions.dtype.kind not in "fiu":
        raise UnsafeActions(f"`actions` must be a numeric array {shape}. Got {type(actions)}.")
    if actions.shape != shape:
        raise UnsafeActions(f"`actions` must have shape {shape}. Got {actions.shape}.")
    bad = int(np.size(actions) - np.count_nonzero(np.isfinite(actions)))
    if bad:
        raise UnsafeActions(f"`actions` must be finite. Got NaN or inf in {bad} values.")
    if check is not None:
        check.actions(actions)

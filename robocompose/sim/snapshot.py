"""Simulate on a copy: remember a live `MjData`'s state and set a scratch `MjData` back to it.

The planners that simulate before they act (the PushT expert's push search, the Language to
Rewards MPC) roll candidates out from the live state without touching it:

    snap = SimSnapshot(model)
    snap.take(env.data)
    for plan in candidates:
        data = snap.restore()      # the scratch data, at the remembered state
        ...step `data`...

Counterfactual labels (`robocompose.composition.counterfactual`) restore the env's own data
instead (`SimSnapshot(model, env.data)`): each candidate chunk runs on from the same state.
"""

from __future__ import annotations

import mujoco
import numpy as np


class SimSnapshot:
    """One remembered integration state (time, qpos, qvel, act, ctrl, mocap, ...) and the
    scratch `MjData` it is restored into (shared with other snapshots when given)."""

    SPEC = mujoco.mjtState.mjSTATE_INTEGRATION

    def __init__(self, model: mujoco.MjModel, scratch: mujoco.MjData | None = None) -> None:
        self.model = model
        self.scratch = scratch if scratch is not None else mujoco.MjData(model)
        self._state = np.empty(mujoco.mj_stateSize(model, self.SPEC))

    def take(self, data: mujoco.MjData) -> None:
        """Remember `data`'s state."""
        mujoco.mj_getState(self.model, data, self._state, self.SPEC)

    @property
    def state(self) -> np.ndarray:
        """A copy of the remembered state vector (comparing two says whether two states are
        the same, bit for bit)."""
        return self._state.copy()

    def restore(self) -> mujoco.MjData:
        """The scratch data, set back to the remembered state."""
        mujoco.mj_setState(self.model, self.scratch, self._state, self.SPEC)
        return self.scratch

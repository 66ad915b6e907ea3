"""The two contracts of the hardware bridge: what a served policy tells its clients, and what an
arm does.

    policy box                                 robot computer (fixed-rate loop)
    PolicyServer(ServedPolicy)  <-- wire -->   PolicyClient -> ChunkExecutor -> SafetyLayer -> Arm

A `PolicySpec` travels as the server's metadata on connect: with it a client knows every
observation key (shape, dtype, history length), the action dimension, the chunk length and the
control rate, and needs nothing else. Observations travel with their history stacked on the first
axis: key -> (n_obs_steps, *shape).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


@dataclass(frozen=True)
class ObsKeySpec:
    """One observation key of a single frame: shape and numpy dtype name (e.g. "float64")."""

    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class PolicySpec:
    """What a client must know to talk to a policy (sent as the server's metadata)."""

    obs: dict[str, ObsKeySpec]
    n_obs_steps: int
    action_dim: int
    chunk_length: int  # actions per reply, from the current (last observed) step on
    n_action_steps: int  # how many of them a synchronous client executes before asking again
    control_hz: float  # the rate the policy's actions are meant for
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. task id, policy description

    def to_metadata(self) -> dict[str, Any]:
        return {
            "observation_spec": {
                "history": self.n_obs_steps,
                "keys": {
                    k: {"shape": list(s.shape), "dtype": s.dtype} for k, s in self.obs.items()
                },
            },
            "action_spec": {
                "dim": self.action_dim,
                "chunk_length": self.chunk_length,
                "n_action_steps": self.n_action_steps,
                "control_hz": self.control_hz,
            },
            **self.extra,
        }

    @classmethod
    def from_metadata(cls, metadata: dict[str, Any]) -> PolicySpec:
        try:
            obs_spec, action_spec = metadata["observation_spec"], metadata["action_spec"]
            extra = {
                k: v for k, v in metadata.items() if k not in ("observation_spec", "action_spec")
            }
            return cls(
                obs={
                    k: ObsKeySpec(tuple(int(n) for n in s["shape"]), str(s["dtype"]))
                    for k, s in obs_spec["keys"].items()
                },
                n_obs_steps=int(obs_spec["history"]),
                action_dim=int(action_spec["dim"]),
                chunk_length=int(action_spec["chunk_length"]),
                n_action_steps=int(action_spec["n_action_steps"]),
                control_hz=float(action_spec["control_hz"]),
                extra=extra,
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"server metadata is not a robocompose policy spec: {e!r}") from e


class ServedPolicy(Protocol):
    """What a server serves (openpi's interface): `infer(obs) -> {"actions": (chunk, A)}`.

    `obs` holds every key of `spec.obs` with shape (n_obs_steps, *shape), and optionally
    "prefix_actions" (m, A): the previous chunk's actions for the first m steps of the new one,
    of which the first "prefix_committed" (int k <= m, default m) will run before it arrives
    (real-time chunking pulls the chunk toward them: k fixed, the rest with decaying weight);
    "seed" (int, the episode seed) and "chunk_index" (int) for reproducible noise
    (`robocompose.real_robot.obs_check` lists and checks them). A policy may carry
    `training_bounds` (key -> (scale, offset) mapping its training data to [-1, 1]): the server
    then holds inputs and actions to that range (`robocompose.real_robot.ranges`); and
    `infer_batch(list of obs) -> list of replies`, which a server with `max_batch` > 1 calls."""

    spec: PolicySpec

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]: ...

    def reset(self) -> None: ...


class ArmStoppedError(RuntimeError):
    """A command reached an arm after `stop()` and before it was reset."""


@dataclass(frozen=True)
class ArmState:
    """A reading of the arm, in the robot's base frame."""

    time_s: float  # time.monotonic() of the reading
    ee_pos_m: np.ndarray  # (3,)
    gripper: float  # command scale: -1 open .. +1 closed
    joints_rad: np.ndarray | None = None  # (n_joints,) where the arm reports them


class Arm(ABC):
    """One interface for the MuJoCo twin and every real arm driver.

    Commands are targets, not trajectories: the caller sends one per control period, and an arm
    that receives none keeps its last target (the safety layer's watchdog then sends `hold`)."""

    @abstractmethod
    def read_state(self) -> ArmState: ...

    @abstractmethod
    def command_ee(self, pos_m: np.ndarray, gripper: float | None = None) -> None:
        """Move toward the end-effector position (3,) m; `gripper` in [-1, 1] (None: unchanged)."""

    def command_joints(self, joints_rad: np.ndarray, gripper: float | None = None) -> None:
        raise NotImplementedError(f"{type(self).__name__} takes end-effector targets only.")

    @abstractmethod
    def hold(self) -> None:
        """Stay where the arm is now (the target becomes the current pose)."""

    @abstractmethod
    def stop(self) -> None:
        """Emergency stop: halt now; later commands are refused until the arm is reset."""

    def keepalive(self) -> None:  # noqa: B027 (optional: only arms with a link watchdog)
        """Tell the arm's own communication watchdog the commander is alive while it sends no
        command (the control process calls it on every tick it holds)."""

    def close(self) -> None:  # noqa: B027 (optional: an arm holding no connection skips it)
        """Release the connection (idempotent)."""

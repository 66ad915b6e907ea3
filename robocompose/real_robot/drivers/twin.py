"""The MuJoCo twin: one of our sim tasks behind the `Arm` interface, run as if it were hardware.

Physics advances in its own thread, one model timestep at a time, paced by the wall clock: after
`t` seconds of wall time the simulation has advanced `t * time_scale` seconds (the default
`time_scale=1` is real time; a benchmark may run faster, and then its control loop must run
`time_scale` times faster too to see the same rate). The servo targets are whatever was commanded
last; nothing happens at a command except that the targets change, so a caller that stops sending
leaves the arm at its last target, like a real position-controlled arm.

The env's fixed 10 Hz `step` maps onto the continuous twin like this: a command takes effect at
the next physics substep (at most one model timestep, 4-5 ms of sim time, later than in the
harness), and success and score are evaluated on the env's own control grid (every
`n_substeps` substeps since reset), latched like the harness does (success at any check,
the best score). A policy commanding at the env's rate therefore sees the harness's dynamics up
to that substep of latency. `realtime=False` removes even that: no thread runs and the caller
advances sim time itself with `advance(seconds)`, so `command_ee(a); advance(0.1)` is exactly
`env.step(a)`.

Usage (the deploy loop, a test, or a dry run):

    twin = TwinArm("PickPlace")              # or "Stack", "PickPlaceTwoCubes", "PushT"
    first = twin.reset(seed=100_000)         # TwinObservation: obs dict, success, score
    pos_m, grip = ee_target_from_action(action)   # policy action (4,) or PushT's (2,)
    twin.command_ee(pos_m, grip)
    state = twin.read_state()                # ArmState: ee_pos_m (3,), gripper in [-1, 1]
    now = twin.observe()                     # the env's observation dict + success/score
    with twin.lock:                          # privileged access (scripted experts) is consistent
        action = expert.act(twin.env)        # only while physics is held
    twin.stop()                              # frozen; commands raise ArmStoppedError until reset
    twin.close()

PushT has a pusher, not a gripper: command_ee uses x, y only (z is ignored) and the reported
ee position has the pusher's fixed height `PUSHER_Z_M`; the gripper reads -1 (open) always.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from robocompose.real_robot.base import Arm, ArmState, ArmStoppedError
from robocompose.sim import gantry
from robocompose.sim.base import MujocoTaskEnv
from robocompose.sim.pick_place import TabletopEnv
from robocompose.sim.pusht import WORKSPACE_M as PUSHT_WORKSPACE_M
from robocompose.sim.pusht import PushTEnv
from robocompose.sim.tasks import get_task, make_env

PUSHER_Z_M = 0.011  # height of the PushT pusher's centre above the table
MAX_LAG_S = 0.25  # sim time the physics thread may fall behind before it stops catching up


@dataclass(frozen=True)
class TwinObservation:
    """What the twin's "cameras and sensors" see: the env's observation dict, and the task's
    success (latched since reset) and best score since reset."""

    obs: dict[str, np.ndarray]
    success: bool
    score: float
    sim_time_s: float
    time_s: float  # time.monotonic() of the reading


def ee_target_from_action(action: np.ndarray) -> tuple[np.ndarray, float | None]:
    """Split a task action into an `Arm.command_ee` target: gantry (4,) -> xyz, gripper;
    PushT (2,) -> (x, y, PUSHER_Z_M), no gripper."""
    action = np.asarray(action, dtype=np.float64)
    if action.shape == (4,):
        return action[:3].copy(), float(action[3])
    if action.shape == (2,):
        return np.array([action[0], action[1], PUSHER_Z_M]), None
    raise ValueError(f"action must have shape (4,) (gantry) or (2,) (PushT). Got {action.shape}.")


def action_from_state(state: ArmState, action_dim: int) -> np.ndarray:
    """The task action that holds the arm where `state` says it is (the inverse of
    `ee_target_from_action`)."""
    if action_dim == 4:
        return np.append(state.ee_pos_m, state.gripper)
    if action_dim == 2:
        return state.ee_pos_m[:2].copy()
    raise ValueError(f"`action_dim` must be 4 (gantry) or 2 (PushT). Got {action_dim}.")


class TwinArm(Arm):
    """A sim task run as hardware; see the module docstring.

    Args:
        task: a suite task name ("PickPlace", "PickPlaceTwoCubes", "Stack", "PushT").
        obs_keys: which observation keys `observe` returns ("state", "image").
        time_scale: sim seconds per wall second (> 0; 1 = real time).
        realtime: False runs no physics thread: the caller advances time with `advance`.
        command_timeout_s: hold (targets := the current pose) once no command came for this
            long in sim time, as a real arm's link watchdog does (None: never).
        env_kwargs: passed to the task's env (e.g. `image_size`, `camera`).
    """

    def __init__(
        self,
        task: str = "PickPlace",
        *,
        obs_keys: tuple[str, ...] = ("state",),
        time_scale: float = 1.0,
        realtime: bool = True,
        command_timeout_s: float | None = None,
        **env_kwargs: Any,
    ) -> None:
        if command_timeout_s is not None and not command_timeout_s > 0:
            raise ValueError(f"`command_timeout_s` must be > 0 or None. Got {command_timeout_s}.")
        if not (np.isfinite(time_scale) and time_scale > 0):
            raise ValueError(f"`time_scale` must be > 0. Got {time_scale}.")
        self.spec = get_task(task)
        self.env: gym.Env = make_env(self.spec.name, obs_keys=tuple(obs_keys), **env_kwargs)
        self.task: MujocoTaskEnv = self.env.unwrapped
        if not isinstance(self.task, TabletopEnv | PushTEnv):
            raise TypeError(f"the twin drives gantry tasks and PushT. Got {type(self.task)}.")
        self.time_scale = float(time_scale)
        self.realtime = bool(realtime)
        self.control_hz = self.task.control_hz
        self.episode_s = self.spec.max_episode_steps / self.control_hz
        self.lock = threading.RLock()  # held while physics steps; reentrant for signal handlers
        self._timestep_s = float(self.task.model.opt.timestep)
        self._grip = -1.0
        self._stopped = False
        self._substeps = 0
        self._success, self._score = False, 0.0
        self.lag_events = 0  # times the thread fell more than MAX_LAG_S behind and skipped ahead
        self.command_timeout_s = command_timeout_s
        self.command_timeouts = 0  # holds because no command came within command_timeout_s
        self._last_command_sim_s: float | None = None
        self._t0 = time.monotonic()
        self._error: BaseException | None = None
        self._quit = threading.Event()
        self._thread: threading.Thread | None = None
        self.reset()
        if self.realtime:
            self._thread = threading.Thread(target=self._run, name="twin-physics", daemon=True)
            self._thread.start()

    # -- the Arm interface -------------------------------------------------------------------
    def read_state(self) -> ArmState:
        with self.lock:
            self._check()
            return ArmState(time.monotonic(), self._ee_pos(), self._gripper_reading())

    def command_ee(self, pos_m: np.ndarray, gripper: float | None = None) -> None:
        pos = np.asarray(pos_m, dtype=np.float64)
        if pos.shape != (3,) or not np.all(np.isfinite(pos)):
            raise ValueError(f"`pos_m` must be a finite (3,) position in m. Got {pos_m!r}.")
        if gripper is not None and not np.isfinite(gripper):
            raise ValueError(f"`gripper` must be finite in [-1, 1]. Got {gripper!r}.")
        with self.lock:
            self._check()
            if self._stopped:
                raise ArmStoppedError("the twin is stopped: reset() it before commanding again.")
            if gripper is not None:
                self._grip = float(np.clip(gripper, -1.0, 1.0))
            self._set_targets(pos)
            if self.command_timeout_s is not None:
                self._last_command_sim_s = self.sim_time_s

    def hold(self) -> None:
        with self.lock:
            self._check()
            self._set_targets(self._ee_pos())

    def stop(self) -> None:
        """Freeze the targets at the current pose (the gripper keeps its command, so a held
        cube is not dropped) and refuse commands until `reset`."""
        with self.lock:
            self._set_targets(self._ee_pos())
            self._stopped = True

    def reenable(self) -> None:
        """Accept commands again after `stop`; the episode goes on from where it is."""
        with self.lock:
            self._stopped = False

    def close(self) -> None:
        self._quit.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        self._thread = None
        with self.lock:
            self.env.close()

    # -- twin-only ---------------------------------------------------------------------------
    @property
    def stopped(self) -> bool:
        return self._stopped

    @property
    def timestep_s(self) -> float:
        return self._timestep_s

    @property
    def sim_time_s(self) -> float:
        return self._substeps * self._timestep_s

    def reset(self, seed: int | None = None) -> TwinObservation:
        """Start a new episode of the task on `seed`; clears a stop."""
        with self.lock:
            self._check()
            _, info = self.env.reset(seed=seed)
            self._grip = -1.0
            self._stopped = False
            self._substeps = 0
            self._last_command_sim_s = None
            self._success, self._score = bool(info["success"]), float(info["score"])
            self._t0 = time.monotonic()
            return self.observe()

    def observe(self) -> TwinObservation:
        """The env's observation dict now (image rendered if asked), with success/score."""
        with self.lock:
            self._check()
            return TwinObservation(
                obs=self.task._obs(),
                success=self._success,
                score=self._score,
                sim_time_s=self.sim_time_s,
                time_s=time.monotonic(),
            )

    def advance(self, duration_s: float) -> None:
        """Step physics by `duration_s` of sim time (rounded to whole timesteps); only with
        `realtime=False`, where nothing else moves the clock."""
        if self.realtime:
            raise RuntimeError("advance() is for realtime=False twins; this one runs on its own.")
        if not duration_s >= 0:
            raise ValueError(f"`duration_s` must be >= 0. Got {duration_s}.")
        with self.lock:
            for _ in range(round(duration_s / self._timestep_s)):
                self._substep()

    # -- internals ---------------------------------------------------------------------------
    def _run(self) -> None:
        """Keep sim time at `time_scale` x wall time since reset, one timestep at a time."""
        try:
            while not self._quit.is_set():
                with self.lock:
                    due_s = (time.monotonic() - self._t0) * self.time_scale
                    behind = int((due_s - self.sim_time_s) / self._timestep_s)
                    if behind * self._timestep_s > MAX_LAG_S:  # starved of CPU: skip ahead
                        self.lag_events += 1
                        self._t0 += (behind * self._timestep_s - MAX_LAG_S) / self.time_scale
                        behind = int(MAX_LAG_S / self._timestep_s)
                    for _ in range(behind):
                        self._substep()
                    next_wall = self._t0 + (self.sim_time_s + self._timestep_s) / self.time_scale
                self._quit.wait(max(0.0, next_wall - time.monotonic()))
        except BaseException as e:  # surfaced by the next call on the twin
            self._error = e

    def _substep(self) -> None:
        mujoco.mj_step(self.task.model, self.task.data)
        self._substeps += 1
        last = self._last_command_sim_s
        if last is not None and self.sim_time_s - last > self.command_timeout_s:  # type: ignore[operator]
            self._set_targets(self._ee_pos())
            self._last_command_sim_s = None
            self.command_timeouts += 1
        if self._substeps % self.task.n_substeps == 0:
            success, score = self.task._evaluate()
            self._success = self._success or bool(success)
            self._score = max(self._score, float(score))

    def _check(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"the twin's physics thread failed: {self._error!r}") from (
                self._error
            )

    def _ee_pos(self) -> np.ndarray:
        if isinstance(self.task, PushTEnv):
            return np.append(self.task.pusher_xy(), PUSHER_Z_M)
        return self.task.ee_pos()

    def _gripper_reading(self) -> float:
        """Finger opening on the command scale (-1 open .. +1 closed); PushT reads open."""
        if isinstance(self.task, PushTEnv):
            return -1.0
        return float(np.clip(1.0 - 2.0 * self.task.opening() / gantry.MAX_OPENING_M, -1.0, 1.0))

    def _set_targets(self, pos: np.ndarray) -> None:
        """Servo targets as the env's `step` would write them, clipped to its action space."""
        if isinstance(self.task, PushTEnv):
            self.task.data.ctrl[:2] = np.clip(pos[:2], -PUSHT_WORKSPACE_M, PUSHT_WORKSPACE_M)
        else:
            self.task.gantry.command(self.task.data, np.append(pos, self._grip))

"""The safety layer: the only way commands reach an arm. It never trusts its input.

`SafetyLayer(arm, limits, control_hz=...)` is itself an `Arm`. Every end-effector command is
checked and, in this order, clipped into the workspace box, limited in acceleration (change of
the commanded velocity), speed and per-step move (relative to the previous command sent; the
first command after a hold starts from the measured pose at rest), and clipped into the box
again; the gripper is clipped into its range. A command that is not a finite number of the right
shape is refused and the arm holds. Joint commands are refused unless the limits give joint
ranges. With no fresh command for `watchdog_ms`, a timer thread tells the arm to hold (so a
stalled caller still gets a hold). `estop()` stops the arm and refuses everything afterwards,
until `rearm()` after the arm was reset; it can be wired to SIGINT and to Enter on stdin.

The limits start over from the measured pose after every hold; an arm found outside the box by
more than one step is refused (move it inside first) rather than pulled in by a jump.

Every clamp and refusal becomes a `SafetyEvent` (time, kind, reason, raw value, sent value; see
`safety_events`):
returned with the command's `CommandResult`, collected for `drain_events()`, passed to
`on_event` and logged (`logging`, this module's logger). Braking is acceleration-limited too:
a stop commanded at speed v may overshoot its target by up to v^2 / (2 max_accel_m_s2).

Usage (the deploy loop):

    layer = SafetyLayer(TwinArm("PickPlace"), limits_for("twin_gantry"), control_hz=10)
    layer.install_sigint_handler()          # Ctrl-C = e-stop (a second Ctrl-C interrupts)
    layer.start_keyboard_listener()         # Enter on stdin = e-stop
    result = layer.command_ee(pos_m, grip)  # CommandResult: sent, pos_m, gripper, events
    for event in layer.drain_events(): log.write(event.as_dict())
    if layer.estopped: ...                  # leave the loop
    layer.close()                           # watchdog, handlers, then the arm
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import IO, Any

import numpy as np

from robocompose.real_robot.base import Arm, ArmState
from robocompose.real_robot.safety_events import (
    CLAMPS,
    CommandResult,
    SafetyEvent,
    as_vector,
    to_jsonable,
)
from robocompose.real_robot.safety_limits import SafetyLimits

logger = logging.getLogger(__name__)

MAX_HISTORY = 10_000
QUIET_CLIP_M = 1e-6  # box clips smaller than this (a float32 bound's rounding) are not reported


def _scale_to(vec: np.ndarray, max_norm: float) -> np.ndarray:
    norm = float(np.linalg.norm(vec))
    return vec if norm <= max_norm else vec * (max_norm / norm)


class SafetyLayer(Arm):
    """Wraps an arm so nothing reaches it unchecked; see the module docstring.

    Args:
        arm: the arm (twin or driver) to protect.
        limits: its `SafetyLimits` (see `safety_limits.limits_for`).
        control_hz: the rate commands are sent at; speed and acceleration limits become
            per-command bounds with this period.
        on_event: called with every `SafetyEvent` as it happens (keep it quick).
        watchdog: run the watchdog thread (on by default).
    """

    def __init__(
        self,
        arm: Arm,
        limits: SafetyLimits,
        *,
        control_hz: float,
        on_event: Callable[[SafetyEvent], None] | None = None,
        watchdog: bool = True,
    ) -> None:
        if not (np.isfinite(control_hz) and 0 < control_hz <= 1000):
            raise ValueError(f"`control_hz` must be in (0, 1000]. Got {control_hz}.")
        self.arm, self.limits = arm, limits
        self.control_hz = float(control_hz)
        self.period_s = 1.0 / self.control_hz
        self.on_event = on_event
        self.counts: Counter[str] = Counter()
        self.history: deque[SafetyEvent] = deque(maxlen=MAX_HISTORY)
        self._pending: list[SafetyEvent] = []
        self._lock = threading.RLock()
        self._low = np.array(limits.workspace_low_m)
        self._high = np.array(limits.workspace_high_m)
        self._prev_pos: np.ndarray | None = None  # last end-effector target sent
        self._prev_vel = np.zeros(3)
        self._prev_joints: np.ndarray | None = None
        self._last_command_s: float | None = None  # None: the watchdog is idle
        self._estopped = threading.Event()
        self._estop_sent = False
        self._quit = threading.Event()
        self._wake = threading.Event()
        self._sigint_previous: Any = None
        self._watchdog: threading.Thread | None = None
        if watchdog:
            self._watchdog = threading.Thread(target=self._watch, name="safety-watchdog")
            self._watchdog.daemon = True
            self._watchdog.start()

    # -- the Arm interface -------------------------------------------------------------------
    def read_state(self) -> ArmState:
        return self.arm.read_state()

    def command_ee(self, pos_m: Any, gripper: Any = None) -> CommandResult:
        with self._lock:
            events: list[SafetyEvent] = []
            if self._estopped.is_set():
                return self._refuse(events, "estop", "e-stop engaged", pos_m, hold=False)
            pos, kind, reason = as_vector(pos_m, 3, "`pos_m`")
            if pos is None:
                return self._refuse(events, kind, reason, pos_m)
            grip, kind, reason = self._check_gripper(gripper, events)
            if kind:
                return self._refuse(events, kind, reason, gripper)
            if self._prev_pos is None:
                reason = self._start_from_measured_pose()
                if reason:
                    return self._refuse(events, "workspace_start", reason, pos_m)
            sent = self._limit_ee(pos, events)
            return self._send(events, sent, grip, lambda: self.arm.command_ee(sent, grip))

    def command_joints(self, joints_rad: Any, gripper: Any = None) -> CommandResult:
        with self._lock:
            events: list[SafetyEvent] = []
            if self._estopped.is_set():
                return self._refuse(events, "estop", "e-stop engaged", joints_rad, hold=False)
            n = self.limits.n_joints
            if n is None or self.limits.joint_low_rad is None:
                reason = "joint commands need `joint_low_rad`/`joint_high_rad` in the limits"
                return self._refuse(events, "joints", reason, joints_rad)
            joints, kind, reason = as_vector(joints_rad, n, "`joints_rad`")
            if joints is None:
                return self._refuse(events, kind, reason, joints_rad)
            grip, kind, reason = self._check_gripper(gripper, events)
            if kind:
                return self._refuse(events, kind, reason, gripper)
            sent = self._limit_joints(joints, events)
            if sent is None:
                return self._refuse(events, "joints", "the arm reports no joint angles", joints)
            return self._send(events, sent, grip, lambda: self.arm.command_joints(sent, grip))

    def hold(self) -> None:
        with self._lock:
            self._forget_motion()
            self.arm.hold()

    def stop(self) -> None:
        self.estop("stop() called")

    def close(self) -> None:
        self._quit.set()
        self._wake.set()
        if self._watchdog is not None and self._watchdog is not threading.current_thread():
            self._watchdog.join(timeout=2.0)
        self.uninstall_sigint_handler()
        self.arm.close()

    # -- e-stop --------------------------------------------------------------------------------
    @property
    def estopped(self) -> bool:
        return self._estopped.is_set()

    def estop(self, reason: str = "estop() called") -> None:
        """Stop the arm now and refuse every later command (idempotent)."""
        self._estopped.set()  # refuses commands at once, even before the lock is free
        with self._lock:
            if self._estop_sent:
                return
            self._estop_sent = True
            self._last_command_s = None
            self.arm.stop()
            self._event([], "estop_engaged", reason, None, None)

    def rearm(self) -> None:
        """Accept commands again after an e-stop; call it only after the arm was reset."""
        with self._lock:
            self._estopped.clear()
            self._estop_sent = False
            self._forget_motion()

    def install_sigint_handler(self) -> None:
        """Ctrl-C engages the e-stop; once engaged, Ctrl-C goes to the previous handler (so a
        second one interrupts the program). Call from the main thread."""
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("install_sigint_handler() must be called from the main thread.")

        def on_sigint(signum: int, frame: Any) -> None:
            if self._estopped.is_set():
                previous = self._sigint_previous
                if callable(previous):
                    previous(signum, frame)
                return
            self._estopped.set()
            # The interrupted code may hold the lock: stop from a thread that waits for it.
            threading.Thread(target=self.estop, args=("SIGINT",), daemon=True).start()

        previous = signal.signal(signal.SIGINT, on_sigint)
        if self._sigint_previous is None:
            self._sigint_previous = previous

    def uninstall_sigint_handler(self) -> None:
        if self._sigint_previous is not None and (
            threading.current_thread() is threading.main_thread()
        ):
            signal.signal(signal.SIGINT, self._sigint_previous)
            self._sigint_previous = None

    def start_keyboard_listener(self, stream: IO[str] | None = None) -> threading.Thread:
        """A daemon thread that engages the e-stop on any line (Enter) read from `stream`
        (default stdin); it ends at end of file."""
        source = sys.stdin if stream is None else stream

        def listen() -> None:
            for line in source:
                if self._quit.is_set():
                    return
                self.estop(f"keyboard: {line.strip()!r}")
                return

        thread = threading.Thread(target=listen, name="safety-keyboard", daemon=True)
        thread.start()
        return thread

    # -- events ----------------------------------------------------------------------------------
    def drain_events(self) -> list[SafetyEvent]:
        """Events since the last drain (the deploy loop writes them to its log)."""
        with self._lock:
            pending, self._pending = self._pending, []
            return pending

    # -- internals -------------------------------------------------------------------------------
    def _event(
        self, events: list[SafetyEvent], kind: str, reason: str, raw: Any, sent: Any
    ) -> None:
        event = SafetyEvent(time.monotonic(), kind, reason, to_jsonable(raw), to_jsonable(sent))
        events.append(event)
        self._pending.append(event)
        self.history.append(event)
        self.counts[kind] += 1
        level = logging.INFO if kind in CLAMPS else logging.WARNING
        logger.log(level, "safety %s: %s (raw %s, sent %s)", kind, reason, event.raw, event.sent)
        if self.on_event is not None:
            self.on_event(event)

    def _refuse(
        self, events: list[SafetyEvent], kind: str, reason: str, raw: Any, *, hold: bool = True
    ) -> CommandResult:
        """Log the refusal; hold the arm (unless e-stopped: then it is stopped already)."""
        self._event(events, kind, reason + (": holding" if hold else ""), raw, None)
        if hold:
            self._forget_motion()
            self.arm.hold()
        return CommandResult(False, None, None, tuple(events))

    def _send(
        self,
        events: list[SafetyEvent],
        target: np.ndarray,
        grip: float | None,
        command: Callable[[], None],
    ) -> CommandResult:
        try:
            command()
        except Exception as e:
            self._event(events, "arm_error", f"the arm refused the command: {e!r}", target, None)
            raise
        if self._last_command_s is None:
            self._wake.set()
        self._last_command_s = time.monotonic()
        return CommandResult(True, target, grip, tuple(events))

    def _check_gripper(
        self, gripper: Any, events: list[SafetyEvent]
    ) -> tuple[float | None, str, str]:
        """(gripper clipped into range, "", "") or (None, refusal kind, reason)."""
        if gripper is None:
            return None, "", ""
        value, kind, reason = as_vector(np.ravel(np.asarray(gripper, dtype=object)), 1, "`gripper`")
        if value is None:
            return None, kind, reason
        low, high = self.limits.gripper_range
        grip = float(np.clip(value[0], low, high))
        if grip != value[0]:
            self._event(events, "gripper", f"gripper outside [{low}, {high}]", value[0], grip)
        return grip, "", ""

    def _limit_ee(self, pos: np.ndarray, events: list[SafetyEvent]) -> np.ndarray:
        lim, dt = self.limits, self.period_s
        prev = self._prev_pos
        assert prev is not None, "_start_from_measured_pose() comes first"
        target = self._clip_box(pos, pos, events)
        vel = (target - prev) / dt
        dv = _scale_to(vel - self._prev_vel, lim.max_accel_m_s2 * dt)
        if not np.allclose(dv, vel - self._prev_vel, rtol=0, atol=1e-12):
            vel = self._prev_vel + dv
            self._event(
                events,
                "accel",
                f"acceleration above {lim.max_accel_m_s2} m/s^2",
                pos,
                prev + vel * dt,
            )
        limited = _scale_to(vel, lim.max_speed_m_s)
        if limited is not vel:
            self._event(
                events, "speed", f"speed above {lim.max_speed_m_s} m/s", pos, prev + limited * dt
            )
        step = limited * dt
        if np.linalg.norm(step) > lim.max_step_m:
            step = _scale_to(step, lim.max_step_m)
            self._event(events, "delta", f"step above {lim.max_step_m} m", pos, prev + step)
        sent = self._clip_box(prev + step, pos, events)
        self._prev_vel = (sent - prev) / dt
        self._prev_pos = sent
        self._prev_joints = None
        return sent

    def _start_from_measured_pose(self) -> str:
        """After a hold, limits start from the measured pose at rest; "" or why they cannot
        (the arm reports no finite position, or is outside the box by more than one step)."""
        measured = np.asarray(self.arm.read_state().ee_pos_m, dtype=np.float64)
        if measured.shape != (3,) or not np.all(np.isfinite(measured)):
            return f"the arm reports no finite (3,) position: {measured.tolist()}"
        inside = np.clip(measured, self._low, self._high)
        if np.linalg.norm(measured - inside) > self.limits.max_step_m:
            return (
                f"the arm is at {measured.round(4).tolist()} m, outside the workspace box by more "
                f"than `max_step_m` ({self.limits.max_step_m} m): move it inside first"
            )
        self._prev_pos, self._prev_vel = inside, np.zeros(3)
        return ""

    def _clip_box(
        self, point: np.ndarray, raw: np.ndarray, events: list[SafetyEvent]
    ) -> np.ndarray:
        clipped = np.clip(point, self._low, self._high)
        if np.max(np.abs(clipped - point)) > QUIET_CLIP_M:
            self._event(events, "workspace", "target outside the workspace box", raw, clipped)
        return clipped

    def _limit_joints(self, joints: np.ndarray, events: list[SafetyEvent]) -> np.ndarray | None:
        lim = self.limits
        clipped = np.clip(joints, lim.joint_low_rad, lim.joint_high_rad)
        if not np.array_equal(clipped, joints):
            self._event(events, "joint_range", "joint target outside its range", joints, clipped)
        prev = self._prev_joints
        if prev is None:
            reading = self.arm.read_state().joints_rad
            if reading is None:
                return None
            prev = np.asarray(reading, dtype=np.float64)
        step = np.clip(clipped - prev, -lim.max_joint_step_rad, lim.max_joint_step_rad)
        sent = prev + step
        if not np.array_equal(step, clipped - prev):
            reason = f"joint step above {lim.max_joint_step_rad} rad"
            self._event(events, "joint_delta", reason, joints, sent)
        self._prev_joints = sent
        self._prev_pos = None
        return sent

    def _forget_motion(self) -> None:
        """After a hold the arm is (coming to) rest where it is: restart limits from there."""
        self._prev_pos, self._prev_joints = None, None
        self._prev_vel = np.zeros(3)
        self._last_command_s = None

    def _watch(self) -> None:
        """Hold the arm once `watchdog_ms` passes with no command; then wait for the next."""
        timeout_s = self.limits.watchdog_ms / 1000.0
        while not self._quit.is_set():
            last = self._last_command_s
            if last is None:
                self._wake.wait()
                self._wake.clear()
                continue
            remaining = last + timeout_s - time.monotonic()
            if remaining > 0:
                self._quit.wait(remaining)
                continue
            with self._lock:
                last = self._last_command_s
                if last is None or self._estopped.is_set():
                    continue
                silent_ms = 1000.0 * (time.monotonic() - last)
                if silent_ms < self.limits.watchdog_ms:
                    continue
                self._forget_motion()
                reason = f"no command for {silent_ms:.0f} ms (limit {self.limits.watchdog_ms} ms)"
                try:
                    self.arm.hold()
                except Exception as e:
                    self._event([], "arm_error", f"watchdog hold failed: {e!r}", silent_ms, None)
                    continue
                self._event([], "watchdog", reason + ": holding", silent_ms, None)

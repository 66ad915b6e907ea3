"""The control process's own loop (it runs in the child `control.ControlProcess` spawns):
read waypoints, sample the trajectory at the next tick, track it within the limits, send it
through the safety layer, brake and hold on silence, publish telemetry, events and state."""

from __future__ import annotations

import contextlib
import gc
import os
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from robocompose.real_robot.base import Arm
from robocompose.real_robot.control_config import (
    BRAKING,
    CLAMPED,
    ESTOPPED,
    EVENT_CODES,
    FLAG_ESTOP,
    FLAG_ESTOP_SET_AT,
    FLAG_QUIT,
    HOLDING,
    SAFETY_KINDS,
    SENT,
    TELEMETRY_WIDTH,
    ArmFactory,
    ControlConfig,
    Rings,
)
from robocompose.real_robot.drivers.twin import TwinArm
from robocompose.real_robot.ring import RingBuffer
from robocompose.real_robot.safety import SafetyLayer, _scale_to
from robocompose.real_robot.safety_events import SafetyEvent
from robocompose.real_robot.trajectory import INVALID_KINDS, Sample, Trajectory, unpack_waypoint

TRACKING_MARGIN = 0.9  # the tracker keeps to this share of the speed and acceleration limits


def sleep_until(deadline_s: float, spin_s: float) -> None:
    """Sleep to just before `deadline_s` (time.monotonic), then spin to it."""
    remaining = deadline_s - time.monotonic() - spin_s
    if remaining > 0:
        time.sleep(remaining)
    while time.monotonic() < deadline_s:
        pass


def realtime_setup(cpu: int | None, fifo_priority: int | None) -> dict[str, Any]:
    """Pin the process and ask for SCHED_FIFO where permitted; what was granted."""
    granted: dict[str, Any] = {"cpu": None, "fifo": False}
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {cpu})
            granted["cpu"] = cpu
    if fifo_priority is not None and hasattr(os, "sched_setscheduler"):
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(fifo_priority))
            granted["fifo"] = True
    return granted


class ControlLoop:
    """The loop the control process runs (also usable in-process, e.g. by a test)."""

    def __init__(
        self,
        arm: Arm,
        config: ControlConfig,
        rings: Rings,
        flags: Any,
        conn: Connection | None,
    ) -> None:
        self.config = config
        self.arm, self.twin = arm, arm if isinstance(arm, TwinArm) else None
        sim_hz = config.rate_hz / (config.time_scale if self.twin is not None else 1.0)
        self.layer = SafetyLayer(
            arm, config.limits, control_hz=sim_hz, watchdog=False, on_event=self._on_safety
        )
        self.waypoints = RingBuffer.attach(rings.waypoints)
        self.telemetry = RingBuffer.attach(rings.telemetry)
        self.events = RingBuffer.attach(rings.events)
        self.state = RingBuffer.attach(rings.state)
        self.flags, self.conn = flags, conn
        self.trajectory = Trajectory(config.interpolation, config.blend_s)
        self.parent_pid = os.getppid()
        self._clamped = False
        self._now = 0.0
        self._k = 0
        self._clamps: set[str] = set()
        self._previous_clamps: set[str] = set()
        self._measured: np.ndarray | None = None
        self.reset_motion()

    def reset_motion(self) -> None:
        """Start (again) from rest: holding, nothing queued."""
        self.trajectory.clear()
        self.waypoints.skip_to_end()
        self.holding, self.braking, self.brake_ticks = True, False, 0
        self.last_fresh_s: float | None = None
        self.sent: np.ndarray | None = None
        self.velocity = np.zeros(3)
        self.gripper: float | None = None
        self.sim_tick0 = 0
        self.estop_reported = False

    def event(self, code: str, a: float = 0.0, b: float = 0.0) -> None:
        self.events.write(np.array([self._now, EVENT_CODES.index(code), a, b]))

    def _on_safety(self, event: SafetyEvent) -> None:
        """Log the first tick of each streak of one clamp kind (the telemetry flags every
        position clamp)."""
        kind = event.kind if event.kind in SAFETY_KINDS else "other"
        self._clamped = self._clamped or kind != "gripper"
        self._clamps.add(kind)
        if kind not in self._previous_clamps:
            self.event("safety", SAFETY_KINDS.index(kind))

    # -- one tick ------------------------------------------------------------------------------
    def tick(self, k: int, due_s: float) -> bool:
        """Run tick `k` due at `due_s`; False when the loop should end."""
        start = self._now = time.monotonic()
        self._k = k
        if self.flags[FLAG_QUIT]:
            self.brake_to_hold()
            return False
        if self.flags[FLAG_ESTOP] and not self.layer.estopped:
            self.layer.estop("e-stop flag")
            set_at = self.flags[FLAG_ESTOP_SET_AT]
            self.event("estop", 1000.0 * (time.monotonic() - set_at) if set_at else 0.0)
        try:
            if self.conn is not None and self.conn.poll() and not self.handle(self.conn.recv()):
                return False
            parent_gone = os.getppid() != self.parent_pid
        except (EOFError, OSError):  # the other end of the pipe closed: the parent died
            parent_gone = True
        self.read_waypoints(start)
        if parent_gone:
            self.event("policy_process_gone")
            self.brake_to_hold()
            return False
        target_time = due_s + self.config.period_s  # servo targets are reached one tick later
        plan = self.next_target(start, target_time)
        command = plan if self.braking or plan is None else self.track(plan, target_time)
        flags = 0
        self._clamped = False
        self._previous_clamps, self._clamps = self._clamps, set()
        if command is not None and not self.layer.estopped:
            try:
                result = self.layer.command_ee(command.pos_m, command.gripper)
            except Exception as e:  # a protective stop, a lost link: stop, refuse until rearm
                print(f"control process: the arm refused a command: {e!r}", flush=True)
                self.event("arm_error")
                self.flags[FLAG_ESTOP] = 1.0
                with contextlib.suppress(Exception):
                    self.layer.estop(f"arm error: {e!r}")
                return True
            if result.sent:
                flags |= SENT
                assert result.target is not None
                if self.sent is not None:
                    self.velocity = (result.target - self.sent) / self.layer.period_s
                self.sent = result.target
                self.gripper = result.gripper if result.gripper is not None else self.gripper
        elif not self.layer.estopped:
            self.arm.keepalive()
        if self.twin is not None and not self.twin.stopped:
            self.advance_twin(k)
        if k % self.config.publish_every == 0:
            self.publish(start)
        flags |= (HOLDING if self.holding else 0) | (BRAKING if self.braking else 0)
        flags |= (ESTOPPED if self.layer.estopped else 0) | (CLAMPED if self._clamped else 0)
        self.write_telemetry(due_s, start, plan, flags)
        return True

    def read_waypoints(self, now: float) -> None:
        batch = self.waypoints.read_new()
        if batch.lost:
            self.event("overrun", batch.lost)
        if batch.torn:
            self.event("torn_read", batch.torn)
        fresh = False
        for record in batch.records:
            waypoint, problem = unpack_waypoint(record)
            if waypoint is None:
                self.event("invalid_waypoint", INVALID_KINDS.index(problem))
                continue
            current = None
            if self.sent is not None:
                current = Sample(self.sent, None, self.gripper)
            else:
                state = self.arm.read_state()
                current = Sample(np.asarray(state.ee_pos_m, dtype=np.float64), None, None)
            if not self.trajectory.insert(waypoint, now, current):
                self.event("late_waypoint", time.monotonic() - waypoint.time_s)
                continue
            fresh = True
        if fresh and not self.layer.estopped:
            self.last_fresh_s = now
            if self.holding or self.braking:
                self.holding, self.braking = False, False
                self.event("resume")

    def next_target(self, now: float, target_time: float) -> Sample | None:
        """What to command this tick: the plan, a braking step, or nothing (holding)."""
        if self.holding:
            return None
        if self.braking:
            return self.brake_step()
        assert self.last_fresh_s is not None
        silent = now - self.last_fresh_s
        if silent > self.config.watchdog_s:
            self.event("watchdog_hold", 1000.0 * silent)
            self.braking, self.brake_ticks = True, 0
            self.trajectory.clear()
            return self.brake_step()
        self.trajectory.prune(now)
        return self.trajectory.sample(target_time)

    def track(self, plan: Sample, target_time: float) -> Sample:
        """Follow the plan within TRACKING_MARGIN of the speed and acceleration limits: the plan's
        own velocity, plus a correction toward it no faster than one can brake over the distance
        (so a jump in the plan is caught up without overshoot). The safety layer then checks a
        stream it need not clamp."""
        if self.sent is None:
            return plan  # the first target after a hold: the safety layer starts from rest
        dt = self.layer.period_s
        max_accel = TRACKING_MARGIN * self.config.limits.max_accel_m_s2
        max_speed = TRACKING_MARGIN * self.config.limits.max_speed_m_s
        ahead = self.trajectory.sample(target_time + self.config.period_s)
        feedforward = (ahead.pos_m - plan.pos_m) / dt if ahead is not None else np.zeros(3)
        error = plan.pos_m - self.sent
        catch_up = _scale_to(
            error / dt - feedforward, np.sqrt(2 * max_accel * np.linalg.norm(error))
        )
        wanted = _scale_to(feedforward + catch_up, max_speed)
        velocity = self.velocity + _scale_to(wanted - self.velocity, max_accel * dt)
        return Sample(self.sent + velocity * dt, plan.quat, plan.gripper)

    def brake_step(self) -> Sample | None:
        """One tick of braking at the acceleration limit; None (and hold) once at rest."""
        speed = float(np.linalg.norm(self.velocity))
        dt = self.layer.period_s
        if self.sent is None or speed * dt < 1e-7:
            self.layer.hold()
            self.holding, self.braking = True, False
            self.velocity = np.zeros(3)
            self.sent = None
            self.event("held", self.brake_ticks)
            return None
        self.brake_ticks += 1
        slower = max(0.0, speed - self.config.limits.max_accel_m_s2 * dt)
        self.velocity = self.velocity * (slower / speed)
        return Sample(self.sent + self.velocity * dt, None, self.gripper)

    def brake_to_hold(self) -> None:
        """Brake to rest now, tick by tick (the policy process is gone)."""
        if self.holding or self.layer.estopped:
            return
        self.braking = True
        k, t0 = 0, time.monotonic()
        while self.braking:
            due = t0 + k * self.config.period_s
            sleep_until(due, self.config.spin_s)
            sample = self.brake_step()
            flags = HOLDING
            if sample is not None:
                result = self.layer.command_ee(sample.pos_m, sample.gripper)
                self.sent = result.target if result.sent else self.sent
                flags = BRAKING | (SENT if result.sent else 0)
            if self.twin is not None:
                self.twin.advance(self.config.period_s * self.config.time_scale)
            self.write_telemetry(due, time.monotonic(), sample, flags)
            k += 1

    def advance_twin(self, k: int) -> None:
        """Keep sim time at (ticks since reset) x tick x time_scale."""
        assert self.twin is not None
        due = (k + 1 - self.sim_tick0) * self.config.period_s * self.config.time_scale
        steps = int((due - self.twin.sim_time_s) / self.twin.timestep_s + 1e-9)
        if steps > 0:
            self.twin.advance(steps * self.twin.timestep_s)

    def publish(self, now: float) -> None:
        state = self.arm.read_state()
        row = np.zeros(self.state.width)
        row[0], row[1:4], row[4] = now, state.ee_pos_m, state.gripper
        self._measured = row[1:4]
        if self.twin is not None and self.config.obs_dim:
            seen = self.twin.observe()
            row[5], row[6], row[7] = seen.success, seen.score, seen.sim_time_s
            row[8 : 8 + self.config.obs_dim] = seen.obs["state"]
        self.state.write(row)

    def write_telemetry(self, due: float, start: float, plan: Sample | None, flags: int) -> None:
        row = np.full(TELEMETRY_WIDTH, np.nan)
        row[0], row[1], row[10] = due, start, flags
        if plan is not None:
            row[2:5] = plan.pos_m
        if self._measured is not None:
            row[11:14], self._measured = self._measured, None
        if flags & SENT and self.sent is not None:
            row[5:8] = self.sent
            row[8] = np.nan if self.gripper is None else self.gripper
        self.telemetry.write(row)

    # -- requests from the policy process ---------------------------------------------------
    def handle(self, message: tuple) -> bool:
        """Answer one request; False on "close"."""
        kind, *args = message
        reply: Any = None
        try:
            if kind == "close":
                self.conn_send(("ok", None))
                return False
            if kind == "reset":  # the twin: a new episode on a seed
                assert self.twin is not None, "reset needs the twin"
                self.twin.reset(seed=args[0])
                self.layer.rearm()
                self.reset_motion()
                self.layer.hold()
                self.sim_tick0 = self._k + 1
                self.publish(time.monotonic())
            elif kind == "rearm":  # after an e-stop: the arm re-enabled, commands accepted
                reenable = getattr(self.arm, "reenable", None)
                if callable(reenable):
                    reenable()
                self.flags[FLAG_ESTOP] = 0
                self.layer.rearm()
                self.reset_motion()
            elif kind == "hold":
                self.trajectory.clear()
                if not self.holding:
                    self.braking = True
            else:
                raise ValueError(f"unknown request {kind!r}")
            self.conn_send(("ok", reply))
        except Exception as e:
            self.conn_send(("error", f"{type(e).__name__}: {e}"))
        return True

    def conn_send(self, message: tuple) -> None:
        if self.conn is not None:
            self.conn.send(message)

    def close(self) -> None:
        for ring in (self.waypoints, self.telemetry, self.events, self.state):
            ring.close()
        self.layer.close()


def control_main(
    arm_factory: ArmFactory, config: ControlConfig, rings: Rings, flags: Any, conn: Connection
) -> None:
    """The control process's entry point: build the arm here, then tick until told to stop."""
    granted = realtime_setup(config.cpu, config.fifo_priority)
    try:
        arm = arm_factory()
        loop = ControlLoop(arm, config, rings, flags, conn)
        loop.publish(time.monotonic())  # a state to read from the start
    except BaseException as e:
        conn.send(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
        return
    conn.send(("ready", granted))
    gc.collect()
    gc.freeze()
    gc.disable()
    period = config.period_s
    k, t0 = 0, time.monotonic() + period
    try:
        while True:
            due = t0 + k * period
            sleep_until(due, config.spin_s)
            if not loop.tick(k, due):
                break
            late = int((time.monotonic() - t0) / period) - k - 1
            if late >= 1:  # ticks whose whole period passed: skip them, run the current one
                loop.event("ticks_missed", late)
                k += late
            k += 1
    except BaseException:
        traceback.print_exc()
        raise
    finally:
        gc.enable()
        loop.close()

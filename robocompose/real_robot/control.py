"""The control process: one OS process per arm that streams interpolated targets at the arm's own
servo rate, apart from the policy.

    policy process (10-50 Hz)                         control process (125-500 Hz, one core)
    observe -> ChunkExecutor -> schedule(times,       read waypoints -> Trajectory.sample(t + tick)
    actions) --waypoint ring (shared memory)-->       -> SafetyLayer (per tick) -> Arm (servo call)
    <--telemetry, event and state rings--             -> twin physics (dry runs) -> publish state
    estop flag (shared memory) ------------------->   checked at the start of every tick

The policy side only schedules: each waypoint carries the time it is meant for, late ones are
dropped and newer plans override older ones from their first time on (`trajectory`). The
control loop wakes at absolute deadlines (a sleep, then a short spin), with the garbage
collector frozen and disabled, pinned to one core and in SCHED_FIFO where permitted.

Hold and stop, from the control process itself:
- no fresh waypoint for the watchdog period, or the policy process gone: brake (the commanded
  velocity ramps to zero at `max_accel_m_s2`), then `Arm.hold()`; fresh waypoints resume it;
  with the policy process gone the process then closes the arm and exits;
- the e-stop flag: `Arm.stop()` at the next tick, commands refused until `rearm`;
- the control process killed: nothing streams any more and each arm stops on its own (see
  `control_config.ARM_TIMEOUTS`); the twin, which runs inside this process, stops with it.

This module is the policy side's handle (`ControlProcess`); the settings and the rings' layout
are `control_config.py`, the loop that runs in the child is `control_loop.py`.
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import numpy as np

from robocompose.real_robot.base import ArmState
from robocompose.real_robot.control_config import (
    EVENT_WIDTH,
    FLAG_ESTOP,
    FLAG_ESTOP_SET_AT,
    FLAG_QUIT,
    STATE_HEAD,
    TELEMETRY_WIDTH,
    ArmFactory,
    ControlConfig,
    Rings,
    event_line,
)
from robocompose.real_robot.control_loop import control_main
from robocompose.real_robot.ring import RingBuffer
from robocompose.real_robot.trajectory import pack_waypoint


class ControlProcess:
    """Starts the control process for one arm and talks to it (from the policy process).

    Args:
        arm_factory: builds the arm inside the child (a picklable callable).
        config: the `ControlConfig`.
        start_timeout_s: how long the arm may take to connect.
    """

    def __init__(
        self, arm_factory: ArmFactory, config: ControlConfig, *, start_timeout_s: float = 30.0
    ) -> None:
        self.config = config
        self.waypoints = RingBuffer.create(config.capacity, 10)
        self.telemetry = RingBuffer.create(8192, TELEMETRY_WIDTH)
        self.events_ring = RingBuffer.create(4096, EVENT_WIDTH)
        self.state_ring = RingBuffer.create(64, STATE_HEAD + config.obs_dim)
        rings = Rings(
            self.waypoints.name, self.telemetry.name, self.events_ring.name, self.state_ring.name
        )
        context = multiprocessing.get_context("spawn")
        self.flags = context.RawArray("d", 4)
        self.conn, child_conn = context.Pipe()
        self.process = context.Process(
            target=control_main,
            args=(arm_factory, config, rings, self.flags, child_conn),
            name="robocompose-control",
            daemon=True,
        )
        self.process.start()
        child_conn.close()
        self.granted = self._expect_ready(start_timeout_s)

    def _expect_ready(self, timeout_s: float) -> dict[str, Any]:
        if not self.conn.poll(timeout_s):
            self.close()
            raise TimeoutError(f"the control process did not start within {timeout_s} s.")
        kind, detail = self.conn.recv()
        if kind != "ready":
            self.close()
            raise RuntimeError(f"the control process could not start the arm: {detail}")
        return detail

    @property
    def alive(self) -> bool:
        return self.process.is_alive()

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def schedule(
        self, times_s: np.ndarray, positions_m: np.ndarray, grippers: np.ndarray | None = None
    ) -> None:
        """Queue waypoints: positions (n, 3) at times (n,) (time.monotonic), grippers (n,)."""
        for i, t in enumerate(times_s):
            grip = None if grippers is None else float(grippers[i])
            self.waypoints.write(pack_waypoint(float(t), positions_m[i], grip))

    def write_record(self, record: np.ndarray) -> None:
        """One raw waypoint record (see `trajectory.pack_waypoint`)."""
        self.waypoints.write(record)

    def estop(self) -> None:
        """Engage the e-stop: the control process stops the arm at its next tick."""
        self.flags[FLAG_ESTOP_SET_AT] = time.monotonic()
        self.flags[FLAG_ESTOP] = 1.0

    @property
    def estopped(self) -> bool:
        return bool(self.flags[FLAG_ESTOP])

    def request(self, kind: str, *args: Any, timeout_s: float = 10.0) -> Any:
        """Ask the control process something between ticks and wait for its answer."""
        if not self.alive:
            raise ConnectionError(
                f"the control process is gone (exit code {self.process.exitcode})."
            )
        self.conn.send((kind, *args))
        if not self.conn.poll(timeout_s):
            raise TimeoutError(f"the control process did not answer {kind!r} within {timeout_s} s.")
        status, reply = self.conn.recv()
        if status != "ok":
            raise RuntimeError(f"the control process refused {kind!r}: {reply}")
        return reply

    def reset_twin(self, seed: int) -> None:
        self.request("reset", seed)
        self.state_ring.skip_to_end()

    def latest(self) -> np.ndarray | None:
        return self.state_ring.latest()

    def read_state(self) -> ArmState:
        row = self.latest()
        if row is None:
            raise RuntimeError("the control process has published no state yet.")
        return ArmState(float(row[0]), row[1:4].copy(), float(row[4]))

    def observe(self) -> tuple[dict[str, np.ndarray], bool, float]:
        """The twin's observation ("state"), success and score, as last published."""
        row = self.latest()
        if row is None:
            raise RuntimeError("the control process has published no observation yet.")
        obs = {"state": row[STATE_HEAD:].astype(np.float32)}
        return obs, bool(row[5]), float(row[6])

    def drain_telemetry(self) -> np.ndarray:
        return self.telemetry.read_new().records

    def drain_events(self) -> list[dict[str, Any]]:
        """The control process's events since the last call, as log lines."""
        return [event_line(row) for row in self.events_ring.read_new().records]

    def close(self, timeout_s: float = 5.0) -> None:
        """Ask the loop to end (the arm holds and closes), then release everything."""
        self.flags[FLAG_QUIT] = 1.0
        self.process.join(timeout_s)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout_s)
        self.conn.close()
        for ring in (self.waypoints, self.telemetry, self.events_ring, self.state_ring):
            ring.close()

"""`robocompose deploy ... control=process`: the deploy loop with the arm in a control process.

    policy process (executor.rate_hz)                       control process (control_rate_hz)
    observe -> ChunkExecutor.act / plan -> schedule ---->  interpolate -> SafetyLayer -> Arm
    step log <- control events, telemetry, state <-------  (the twin's physics too, on a dry run)

The policy loop runs as in `deploy.DeployLoop` but sends no command itself: every tick it
schedules what the current chunks plan from this tick on, each action meant for the end of its
tick (the time a servo target is reached), and the control process streams the interpolated
targets at the arm's own rate through the safety layer. The step log gets the control process's
events (late or invalid waypoints, overruns, watchdog holds, clamps, e-stop) and the last target
it sent; a control process that died ends the episode as aborted (not recorded, so a rerun
repeats it) and is restarted for the next one.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from robocompose.real_robot.base import Arm
from robocompose.real_robot.control import ControlProcess
from robocompose.real_robot.control_config import DEFAULT_RATES_HZ, SENT, ControlConfig
from robocompose.real_robot.deploy_io import Ticker, check_compatible, observer_for
from robocompose.real_robot.drivers import make_arm
from robocompose.real_robot.drivers.twin import TwinArm, ee_target_from_action
from robocompose.real_robot.executor import ChunkExecutor
from robocompose.real_robot.safety_limits import twin_limits
from robocompose.real_robot.steplog import JsonlWriter, StepRecorder
from robocompose.sim.tasks import get_task

PLAN_TICKS = 64
STATE_HZ = 100.0  # at most this many of the chunks' future ticks are scheduled per policy tick


def build_driver(robot: str, host: str, options: dict[str, Any], rate_hz: float) -> Arm:
    """A vendor driver set up for streaming at `rate_hz` (runs inside the control process)."""
    options = dict(options)
    if robot == "ur5e":
        options["servo_time_s"] = 1.0 / rate_hz  # each target is tracked for one tick
        options.setdefault("watchdog_hz", 10.0)
    return make_arm(robot, host, **options)


def arm_factory(
    on_twin: bool, task: str, robot: str, host: str | None, options: dict[str, Any], rate_hz: float
) -> Callable[[], Arm]:
    """What the control process calls to build its arm (picklable)."""
    if on_twin:
        return functools.partial(TwinArm, task, realtime=False, command_timeout_s=0.5)
    assert host is not None
    return functools.partial(build_driver, robot, host, options, rate_hz)


def default_rate_hz(robot: str, on_twin: bool) -> float:
    return DEFAULT_RATES_HZ["twin" if on_twin else robot]


class ProcessDeployLoop:
    """The policy side of a deploy run whose arm lives in a control process; see the module
    docstring. `start_control` builds (and after a crash rebuilds) the control process."""

    def __init__(
        self,
        start_control: Callable[[], ControlProcess],
        executor: ChunkExecutor,
        log: JsonlWriter,
        *,
        on_twin: bool,
        observer: Callable[[], tuple[dict, bool | None, float]] | None = None,
        time_scale: float = 1.0,
        client: Any = None,
        stop_on_success: bool = True,
    ) -> None:
        self.start_control = start_control
        self.control = start_control()
        self.executor, self.log, self.client = executor, log, client
        self.on_twin, self.observer = on_twin, observer
        self.rate_hz = executor.config.rate_hz
        self.period_s = 1.0 / (self.rate_hz * time_scale)
        self.time_scale = time_scale
        self.stop_on_success = stop_on_success
        self.estop_requested = False
        self.telemetry_sink: list[np.ndarray] | None = None  # keeps every telemetry batch if set

    def estop(self) -> None:
        """Safe from a signal handler: sets the shared flag the control loop checks every tick."""
        self.estop_requested = True
        self.control.estop()

    def install_sigint_handler(self) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, lambda *_: self.estop())

    def start_keyboard_listener(self) -> None:
        """Enter on stdin engages the e-stop (a daemon thread; ends at end of file)."""

        def listen() -> None:
            for _ in sys.stdin:
                self.estop()
                return

        threading.Thread(target=listen, name="estop-keyboard", daemon=True).start()

    def observe(self) -> tuple[dict, bool | None, float]:
        if self.on_twin:
            return self.control.observe()
        assert self.observer is not None
        return self.observer()

    def run_episode(self, seed: int, episode_s: float) -> dict[str, Any]:
        """One episode on `seed`; its record (also written to the step log at its end)."""
        if not self.control.alive:
            self.log.write({"kind": "control_restart", "exitcode": self.control.process.exitcode})
            self.control.close()
            self.control = self.start_control()
        if self.on_twin:
            self.control.reset_twin(seed)
        self.control.drain_events()
        self.control.drain_telemetry()
        self.executor.reset(seed)
        max_ticks = max(1, round(episode_s * self.rate_hz))
        steps = StepRecorder(self.log, self.client, seed)
        counts = steps.counts
        steps.start(
            self.rate_hz,
            self.time_scale,
            self.period_s,
            self.executor.config.mode,
            control="process",
            control_rate_hz=self.control.config.rate_hz,
        )
        ticker = Ticker(self.period_s)
        t0 = ticker.t0
        tick, success, score, aborted = 0, None, 0.0, False
        while True:
            started = time.monotonic()
            if not self.control.alive:
                exitcode = self.control.process.exitcode
                self.log.write({"kind": "control_died", "seed": seed, "exitcode": exitcode})
                counts["control_died"] += 1
                aborted = True
                break
            obs, success, score = self.observe()
            state = self.control.read_state()
            decision = self.executor.act(tick, obs, ticker.deadline(tick) - 0.1 * self.period_s)
            if decision.action is not None and not self.control.estopped:
                self.schedule(tick, t0)
            sent, safety, events = self.collect(decision.events)
            steps.record(tick, started, obs, state, decision, sent, safety, events)
            ended = success and self.stop_on_success
            if ended or self.control.estopped or tick + 1 >= max_ticks:
                break
            tick = ticker.wait_next(tick)
        if not aborted and not self.control.estopped:
            self.control.request("hold")
        record = {
            "seed": seed,
            "success": bool(success),
            "score": float(score),
            "ticks": tick + 1,
            "duration_s": time.monotonic() - t0,
            "waited_s": counts.pop("waiting_ticks") * self.period_s * self.time_scale,
            "estop": self.control.estopped,
            "aborted": aborted,
            "mode": self.executor.config.mode,
            "rate_hz": self.rate_hz,
            "control_rate_hz": self.control.config.rate_hz,
            "time_scale": self.time_scale,
            "events": dict(counts),
        }
        self.log.write({"kind": "episode_end", **record})
        return record

    def schedule(self, tick: int, t0: float) -> None:
        """Send the plan from `tick` on, each action meant for the end of its tick."""
        plan = self.executor.plan(tick, PLAN_TICKS)
        if plan is None:
            return
        targets = [ee_target_from_action(action) for action in plan]
        times = t0 + (tick + 1 + np.arange(len(plan))) * self.period_s
        positions = np.stack([pos for pos, _ in targets])
        grips = None if targets[0][1] is None else np.array([g for _, g in targets])
        self.control.schedule(times, positions, grips)

    def collect(
        self, events: list[dict[str, Any]]
    ) -> tuple[list[float] | None, list[dict[str, Any]], list[dict[str, Any]]]:
        """The last target the control process sent, its clamps, and the tick's events."""
        telemetry = self.control.drain_telemetry()
        if self.telemetry_sink is not None:
            self.telemetry_sink.append(telemetry)
        sent = None
        sent_rows = telemetry[(telemetry[:, 10].astype(int) & SENT) > 0] if len(telemetry) else []
        if len(sent_rows):
            sent = [float(v) for v in sent_rows[-1, 5:9] if np.isfinite(v)]
        safety, other = [], list(events)
        for line in self.control.drain_events():
            if line["event"] == "control:safety":
                safety.append({"kind": line["kind"], "t_s": line["t_s"], "source": "control"})
            else:
                other.append(line)
        return sent, safety, other

    def close(self) -> None:
        self.control.close()


def control_config(
    limits: Any,
    rate_hz: float,
    *,
    interpolation: str,
    time_scale: float,
    obs_dim: int,
    blend_s: float,
) -> ControlConfig:
    """The control process's settings for a deploy run (the last core, SCHED_FIFO if allowed)."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    return ControlConfig(
        rate_hz=rate_hz,
        limits=limits,
        interpolation=interpolation,
        blend_s=blend_s,
        time_scale=time_scale,
        cpu=cpus[-1] if len(cpus) > 1 else None,
        fifo_priority=50,
        obs_dim=obs_dim,
        # the twin's observation every tick; a real arm's state (several reads on some SDKs) at
        # about STATE_HZ, plenty for a 10-50 Hz policy
        publish_every=1 if obs_dim else max(1, round(rate_hz / STATE_HZ)),
    )


def twin_facts(task: str) -> tuple[int, float]:
    """The size of the twin's "state" observation on `task`, and its episode length (s)."""
    twin = TwinArm(task, realtime=False)
    try:
        return int(np.asarray(twin.observe().obs["state"]).size), twin.episode_s
    finally:
        twin.close()


def twin_control(task: str, rate_hz: float, time_scale: float = 1.0) -> tuple[Any, ControlConfig]:
    """The arm factory and settings of a twin control process on `task` (tests, benchmarks and
    `timing_check`: the normal scheduler, the last core)."""
    obs_dim, _ = twin_facts(task)
    factory = arm_factory(True, task, "twin", None, {}, rate_hz)
    cpus = sorted(os.sched_getaffinity(0))
    config = ControlConfig(
        rate_hz=rate_hz,
        limits=twin_limits(task),
        time_scale=time_scale,
        blend_s=0.1 / time_scale,  # one tick of a 10 Hz policy
        obs_dim=obs_dim,
        cpu=cpus[-1] if len(cpus) > 1 else None,
    )
    return factory, config


def run_in_control_process(config: Any, link: Any, todo: list[int], done: dict[int, Any]) -> None:
    """`deploy.run`'s episodes with the arm in a control process (a `DeployConfig`,
    its `PolicyLink`); records appended to episodes.jsonl and added to `done`."""
    out = Path(config.out)
    rate_hz = config.control_rate_hz or default_rate_hz(config.robot, config.on_twin)
    time_scale = config.time_scale if config.on_twin else 1.0
    obs_dim, twin_episode_s = twin_facts(config.task) if config.on_twin else (0, 0.0)
    settings = control_config(
        config.limits(),
        rate_hz,
        interpolation=config.control_interpolation,
        time_scale=time_scale,
        obs_dim=obs_dim,
        blend_s=1.0 / (config.executor.rate_hz * time_scale),  # one policy tick
    )
    factory = arm_factory(
        config.on_twin, config.task, config.robot, config.host, config.robot_options, rate_hz
    )
    executor = ChunkExecutor(link.source, link.spec, config.executor)
    log, results = JsonlWriter(out / "steps.jsonl"), JsonlWriter(out / "episodes.jsonl")
    loop: ProcessDeployLoop | None = None
    try:
        loop = ProcessDeployLoop(
            lambda: ControlProcess(factory, settings),
            executor,
            log,
            on_twin=config.on_twin,
            observer=None if config.on_twin else observer_for(config.observer, None),
            time_scale=time_scale,
            client=link.client,
        )
        loop.install_sigint_handler()  # Ctrl-C: the e-stop flag, read at the next servo tick
        if not config.on_twin and sys.stdin.isatty():
            loop.start_keyboard_listener()  # Enter: the same
        log.write({"kind": "control_process", "rate_hz": rate_hz, **loop.control.granted})
        if config.on_twin:
            loop.control.reset_twin(config.seed_start)
        obs, _, _ = loop.observe()
        action_dim = 2 if config.on_twin and get_task(config.task).name == "PushT" else 4
        check_compatible(link.spec, obs, action_dim)
        episode_s = config.episode_s or twin_episode_s
        for seed in todo:
            record = loop.run_episode(seed, episode_s)
            if record["aborted"]:
                print(f"seed {seed}: aborted (the control process died)", flush=True)
                continue
            results.write(record)
            done[seed] = record
            print(
                f"seed {seed}: {'success' if record['success'] else 'failure'} "
                f"in {record['ticks']} ticks",
                flush=True,
            )
            if record["estop"]:
                break
    finally:
        executor.close()
        if loop is not None:
            loop.close()
        log.close()
        results.close()

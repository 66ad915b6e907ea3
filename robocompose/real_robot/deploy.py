"""The deploy loop behind `robocompose deploy` (`robocompose.verbs.deploy`): a policy on an arm
at a fixed rate, every tick logged, episodes resumable.

    policy (in-process, or a PolicyClient to a server) -> ChunkExecutor -> SafetyLayer -> arm

The loop reads the observation, asks the executor for this tick's action, sends it through the
safety layer and writes one JSONL line per tick (observation summary, action proposed, action
sent, clamps and refusals with reasons, period, inference latency, mode events). It never blocks
on the network: with no action to send (waiting for a chunk, a dead or stalled server) it sends
nothing and the safety layer's watchdog holds the arm; the client reconnects with backoff and
the loop resumes when chunks come back. Each episode's result is appended to `episodes.jsonl`
as it ends, and a rerun skips the seeds already there.

On the twin (`robot: twin`, or `dry_run`) the episode is a seeded sim episode that ends at
success or after `episode_s`; on a real arm it ends after `episode_s` or at the e-stop.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from robocompose.real_robot.base import Arm, PolicySpec
from robocompose.real_robot.deploy_io import (
    Ticker,
    arm_action_dim,
    check_compatible,
    observer_for,
)
from robocompose.real_robot.drivers import make_arm
from robocompose.real_robot.drivers.twin import TwinArm, ee_target_from_action
from robocompose.real_robot.executor import ChunkExecutor, ChunkSource, ExecutorConfig
from robocompose.real_robot.safety import SafetyLayer
from robocompose.real_robot.safety_limits import SafetyLimits, limits_for, twin_limits
from robocompose.real_robot.steplog import JsonlWriter, StepRecorder, done_seeds
from robocompose.records import pool
from robocompose.sim.tasks import get_task

ROBOTS = ("twin", "ur5e", "xarm6", "franka")  # as in drivers.DRIVERS and safety_limits


@dataclass(kw_only=True)
class DeployPolicyConfig:
    """What runs in-process when no `server` is given: a checkpoint, or >= 2 parents composed."""

    checkpoint: str | None = None
    parents: list[str] = field(default_factory=list)
    operator: str = "convex"
    weights: list[float] | None = None
    steps: int | None = None  # denoising steps of a checkpoint (None: its own)

    def __post_init__(self) -> None:
        if (self.checkpoint is None) == (not self.parents):
            raise ValueError(
                "`policy` must give either `checkpoint` or >= 2 `parents`. "
                f"Got checkpoint={self.checkpoint!r}, parents={self.parents}."
            )
        if self.parents and len(self.parents) < 2:
            raise ValueError(f"`parents` must name >= 2 checkpoints. Got {self.parents}.")


@dataclass(kw_only=True)
class DeployConfig:
    """`robocompose deploy`: which policy, which arm, how fast, how safe, how many episodes."""

    robot: str = "twin"  # twin, ur5e, xarm6, franka
    task: str = "PickPlace"  # the twin's sim task
    host: str | None = None  # the real arm's address
    robot_options: dict[str, Any] = field(default_factory=dict)  # the driver's keyword arguments
    server: str | None = None  # ws://host:port of a policy server; None: the policy in-process
    api_key_env: str = "ROBOCOMPOSE_API_KEY"  # environment variable holding the server's key
    policy: DeployPolicyConfig | None = None
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    safety: dict[str, Any] = field(default_factory=dict)  # SafetyLimits fields to override
    episodes: int = 1
    seed_start: int = 100_000
    episode_s: float | None = None  # None: the task's own limit on the twin
    time_scale: float = 1.0  # twin only: sim seconds per wall second
    observer: str | None = None  # real arms: "module:function" -> the policy's observation dict
    request_timeout_s: float = 10.0
    connect_timeout_s: float = 10.0
    dry_run: bool = False  # run on the twin whatever `robot` says
    # "loop": commands sent from this loop at executor.rate_hz; "process": a control process
    # streams interpolated targets at the arm's own rate (`process_loop`, `control`)
    control: str = "loop"
    control_rate_hz: float | None = None  # None: control_config.DEFAULT_RATES_HZ[robot]
    control_interpolation: str = "linear"  # between waypoints: "linear" or "cubic"
    out: str = "runs/deploy"
    # "rerun": stream observations, commands (proposed, sent) and clamps live
    # (`robocompose.viz.live`): served over gRPC on `viewer_port` for a viewer to connect to,
    # or sent to a running viewer at `viewer_url` (rerun+http://HOST:PORT/proxy);
    # `viewer_save` writes an .rrd file instead
    viewer: str | None = None
    viewer_save: str | None = None
    viewer_url: str | None = None
    viewer_port: int = 9876

    def __post_init__(self) -> None:
        if self.robot not in ROBOTS:
            raise ValueError(f"`robot` must be one of {list(ROBOTS)}. Got {self.robot!r}.")
        if self.robot_options and self.robot == "twin":
            raise ValueError(f"`robot_options` apply to real arms. Got {self.robot_options}.")
        get_task(self.task)
        if self.server is None and self.policy is None:
            raise ValueError("give `server` (a policy server's address) or `policy` (in-process).")
        if self.episodes < 1:
            raise ValueError(f"`episodes` must be >= 1. Got {self.episodes}.")
        if self.seed_start < 0:
            raise ValueError(f"`seed_start` must be >= 0. Got {self.seed_start}.")
        if self.episode_s is not None and not self.episode_s > 0:
            raise ValueError(f"`episode_s` must be > 0 or None. Got {self.episode_s}.")
        if not (np.isfinite(self.time_scale) and self.time_scale > 0):
            raise ValueError(f"`time_scale` must be > 0. Got {self.time_scale}.")
        if not self.on_twin:
            if self.time_scale != 1.0:
                raise ValueError(f"`time_scale` applies to the twin only. Got {self.time_scale}.")
            if self.host is None:
                raise ValueError(f"`host` (the arm's address) is required for robot {self.robot}.")
            if self.episode_s is None:
                raise ValueError(f"`episode_s` is required for robot {self.robot}.")
            if self.observer is None:
                raise ValueError(
                    f"`observer` is required for robot {self.robot}: a 'module:function' "
                    "returning the policy's observation dict (our policies observe object poses, "
                    "which an arm cannot measure by itself)."
                )
        if self.control not in ("loop", "process"):
            raise ValueError(f"`control` must be 'loop' or 'process'. Got {self.control!r}.")
        if self.viewer not in (None, "rerun"):
            raise ValueError(f"`viewer` must be 'rerun' or None. Got {self.viewer!r}.")
        if self.viewer and self.control != "loop":
            raise ValueError("`viewer` streams the loop's steps: it needs control='loop'.")
        if self.viewer:
            from robocompose.viz.live import LiveViewer

            LiveViewer(self.viewer_save, self.viewer_url, self.viewer_port)
        if self.control_rate_hz is not None and not 1 <= self.control_rate_hz <= 1000:
            raise ValueError(f"`control_rate_hz` must be in [1, 1000]. Got {self.control_rate_hz}.")
        self.limits()  # unknown or invalid safety fields fail here, named

    @property
    def on_twin(self) -> bool:
        return self.dry_run or self.robot == "twin"

    def limits(self) -> SafetyLimits:
        """The robot's default limits with `safety`'s fields replaced."""
        base = twin_limits(self.task) if self.on_twin else limits_for(self.robot)
        names = [f.name for f in dataclasses.fields(SafetyLimits)]
        unknown = [k for k in self.safety if k not in names]
        if unknown:
            raise ValueError(f"unknown `safety` field(s) {unknown}. Choices: {', '.join(names)}.")
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in self.safety.items()}
        return dataclasses.replace(base, **values)

    def seeds(self) -> list[int]:
        return list(range(self.seed_start, self.seed_start + self.episodes))


# ---- the parts ------------------------------------------------------------------------------


@dataclass
class PolicyLink:
    """Where chunks come from: the spec, the source the executor calls, and its client if remote."""

    spec: PolicySpec
    source: ChunkSource
    client: Any = None  # a PolicyClient when served remotely
    close: Callable[[], None] = lambda: None


def connect_policy(config: DeployConfig) -> PolicyLink:
    """A PolicyClient to `config.server`, or the configured policy loaded in-process."""
    if config.server is not None:
        from robocompose.real_robot.client import PolicyClient

        client = PolicyClient(
            config.server,
            api_key=os.environ.get(config.api_key_env) or None,
            timeout_s=config.request_timeout_s,
            connect_timeout_s=config.connect_timeout_s,
        )
        return PolicyLink(
            client.spec, lambda obs: client.infer(obs)["actions"], client, client.close
        )
    from robocompose.real_robot.obs_check import check_observation
    from robocompose.real_robot.policy_adapter import load_served_policy

    assert config.policy is not None
    p = config.policy
    served = load_served_policy(p.checkpoint, p.parents, p.operator, p.weights, steps=p.steps)
    return PolicyLink(
        served.spec, lambda obs: served.infer(check_observation(obs, served.spec))["actions"]
    )


# ---- the loop -------------------------------------------------------------------------------


class DeployLoop:
    """One arm, its safety layer, an executor over a policy link, and the step log. With `twin`
    (the sim behind the arm, which may be wrapped), each episode resets it on its seed."""

    def __init__(
        self,
        arm: Arm,
        layer: SafetyLayer,
        executor: ChunkExecutor,
        observe: Callable[[], tuple[dict, bool | None, float]],
        log: JsonlWriter,
        *,
        time_scale: float = 1.0,
        client: Any = None,
        twin: TwinArm | None = None,
        stop_on_success: bool = True,
    ) -> None:
        self.arm, self.layer, self.executor, self.twin = arm, layer, executor, twin
        self.observe, self.log, self.client = observe, log, client
        self.rate_hz = executor.config.rate_hz
        self.period_s = 1.0 / (self.rate_hz * time_scale)  # wall time per tick
        self.time_scale = time_scale
        self.stop_on_success = stop_on_success

    def run_episode(self, seed: int, episode_s: float) -> dict[str, Any]:
        """One episode on `seed`; its record (also written to the step log at its end)."""
        if self.twin is not None:
            self.twin.reset(seed=seed)
            self.layer.rearm()
        self.layer.hold()  # the limits restart from the pose the arm is in now
        self.layer.drain_events()
        self.executor.reset(seed)
        max_ticks = max(1, round(episode_s * self.rate_hz))
        steps = StepRecorder(self.log, self.client, seed)
        counts = steps.counts
        steps.start(self.rate_hz, self.time_scale, self.period_s, self.executor.config.mode)
        ticker = Ticker(self.period_s)
        tick, success, score, start = 0, None, 0.0, time.monotonic()
        while True:
            started = time.monotonic()
            obs, success, score = self.observe()
            state = self.arm.read_state()
            decision = self.executor.act(tick, obs, ticker.deadline(tick) - 0.1 * self.period_s)
            sent = None
            if decision.action is not None and not self.layer.estopped:
                pos_m, gripper = ee_target_from_action(decision.action)
                result = self.layer.command_ee(pos_m, gripper)
                if result.sent:
                    sent = [*result.target.tolist(), result.gripper]
            estopped = self.layer.estopped  # before the drain: the e-stop's event is logged
            safety = [e.as_dict() for e in self.layer.drain_events()]
            events = list(decision.events)
            steps.record(tick, started, obs, state, decision, sent, safety, events)
            ended = success and self.stop_on_success
            if ended or estopped or tick + 1 >= max_ticks:
                break
            tick = ticker.wait_next(tick)
        record = {
            "seed": seed,
            "success": bool(success),
            "score": float(score),
            "ticks": tick + 1,
            "duration_s": time.monotonic() - start,
            "waited_s": counts.pop("waiting_ticks") * self.period_s * self.time_scale,
            "estop": self.layer.estopped,
            "mode": self.executor.config.mode,
            "rate_hz": self.rate_hz,
            "time_scale": self.time_scale,
            "events": dict(counts),
        }
        self.log.write({"kind": "episode_end", **record})
        return record


def deploy(config: DeployConfig) -> dict[str, Any]:
    """Every episode of `config` not yet in `out/episodes.jsonl`; returns the run's summary,
    also written to `out/summary.json`."""
    out = Path(config.out)
    results_path = out / "episodes.jsonl"
    done = done_seeds(results_path)
    todo = [s for s in config.seeds() if s not in done]
    link = connect_policy(config)
    if config.control == "process":
        from robocompose.real_robot.process_loop import run_in_control_process

        try:
            run_in_control_process(config, link, todo, done)
        finally:
            link.close()
    else:
        _run_in_loop(config, link, todo, done)
    records = [done[s] for s in config.seeds() if s in done]
    rate, _ = pool(records)
    summary = {
        "episodes": len(records),
        "success": dataclasses.asdict(rate),
        "success_text": str(rate),
        "steps_log": str(out / "steps.jsonl"),
        "episodes_log": str(results_path),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def _run_in_loop(
    config: DeployConfig, link: PolicyLink, todo: list[int], done: dict[int, Any]
) -> None:
    """The episodes in `todo` with commands sent from this loop; records added to `done`."""
    out = Path(config.out)
    results_path = out / "episodes.jsonl"
    if config.on_twin:
        arm = make_arm("twin", config.task, time_scale=config.time_scale)
    else:
        arm = make_arm(config.robot, config.host, **config.robot_options)
    layer = SafetyLayer(arm, config.limits(), control_hz=config.executor.rate_hz)
    executor = ChunkExecutor(link.source, link.spec, config.executor)
    observe = observer_for(config.observer, arm)
    log, results = JsonlWriter(out / "steps.jsonl"), JsonlWriter(results_path)
    try:  # a viewer refused below still closes the arm, the link and the logs
        if config.viewer == "rerun":
            from robocompose.viz.live import LiveViewer, RerunStepLog

            viewer = LiveViewer(config.viewer_save, config.viewer_url, config.viewer_port)
            log = RerunStepLog(log, viewer, f"deploy-{config.robot}")
        obs, _, _ = observe()
        check_compatible(link.spec, obs, arm_action_dim(arm))
        if threading.current_thread() is threading.main_thread():
            layer.install_sigint_handler()  # Ctrl-C: e-stop within one control period
        if not config.on_twin and sys.stdin.isatty():
            layer.start_keyboard_listener()  # Enter: e-stop
        loop = DeployLoop(
            arm,
            layer,
            executor,
            observe,
            log,
            time_scale=config.time_scale if config.on_twin else 1.0,
            client=link.client,
            twin=arm if isinstance(arm, TwinArm) else None,
        )
        episode_s = config.episode_s or (arm.episode_s if isinstance(arm, TwinArm) else 0.0)
        for seed in todo:
            record = loop.run_episode(seed, episode_s)
            results.write(record)
            done[seed] = record
            print(
                f"seed {seed}: {'success' if record['success'] else 'failure'} "
                f"in {record['ticks']} ticks",
                flush=True,
            )
            if layer.estopped and not config.on_twin:
                break
    finally:
        executor.close()
        layer.close()
        link.close()
        log.close()
        results.close()

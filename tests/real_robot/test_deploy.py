"""`robocompose deploy` and `replay` through the CLI on the twin (a shipped policy in-process),
the config's errors, and the fixed-rate ticker."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from robocompose.cli import load_verb_config, main
from robocompose.real_robot.deploy import (
    DeployConfig,
    DeployLoop,
    DeployPolicyConfig,
    connect_policy,
)
from robocompose.real_robot.deploy_io import Ticker, observer_for, twin_observer
from robocompose.real_robot.drivers.twin import TwinArm
from robocompose.real_robot.executor import ChunkExecutor, ExecutorConfig
from robocompose.real_robot.faults.report import RecordingArm
from robocompose.real_robot.policy_adapter import load_served_policy
from robocompose.real_robot.replay import read_log, summarize
from robocompose.real_robot.safety import SafetyLayer
from robocompose.real_robot.safety_limits import twin_limits
from robocompose.real_robot.steplog import JsonlWriter, done_seeds
from robocompose.shipped import shipped_path

# against the wall clock: `make test` runs these on their own, after the parallel pass
pytestmark = pytest.mark.realtime

POLICY = DeployPolicyConfig(checkpoint=str(shipped_path("PickPlace", "flow_mlp")))


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="`host` .* is required for robot ur5e"):
        DeployConfig(robot="ur5e", policy=POLICY, episode_s=5.0, observer="m:f")
    with pytest.raises(ValueError, match="`observer` is required for robot franka"):
        DeployConfig(robot="franka", host="172.16.0.2", policy=POLICY, episode_s=5.0)
    with pytest.raises(ValueError, match=r"unknown `safety` field\(s\) \['max_stp_m'\]"):
        DeployConfig(policy=POLICY, safety={"max_stp_m": 0.1})
    with pytest.raises(ValueError, match="`max_step_m` must be a finite number > 0"):
        DeployConfig(policy=POLICY, safety={"max_step_m": -1})
    with pytest.raises(ValueError, match="give `server`"):
        DeployConfig()
    with pytest.raises(ValueError, match="`robot` must be one of"):
        DeployConfig(robot="kuka", policy=POLICY)
    # a real robot's config runs on the twin in a dry run, with the twin's limits
    dry = DeployConfig(robot="ur5e", policy=POLICY, episode_s=5.0, dry_run=True)
    assert dry.on_twin and dry.limits() == twin_limits("PickPlace")


@pytest.mark.parametrize("robot", ["twin", "ur5e", "xarm", "franka"])
def test_every_shipped_deploy_config_builds(robot):
    config = load_verb_config("deploy", [f"deploy={robot}"])
    dry = load_verb_config("deploy", [f"deploy={robot}", "dry_run=true"])
    assert dry.on_twin and (config.robot == "twin") == config.on_twin
    assert config.limits().watchdog_ms > 0


def test_cli_refuses_a_bad_rate_and_a_file_outside_configs(tmp_path):
    with pytest.raises(SystemExit, match=r"`rate_hz` must be in \[10, 50\]. Got 5."):
        main(["deploy", "configs/deploy/twin.yaml", "--rate-hz", "5"])
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "cell.yaml").write_text("robot: twin\n")
    with pytest.raises(SystemExit, match="pass `--config-dir"):
        main(["deploy", str(tmp_path / "deploy" / "cell.yaml")])
    with pytest.raises(SystemExit, match="could not reach the policy server at ws://127.0.0.1:9"):
        main(["deploy", "twin", "--server", "ws://127.0.0.1:9", "connect_timeout_s=0.3"])


def test_a_mistyped_deploy_file_does_not_exist_and_the_nearest_is_named(tmp_path):
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "cell.yaml").write_text("robot: twin\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["deploy", str(tmp_path / "deploy" / "cel.yaml")])
    assert str(exit_info.value.code) == (
        f"robocompose deploy: error: deploy config {tmp_path}/deploy/cel.yaml does not exist. "
        f"Did you mean '{tmp_path}/deploy/cell.yaml'?"
    )


def test_a_deploy_file_of_ones_own_needs_no_package_header(tmp_path):
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "cell.yaml").write_text(
        "robot: twin\npolicy: {checkpoint: PickPlace_flow_mlp}\nepisodes: 4\n"
    )
    searchpath = f"hydra.searchpath=[file://{tmp_path}]"
    config = load_verb_config("deploy", [searchpath, "deploy=cell"])
    assert (config.robot, config.episodes) == ("twin", 4)
    assert load_verb_config("deploy", [searchpath, "deploy=cell", "episodes=2"]).episodes == 2


def test_the_shipped_twin_file_loads_its_checkpoint_from_any_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    link = connect_policy(load_verb_config("deploy", ["deploy=twin"]))
    assert link.spec.action_dim == 4
    main(["deploy", "configs/deploy/ur5e.yaml", "--cfg"])  # the repository's, named from here
    assert "robot: ur5e\n" in capsys.readouterr().out


def test_ticker_keeps_the_grid_and_skips_missed_ticks():
    ticker = Ticker(0.01)
    assert ticker.wait_next(0) == 1
    time.sleep(0.035)  # the loop overran: the ticks it missed are skipped, not bunched
    assert ticker.wait_next(1) >= 4
    assert ticker.deadline(4) == pytest.approx(ticker.t0 + 0.05)


def test_deploy_on_the_twin_logs_every_step_resumes_and_replays(tmp_path, capsys):
    out = tmp_path / "run"
    args = [
        "deploy",
        "configs/deploy/twin.yaml",
        "--episodes",
        "2",
        "--out",
        str(out),
        "--rate-hz",
        "20",
        "episode_s=1.2",
        "time_scale=2",
    ]
    main(args)
    records = done_seeds(out / "episodes.jsonl")
    assert sorted(records) == [100_000, 100_001]
    assert all(r["ticks"] == 24 and r["mode"] == "async" for r in records.values())

    lines = read_log(out / "steps.jsonl")
    steps = [s for s in lines if s["kind"] == "step"]
    assert len(steps) == 48
    limits = twin_limits("PickPlace")
    sent = np.array([s["sent"] for s in steps if s["sent"] is not None])
    assert len(sent) > 30
    assert np.all(sent[:, :3] >= np.array(limits.workspace_low_m) - 1e-9)
    assert np.all(sent[:, :3] <= np.array(limits.workspace_high_m) + 1e-9)
    assert np.all(np.abs(sent[:, 3]) <= 1)
    first = steps[0]
    assert {"obs", "ee_m", "proposed", "sent", "period_s", "latency_s", "safety", "events"} <= set(
        first
    )
    assert first["events"][0]["event"] == "request" and len(first["obs"]["state"]) == 11
    summary = summarize(lines)
    assert summary["episodes"] == 2 and summary["ticks"] == 48

    main(args)  # both seeds are done: nothing runs again
    assert len(read_log(out / "steps.jsonl")) == len(lines)
    assert "success" in json.loads((out / "summary.json").read_text())

    assert f"step log: {out / 'steps.jsonl'}" in capsys.readouterr().out  # said at the start
    main(["replay", str(out / "steps.jsonl"), "--seed", "100001"])
    printed = capsys.readouterr().out
    assert "episodes: 2" in printed and "achieved rate" in printed
    plots = sorted(p.name for p in (out / "plots").glob("*.png"))
    assert plots == [
        "commanded_vs_executed_seed100001.png",
        "events_seed100001.png",
        "period_jitter_seed100001.png",
    ]
    with pytest.raises(SystemExit, match="seed 7 is not in the log"):
        main(["replay", str(out / "steps.jsonl"), "--seed", "7"])


@pytest.fixture
def wrapped(tmp_path):
    """A deploy loop on the twin behind a RecordingArm, the flow MLP in-process, 2x real time."""
    served = load_served_policy(POLICY.checkpoint)
    twin = TwinArm("PickPlace", time_scale=2.0)
    arm = RecordingArm(twin)
    layer = SafetyLayer(arm, twin_limits("PickPlace"), control_hz=10.0)
    executor = ChunkExecutor(
        lambda obs: served.infer(obs)["actions"], served.spec, ExecutorConfig()
    )
    log = JsonlWriter(tmp_path / "steps.jsonl")
    loop = DeployLoop(arm, layer, executor, twin_observer(twin), log, time_scale=2.0, twin=twin)
    yield loop, arm
    executor.close()
    layer.close()
    log.close()


def test_each_episode_starts_from_its_seed_behind_a_wrapped_arm(wrapped, tmp_path):
    """The loop resets the twin it is given even when the arm it commands wraps it."""
    loop, _ = wrapped
    records = [loop.run_episode(seed, 0.5) for seed in (100_000, 100_001)]
    expected = {}
    for seed in (100_000, 100_001):
        fresh = TwinArm("PickPlace", realtime=False)
        expected[seed] = fresh.reset(seed=seed).obs["state"]
        fresh.close()
    steps = [s for s in read_log(tmp_path / "steps.jsonl") if s["kind"] == "step"]
    for seed in (100_000, 100_001):
        first = next(s for s in steps if s["seed"] == seed)
        np.testing.assert_allclose(first["obs"]["state"], expected[seed], atol=2e-3)
    assert [r["ticks"] for r in records] == [5, 5] and not any(r["success"] for r in records)


def test_estop_ends_the_episode_and_nothing_reaches_the_arm_after_it(wrapped):
    loop, arm = wrapped
    stopper = threading.Timer(0.5, loop.layer.estop, args=("test e-stop",))
    stopper.start()
    record = loop.run_episode(100_000, 10.0)
    stopper.join()
    kinds = [entry[0] for entry in arm.received]
    assert record["estop"] and record["ticks"] < 100
    assert "stop" in kinds and "ee" not in kinds[kinds.index("stop") :]
    assert record["events"]["safety:estop_engaged"] == 1
    # the next episode re-arms the twin and runs again
    assert not loop.run_episode(100_001, 0.3)["estop"]


class EstopWhileLogging(JsonlWriter):
    """Engages the e-stop while tick 2's step line is written: after the loop drained that
    tick's safety events, before it checks the e-stop (a Ctrl-C landing there)."""

    def __init__(self, path, layer: SafetyLayer) -> None:
        super().__init__(path)
        self.layer = layer

    def write(self, record) -> None:
        super().write(record)
        if record.get("kind") == "step" and record["tick"] == 2:
            self.layer.estop("between the drain and the check")


def test_an_estop_between_the_drain_and_the_check_is_still_logged(tmp_path):
    served = load_served_policy(POLICY.checkpoint)
    twin = TwinArm("PickPlace", time_scale=4.0)
    layer = SafetyLayer(twin, twin_limits("PickPlace"), control_hz=10.0)
    executor = ChunkExecutor(
        lambda obs: served.infer(obs)["actions"], served.spec, ExecutorConfig(mode="sync")
    )
    log = EstopWhileLogging(tmp_path / "steps.jsonl", layer)
    loop = DeployLoop(twin, layer, executor, twin_observer(twin), log, time_scale=4.0, twin=twin)
    try:
        record = loop.run_episode(100_000, 10.0)
    finally:
        executor.close()
        layer.close()
        log.close()
    assert record["estop"] and record["events"]["safety:estop_engaged"] == 1
    lines = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    steps = [line for line in lines if line["kind"] == "step"]
    assert [s["tick"] for s in steps] == [0, 1, 2, 3]  # the tick after it logs the e-stop
    assert steps[-1]["sent"] is None


def test_an_observer_module_in_the_current_folder_imports(tmp_path, monkeypatch):
    import sys

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "cell_observer.py").write_text("def read():\n    return {'state': [1.0]}\n")
    config = DeployConfig(
        robot="ur5e", host="10.0.0.2", episode_s=1.0, observer="cell_observer:read", policy=POLICY
    )
    try:
        assert observer_for(config.observer, arm=None)() == ({"state": [1.0]}, None, 0.0)
    finally:
        sys.modules.pop("cell_observer", None)

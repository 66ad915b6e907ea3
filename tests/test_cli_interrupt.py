"""Ctrl-C during a long verb: one line saying what is saved where, exit code 130, and a rerun
resumes from it (a real process sent a real SIGINT)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "from robocompose.cli import main; main()"]


def _default_sigint() -> None:
    """A job started in the background of a non-interactive shell (as CI may run us) inherits
    SIGINT ignored, and Python then keeps it ignored: give the child the default a terminal
    user has, so Ctrl-C reaches it as KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _run(args: list[str], **kwargs) -> subprocess.Popen:
    env = os.environ | {"MUJOCO_GL": "egl"}
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE} | kwargs
    return subprocess.Popen(
        [*CLI, *args], cwd=ROOT, env=env, text=True, preexec_fn=_default_sigint, **pipes
    )


def _rerun(args: list[str]) -> subprocess.CompletedProcess:
    """The interrupted command run again to its end (it must resume and succeed)."""
    env = os.environ | {"MUJOCO_GL": "egl"}
    return subprocess.run(
        [*CLI, *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120, check=True
    )


def _interrupt_when(process: subprocess.Popen, ready: Callable[[], bool]) -> tuple[str, str]:
    """SIGINT once `ready()`; the child never outlives the test, whatever fails."""
    try:
        deadline = time.monotonic() + 60
        while not ready():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "nothing saved within 60 s"
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        return process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_ctrl_c_during_eval_says_what_is_saved_and_a_rerun_resumes(tmp_path: Path) -> None:
    out = tmp_path / "ep.jsonl"
    args = ["eval", "PickPlace_flow_mlp", "--num-envs", "1", "--out", str(out)]
    process = _run([*args, "--episodes", "200"])
    _, err = _interrupt_when(process, lambda: out.exists() and out.stat().st_size > 0)
    assert process.returncode == 130
    assert "Traceback" not in err
    saved = len(out.read_text().splitlines())
    assert 1 <= saved < 200
    assert err.strip().splitlines()[-1] == (
        f"robocompose eval: interrupted: {saved} episodes saved to {out}, rerun to resume"
    )

    rerun = _rerun([*args, "--episodes", str(saved + 1)])
    records = [json.loads(line) for line in out.read_text().splitlines()]
    first = records[0]["seed"]
    # the saved episodes were reused, not rerun: one new record appended
    assert [r["seed"] for r in records] == list(range(first, first + saved + 1))
    assert f"(n={saved + 1})" in rerun.stdout


def test_ctrl_c_during_collect_says_what_is_saved_and_a_rerun_resumes(tmp_path: Path) -> None:
    h5py = pytest.importorskip("h5py")
    out, log = tmp_path / "demos.hdf5", tmp_path / "stderr.txt"
    args = ["collect", "PickPlace", "--out", str(out)]
    with log.open("w") as err_file:
        process = _run([*args, "--episodes", "100000"], stderr=err_file)
        _interrupt_when(process, lambda: "expert_success=" in log.read_text())
    assert process.returncode == 130
    err = log.read_text()
    assert "Traceback" not in err
    with h5py.File(out, "r") as f:
        saved = len(f["data"])
    assert saved >= 1
    assert err.strip().splitlines()[-1] == (
        f"robocompose collect: interrupted: {saved} demos saved to {out}, rerun to resume"
    )

    rerun = _rerun([*args, "--episodes", str(saved + 1)])
    assert "(n=1)" in rerun.stdout  # one expert episode this run: the saved demos were kept
    with h5py.File(out, "r") as f:
        assert len(f["data"]) == saved + 1


def test_ctrl_c_during_sweep_says_what_is_saved_and_a_rerun_resumes(tmp_path: Path) -> None:
    table = tmp_path / "episodes.csv"
    args = [
        "sweep",
        "-m",
        "task=Stack",
        "composition=convex,mixture",
        "episodes=6",
        "launcher.episodes_per_task=2",
        f"sweep.dir={tmp_path}",
    ]
    process = _run(args)
    _, err = _interrupt_when(
        process, lambda: table.exists() and len(table.read_text().splitlines()) > 1
    )
    assert process.returncode == 130
    assert "Traceback" not in err
    saved = len(table.read_text().splitlines()) - 1  # the header
    assert 1 <= saved < 12
    assert err.strip().splitlines()[-1] == (
        f"robocompose sweep: interrupted: {saved} episodes saved to {table}, rerun to resume"
    )

    rerun = _rerun(args)
    assert f"(12 episodes, {12 - saved} run now)" in rerun.stdout


def test_ctrl_c_during_train_saves_the_step_it_reached_and_a_rerun_resumes(
    tmp_path: Path,
) -> None:
    """The state saved on Ctrl-C is the one a clean stop at that step saves (so nothing since
    the last checkpoint is lost, and the resumed run trains the uninterrupted run's weights)."""
    from safetensors.torch import load_file

    from robocompose.policies.config import PolicyConfig
    from robocompose.policies.train import TrainConfig, train
    from robocompose.policies.train_state import STATE_JSON, STATE_TENSORS
    from robocompose.sim.collect import collect

    dataset, out, log = tmp_path / "pusht.hdf5", tmp_path / "run", tmp_path / "stderr.txt"
    collect("PushT", 1, dataset, progress=False)
    fields = {"steps": 100_000, "batch_size": 4, "warmup_steps": 1, "checkpoint_every": 100_000}
    args = ["train", f"dataset={dataset}", f"out={out}", "policy=flow_mlp"]
    args += [f"{k}={v}" for k, v in fields.items() if k != "steps"]

    def steps_shown() -> int:
        shown = re.findall(r"\| *(\d+)/100000", log.read_text())
        return int(shown[-1]) if shown else 0

    with log.open("w") as err_file:
        process = _run([*args, "steps=100000"], stderr=err_file)
        _interrupt_when(process, lambda: steps_shown() >= 3)
    assert process.returncode == 130
    err = log.read_text()
    assert "Traceback" not in err
    saved = json.loads((out / STATE_JSON).read_text())["step"]
    assert 3 <= saved < 100_000
    assert err.strip().splitlines()[-1] == (
        f"robocompose train: interrupted: {saved} steps saved to {out}, rerun to resume"
    )

    policy = PolicyConfig.from_dict({"family": "flow", "backbone": "mlp"})
    clean = TrainConfig(dataset=str(dataset), out=str(tmp_path / "clean"), policy=policy, **fields)
    train(clean, progress=False, stop_at_step=saved)
    for name in ("model.safetensors", STATE_TENSORS):
        a, b = load_file(str(out / name)), load_file(str(tmp_path / "clean" / name))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name

    _rerun([*args, f"steps={saved + 2}"])
    assert json.loads((out / STATE_JSON).read_text())["step"] == saved + 2

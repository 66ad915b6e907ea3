"""`robocompose eval` and `search` with launcher=ray, on a Ray of this machine (2 CPUs, on
loopback, one for the module, started as the launcher starts one): the local launcher's episode
records, seed for seed, and the same search, round by round; a worker SIGKILLed mid-task costs
no episode: its task is rerun, or, retries exhausted, the run names its seeds and a rerun runs
only those, resuming from the episode file."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from robocompose.composition import search
from robocompose.evaluation import evaluate
from robocompose.launch.config import LauncherConfig
from robocompose.launch.episodes import Run, evaluate_runs
from robocompose.launch.launchers import (
    CHECKPOINT_FILES,
    WorkersLost,
    connect,
    content_digest,
)
from robocompose.shipped import shipped_path
from robocompose.verbs.eval import EvalConfig
from robocompose.verbs.eval import run as run_eval

ray = pytest.importorskip("ray", reason="the `sweep` extra installs Ray")
pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="finds Ray's workers in /proc"
)

PARENTS = [
    str(shipped_path("PickPlaceTwoCubes", "flow_mlp")),
    str(shipped_path("PickPlaceTwoCubes", "flow_mlp_b")),
]
CHECKPOINT, LABEL = PARENTS[0], Path(PARENTS[0]).name
SEEDS = [100_000, 100_001]  # the eval verb's first two
# an episode's record but its wall-clock time
OUTCOME = ("env_id", "seed", "success", "score", "return", "length", "error", "policy_id", "batch")
TASK_TITLE = b"ray::run_shipped_task"  # a Ray worker's process title while it runs a task


@pytest.fixture(scope="module")
def ray_here(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Ray as `launcher=ray` starts it on this machine, in a short session folder (its unix
    sockets live there), its workers' checkpoint cache in a test folder; the runs below find
    it connected and leave it running. Yields the cache."""
    temp = tempfile.mkdtemp(prefix="rc-ray-")
    cache = tmp_path_factory.mktemp("checkpoint-cache")
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("ROBOCOMPOSE_CHECKPOINT_CACHE", str(cache))  # workers inherit it
            assert connect(LauncherConfig(name="ray", num_cpus=2, temp_dir=temp))
        yield cache
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def local_records() -> list[dict[str, Any]]:
    return evaluate(CHECKPOINT, SEEDS, label=LABEL, progress=False).records


def on_ray(**settings: Any) -> LauncherConfig:
    return LauncherConfig(name="ray", episodes_per_task=1, **settings)  # a task per seed


def outcomes(records: list[dict[str, Any]]) -> list[tuple]:
    """Sorted by seed: tasks finish in any order."""
    return sorted(tuple(r[k] for k in OUTCOME) for r in records)


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_eval_on_ray_writes_the_local_records(
    ray_here: Path, local_records: list, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ray.jsonl"
    config = EvalConfig(checkpoint=CHECKPOINT, episodes=2, out=str(out), launcher=on_ray())
    result = run_eval(config)
    assert [r["seed"] for r in result.records] == SEEDS
    assert outcomes(result.records) == outcomes(read(out)) == outcomes(local_records)
    assert "ray: 2 tasks submitted; 1 parent checkpoints" in capsys.readouterr().err
    files = {name: (Path(CHECKPOINT) / name).read_bytes() for name in CHECKPOINT_FILES}
    assert (ray_here / content_digest(files)).is_dir()  # shipped, not read from its folder


def test_a_search_on_ray_takes_the_local_decisions(ray_here: Path, tmp_path: Path) -> None:
    """Halving's two rounds and the parents' final check, each round's candidates as tasks
    run together: the same records, so the same rounds, rows and choice."""
    tiny = {"method": "halving", "first_slice": 1, "step": 1.0, "operators": ("convex",)}
    tiny |= {"num_envs": 1, "progress": False}
    local = search(PARENTS, SEEDS, out_dir=tmp_path / "local", **tiny)
    remote = search(PARENTS, SEEDS, out_dir=tmp_path / "ray", launcher=on_ray(), **tiny)
    assert remote.choice == local.choice
    assert remote.extra["rounds"] == local.extra["rounds"]
    assert [c.row() for c in remote.candidates] == [c.row() for c in local.candidates]
    files = sorted(p.name for p in (tmp_path / "local/episodes").iterdir())
    assert sorted(p.name for p in (tmp_path / "ray/episodes").iterdir()) == files
    for name in files:
        ran = outcomes(read(tmp_path / "ray/episodes" / name))
        assert ran == outcomes(read(tmp_path / "local/episodes" / name))


def _descendants() -> list[int]:
    """Processes started under this one: the Ray it started, and so its workers."""
    children = defaultdict(list)
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError):  # gone meanwhile
            if entry.isdigit():
                stat = Path(f"/proc/{entry}/stat").read_text()
                children[int(stat.rsplit(")", 1)[1].split()[1])].append(int(entry))
    found, todo = [], [os.getpid()]
    while todo:
        kids = children[todo.pop()]
        found += kids
        todo += kids
    return found


def _kill_a_running_task(running: Callable[[], bool]) -> int | None:
    """SIGKILL a worker of this process's Ray while it runs a task; its PID (None: the run
    ended first)."""
    start = time.monotonic()
    while time.monotonic() - start < 120 and running():
        for pid in _descendants():
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(TASK_TITLE):
                    os.kill(pid, signal.SIGKILL)
                    return pid
        time.sleep(0.01)
    return None


@contextlib.contextmanager
def a_task_killed() -> Iterator[list[int | None]]:
    """Within the block, one running task's worker is killed; the list gets its PID."""
    done, killed = threading.Event(), []
    killer = threading.Thread(
        target=lambda: killed.append(_kill_a_running_task(lambda: not done.is_set()))
    )
    killer.start()
    try:
        yield killed
    finally:
        done.set()
        killer.join()


def test_a_killed_worker_costs_no_episode(
    ray_here: Path, local_records: list, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No retries: the killed task's seed is named and the other's record is in the file; the
    rerun runs that task alone, has its worker killed too, and its retry completes the file."""
    out = tmp_path / "ray.jsonl"
    runs = [Run(CHECKPOINT, SEEDS, out, LABEL)]
    with a_task_killed() as killed, pytest.raises(WorkersLost, match="on each of 1 tries"):
        evaluate_runs(runs, on_ray(max_retries=0), progress=False)
    assert killed[0] is not None, "no task seen running"
    assert len(read(out)) == 1
    capsys.readouterr()

    with a_task_killed() as killed:
        [result] = evaluate_runs(runs, on_ray(max_retries=1), progress=False)
    assert killed[0] is not None, "no task seen running"
    assert "ray: 1 tasks submitted" in capsys.readouterr().err
    assert outcomes(result.records) == outcomes(read(out)) == outcomes(local_records)

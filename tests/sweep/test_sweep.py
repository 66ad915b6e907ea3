"""A small sweep end to end (2 operators x 2 weights x 2 seeds x 2 episodes): killed midway and
resumed, locally and on a local Ray with 2 CPUs; the table holds exactly one row per planned
episode, a rerun runs nothing, and both launchers write the same rows."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from robocompose.config import hydra_value
from robocompose.sweep import plan
from robocompose.sweep.run import run_sweep
from robocompose.sweep.table import OUTCOME, EpisodeTable

AXES = ["composition=convex,mixture", "composition.weights=[0.3,0.7],[0.7,0.3]", "seed=0,1"]
COLUMNS = ["composition", "composition.weights", "seed"]
EPISODES = 2
TOTAL = 2 * 2 * 2 * EPISODES


def _overrides(parents: list[Path], folder: Path, *extra: str) -> list[str]:
    return [
        *AXES,
        "task=PickPlace",
        f"parents={hydra_value([str(p) for p in parents])}",
        f"episodes={EPISODES}",
        f"sweep.dir={hydra_value(str(folder))}",
        "launcher.episodes_per_task=2",
        *extra,
    ]


def _lines(path: Path) -> int:
    return path.read_text().count("\n") - 1 if path.exists() else 0


def _sweep_process(overrides: list[str], home: Path) -> subprocess.Popen:
    """`robocompose sweep -m ...` in its own process group (so a kill takes its children too)."""
    env = dict(os.environ, HOME=str(home), OMP_NUM_THREADS="1")  # Ray writes under HOME
    return subprocess.Popen(
        [sys.executable, "-m", "robocompose.cli", "sweep", "-m", *overrides],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _kill_midway(process: subprocess.Popen, table: Path, timeout_s: float = 120) -> int:
    """SIGKILL the sweep once it has written a few rows; returns the rows it left."""
    start = time.monotonic()
    while _lines(table) < 4:
        if process.poll() is not None:
            pytest.fail(f"the sweep ended before the kill: {process.stderr.read()[-2000:]}")
        if time.monotonic() - start > timeout_s:
            break
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    left = len(EpisodeTable(table, COLUMNS).read())  # also drops a row the kill cut short
    assert 0 < left < TOTAL, f"the kill should land midway; the table had {left} rows"
    return left


def _rows(table: Path) -> list[tuple[str, ...]]:
    """Every row without its wall-clock time, sorted (launchers finish tasks in any order)."""
    keep = [*COLUMNS, *(c for c in OUTCOME if c != "elapsed_s")]
    return sorted(tuple(r[c] for c in keep) for r in EpisodeTable(table, COLUMNS).read())


def _expected() -> set[tuple[str, ...]]:
    cells = [
        (op, w, str(s))
        for op in ("convex", "mixture")
        for w in ("[0.3,0.7]", "[0.7,0.3]")
        for s in (0, 1)
    ]
    return {(*c, str(100_000 + int(c[2]) * 1_000_000 + i)) for c in cells for i in range(EPISODES)}


@pytest.fixture
def ray_temp() -> Iterator[Path]:
    """Ray's session folder: short (its unix sockets live there), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="rc-ray-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_sweep_killed_resumes_and_launchers_agree(
    flow_parents: list[Path], tmp_path: Path, ray_temp: Path
) -> None:
    local, ray = tmp_path / "local", tmp_path / "ray"
    table = local / "episodes.csv"

    left = _kill_midway(_sweep_process(_overrides(flow_parents, local), tmp_path), table)
    report = run_sweep(plan(_overrides(flow_parents, local)), progress=False)
    assert (report.rows, report.ran) == (TOTAL, TOTAL - left)
    rows = _rows(table)
    assert len(rows) == TOTAL and {r[:4] for r in rows} == _expected()
    assert run_sweep(plan(_overrides(flow_parents, local)), progress=False).ran == 0
    summary = (local / "summary.md").read_text()
    assert (
        summary.startswith("## sweep `sweep` on PickPlace\n")
        and "| convex | [0.3,0.7] | 0 |" in summary
    )
    assert f"- parents: A = {flow_parents[0].name}, B = {flow_parents[1].name}\n" in summary
    assert sorted(p.name for p in report.plots) == [f"{c}.png" for c in sorted(COLUMNS)]

    on_ray = _overrides(
        flow_parents, ray, "launcher=ray", "launcher.num_cpus=2", f"launcher.temp_dir={ray_temp}"
    )
    _kill_midway(_sweep_process(on_ray, tmp_path), ray / "episodes.csv")
    resumed = _sweep_process(on_ray, tmp_path)
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read()[-2000:]
    assert _rows(ray / "episodes.csv") == rows
    assert run_sweep(plan(on_ray), progress=False).ran == 0  # nothing left: no Ray is started

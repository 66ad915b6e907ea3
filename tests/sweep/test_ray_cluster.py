"""`robocompose sweep launcher=ray launcher.address=127.0.0.1:PORT` against a real Ray cluster
on this machine (`ray start --head`, 2 CPUs): the workers get the parent checkpoints through the
object store (the driver's copy is gone before any task starts), write the local launcher's
table, and a worker SIGKILLed mid-task costs no episode: its task is rerun, or, retries
exhausted, the sweep names the unfinished cell and a rerun runs only that. About 45 CPU-seconds
(a cluster, two sweep processes and their Ray workers each importing torch and MuJoCo)."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from robocompose.config import hydra_value
from robocompose.launch.launchers import RAY_LOCAL_ONLY
from robocompose.policies.checkpoint import load_policy
from robocompose.sweep import plan
from robocompose.sweep.run import run_sweep
from robocompose.sweep.table import OUTCOME, EpisodeTable

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="finds the cluster's processes in /proc"
)

AXES = ["composition=convex,mixture"]
COLUMNS = ["composition"]
EPISODES = 4
PER_TASK = 2  # episodes per task
TASK_TITLE = b"ray::run_shipped_task"  # a Ray worker's process title while it runs a sweep task


@dataclass
class Cluster:
    address: str
    process: subprocess.Popen  # `ray start --block`: every process of the cluster is in its session
    home: Path  # the node's HOME, so its checkpoint cache

    def processes(self) -> list[int]:
        pids = []
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and os.getsid(int(entry)) == self.process.pid:
                    pids.append(int(entry))
            except OSError:  # gone meanwhile
                pass
        return pids


LOOPBACK = "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_start(port: int, temp: Path, home: Path) -> subprocess.Popen:
    command = [
        str(Path(sys.executable).with_name("ray")),
        "start",
        "--head",
        "--block",
        f"--node-ip-address={LOOPBACK}",  # a test's traffic stays on loopback
        f"--dashboard-host={LOOPBACK}",
        f"--port={port}",
        f"--temp-dir={temp}",
        "--num-cpus=2",
        f"--object-store-memory={100 * 2**20}",
        "--include-dashboard=false",
        "--include-log-monitor=false",
        "--disable-usage-stats",
    ]
    # without RAY_LOCAL_ONLY=0 Ray replaces 127.0.0.1 by the machine's address and listens on it
    env = dict(os.environ, HOME=str(home), OMP_NUM_THREADS="1", **{RAY_LOCAL_ONLY: "0"})
    env.pop("ROBOCOMPOSE_CHECKPOINT_CACHE", None)  # the cache goes under `home`
    with (temp / "ray-start.log").open("w") as log:
        return subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    """A one-node cluster of its own (port, temp dir, HOME). Stopped by stopping the `ray start`
    that runs it, then anything left in its session is killed: `ray stop` would also stop every
    other Ray on this machine."""
    import ray

    temp = Path(tempfile.mkdtemp(prefix="rc-ray-"))  # short: Ray's unix sockets live there
    home = tmp_path_factory.mktemp("node-home")
    port = _free_port()
    cluster = Cluster(f"127.0.0.1:{port}", _ray_start(port, temp, home), home)
    try:
        _wait(lambda: "Ray runtime started" in (temp / "ray-start.log").read_text(), 60, cluster)
        ray.init(address=cluster.address, _node_ip_address=LOOPBACK, logging_level="WARNING")
        yield cluster
    finally:
        ray.shutdown()
        cluster.process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            cluster.process.wait(timeout=30)
        for pid in cluster.processes():  # stragglers
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        cluster.process.wait()
        shutil.rmtree(temp, ignore_errors=True)


def _wait(condition, timeout_s: float, cluster: Cluster) -> None:
    start = time.monotonic()
    while not condition():
        if cluster.process.poll() is not None:
            pytest.fail(f"the Ray cluster stopped (exit {cluster.process.returncode})")
        if time.monotonic() - start > timeout_s:
            pytest.fail(f"waited {timeout_s} s in vain")
        time.sleep(0.05)


def _overrides(parents: list[Path], folder: Path, *extra: str) -> list[str]:
    return [
        *AXES,
        "task=PickPlace",
        f"parents={hydra_value([str(p) for p in parents])}",
        f"episodes={EPISODES}",
        f"sweep.dir={hydra_value(str(folder))}",
        f"launcher.episodes_per_task={PER_TASK}",
        *extra,
    ]


def _on_cluster(cluster: Cluster, parents: list[Path], folder: Path, *extra: str) -> list[str]:
    address = f"launcher.address={cluster.address}"
    return _overrides(parents, folder, "launcher=ray", address, *extra)


def _sweep_process(overrides: list[str], home: Path, log: Path) -> subprocess.Popen:
    env = dict(os.environ, HOME=str(home), OMP_NUM_THREADS="1")
    with log.with_suffix(".out").open("w") as out, log.open("w") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "robocompose.cli", "sweep", "-m", *overrides],
            env=env,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )


def _finish(process: subprocess.Popen, log: Path) -> tuple[int, str]:
    try:
        process.wait(timeout=240)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return process.returncode, log.read_text() + log.with_suffix(".out").read_text()


def _rows(folder: Path) -> list[tuple[str, ...]]:
    """Every row without its wall-clock time, sorted (launchers finish tasks in any order)."""
    keep = [*COLUMNS, *(c for c in OUTCOME if c != "elapsed_s")]
    table = EpisodeTable(folder / "episodes.csv", COLUMNS)
    return sorted(tuple(r[c] for c in keep) for r in table.read())


def _listening(pids: list[int]) -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The addresses the processes `pids` listen on (TCP), read from /proc."""
    inodes = set()
    for pid in pids:
        with contextlib.suppress(OSError):  # gone meanwhile
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    inodes.add(os.readlink(fd))
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and f"socket:[{fields[9]}]" in inodes:  # LISTEN
                raw = bytes.fromhex(fields[1].split(":")[0])  # 32-bit words, host byte order
                words = [raw[i : i + 4][::-1] for i in range(0, len(raw), 4)]
                found.add(ipaddress.ip_address(b"".join(words)))
    return found


def test_the_cluster_advertises_loopback_only(cluster: Cluster) -> None:
    """Every node and the driver talk over 127.0.0.1, not the machine's network address, and
    every process of the cluster listens on loopback only."""
    import ray

    assert {n["NodeManagerAddress"] for n in ray.nodes()} == {LOOPBACK}
    assert ray.util.get_node_ip_address() == LOOPBACK
    listening = _listening(cluster.processes())
    assert listening
    wide = [a for a in listening if not (getattr(a, "ipv4_mapped", None) or a).is_loopback]
    assert not wide, f"the cluster listens beyond loopback: {sorted(map(str, wide))}"


@pytest.fixture(scope="module")
def local_rows(flow_parents: list[Path], tmp_path_factory) -> list[tuple[str, ...]]:
    folder = tmp_path_factory.mktemp("local")
    run_sweep(plan(_overrides(flow_parents, folder)), progress=False)
    rows = _rows(folder)
    assert len(rows) == 2 * EPISODES and len(set(rows)) == len(rows)
    return rows


def test_workers_get_checkpoints_shipped_and_write_the_local_table(
    cluster: Cluster, flow_parents: list[Path], local_rows: list, tmp_path: Path
) -> None:
    """The parents live in a folder the driver reads and then loses before any task starts (the
    cluster's 2 CPUs are held until then), so a worker reading the driver's path would fail."""
    import ray

    driver_copy = tmp_path / "driver-only"
    parents = [Path(shutil.copytree(p, driver_copy / p.name)) for p in flow_parents]
    started, release = tmp_path / "started", tmp_path / "release"
    started.mkdir()

    def hold_cpu() -> None:  # nested, so Ray ships it by value: workers need not find tests/
        Path(started, str(os.getpid())).touch()
        while not release.exists():
            time.sleep(0.05)

    holders = [ray.remote(num_cpus=1)(hold_cpu).remote() for _ in range(2)]
    _wait(lambda: len(list(started.iterdir())) == 2, 60, cluster)

    log = tmp_path / "sweep.log"
    sweep = _sweep_process(_on_cluster(cluster, parents, tmp_path / "ray"), tmp_path, log)
    try:
        submitted = lambda: "tasks submitted" in log.read_text() or sweep.poll() is not None  # noqa: E731
        _wait(submitted, 120, cluster)
    finally:
        driver_copy.rename(tmp_path / "gone")
        release.touch()
    ray.get(holders)
    code, output = _finish(sweep, log)
    assert code == 0, output[-3000:]
    assert f"{2 * EPISODES // PER_TASK} tasks submitted; 2 parent checkpoints" in output

    assert _rows(tmp_path / "ray") == local_rows
    cached = sorted((cluster.home / ".cache/robocompose/checkpoints").iterdir())
    assert len(cached) == 2
    fingerprints = {load_policy(p).fingerprint() for p in flow_parents}
    assert {load_policy(p).fingerprint() for p in cached} == fingerprints


def _kill_a_running_task(cluster: Cluster, running: Callable[[], bool]) -> int | None:
    """SIGKILL a worker of the cluster while it runs a sweep task; its PID (None: the sweep
    ended first)."""
    start = time.monotonic()
    while time.monotonic() - start < 120 and running():
        for pid in cluster.processes():
            try:
                title = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if title.startswith(TASK_TITLE):
                os.kill(pid, signal.SIGKILL)
                return pid
        time.sleep(0.01)
    return None


def test_a_killed_worker_costs_no_episode(
    cluster: Cluster, flow_parents: list[Path], local_rows: list, tmp_path: Path
) -> None:
    """No retries: the killed task's cell is named and the others' episodes are kept; the rerun
    (from this process) runs that task alone, has its worker killed too, and its retry
    completes the table."""
    folder, log = tmp_path / "ray", tmp_path / "sweep.log"
    no_retry = _on_cluster(cluster, flow_parents, folder, "launcher.max_retries=0")
    sweep = _sweep_process(no_retry, tmp_path, log)
    assert _kill_a_running_task(cluster, lambda: sweep.poll() is None), "no task seen running"
    code, output = _finish(sweep, log)
    assert code == 1, output[-3000:]
    assert "lost their Ray worker on each of 1 tries" in output
    assert "Not finished: composition=" in output and f"({PER_TASK} episodes)" in output
    assert "rerun the same command to run only these" in output
    assert len(_rows(folder)) == 2 * EPISODES - PER_TASK

    done = threading.Event()
    killed = []
    killer = threading.Thread(
        target=lambda: killed.append(_kill_a_running_task(cluster, lambda: not done.is_set()))
    )
    killer.start()
    try:
        report = run_sweep(plan(_on_cluster(cluster, flow_parents, folder)), progress=False)
    finally:
        done.set()
        killer.join()
    assert killed and killed[0] is not None, "no task seen running"
    assert (report.rows, report.ran) == (2 * EPISODES, PER_TASK)
    assert _rows(folder) == local_rows

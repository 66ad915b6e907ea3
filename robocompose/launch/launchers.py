"""Who runs tasks: this process one after another, or Ray (this machine or a cluster).

A task is some seeds of one job (`Job`: a sweep's cell, a search's candidate, a checkpoint
under evaluation), run on one torch thread. Both launchers run the same tasks (same seeds, same
batches), and each episode's noise comes from its own seed, so they give the same records; only
the order in which tasks finish differs.

On Ray the nodes share no files with the driver: it reads each parent checkpoint once and puts
its files in Ray's object store; a worker writes them to its node's checkpoint cache (one folder
per content hash, reused by later tasks and runs) and runs the task on that copy.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import shutil
import socket
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from robocompose.launch.config import LauncherConfig
from robocompose.policies.config import CONFIG, WEIGHTS

if TYPE_CHECKING:
    from ray import ObjectRef

CHECKPOINT_FILES = (CONFIG, WEIGHTS)  # what a worker needs of a parent checkpoint folder
LOOPBACK = "127.0.0.1"
# Read by Ray when imported: set to "0", a Ray started for this machine alone listens and
# advertises on loopback instead of the machine's network address.
RAY_LOCAL_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
RAY_EXTRA = "pip install 'robocompose[sweep]'"  # the extra that installs Ray
RAY_CLIENT = "ray://"  # an address of a cluster's Ray Client server (port 10001 by default)
CONNECT_TIMEOUT_S = 5.0  # Ray itself retries an unreachable address for minutes


class Job(Protocol):
    """What a task runs, pickled to a Ray worker: it names the checkpoint folders it reads, so
    they can be shipped, and runs on the node's copies of them."""

    def parent_paths(self) -> list[Path]: ...

    def on_parents(self, paths: list[str]) -> Job: ...

    def run(self, seeds: list[int]) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class Task:
    index: int  # what it belongs to: a sweep's cell, an evaluation's run
    name: str  # that, for messages
    job: Job
    seeds: list[int]


def tasks_of(index: int, name: str, job: Job, seeds: Sequence[int], per_task: int) -> list[Task]:
    """`seeds` of one job split into tasks of at most `per_task` episodes."""
    return [
        Task(index, name, job, list(seeds[start : start + per_task]))
        for start in range(0, len(seeds), per_task)
    ]


class WorkersLost(RuntimeError):
    """Tasks whose Ray worker (or node) died on every try; every other task ran to its end."""

    def __init__(self, tasks: Sequence[Task], tries: int, cause: str) -> None:
        episodes: dict[str, int] = defaultdict(int)
        for task in tasks:
            episodes[task.name] += len(task.seeds)
        unfinished = "; ".join(f"{name} ({n} episodes)" for name, n in episodes.items())
        super().__init__(
            f"{len(tasks)} task(s) lost their Ray worker on each of {tries} tries ({cause}). "
            f"Not finished: {unfinished}. Every finished episode is saved: rerun the same "
            "command to run only these (launcher.max_retries sets the retries)."
        )
        self.tasks = list(tasks)


class LauncherUnavailable(RuntimeError):
    """`launcher=ray` cannot start: Ray is not installed, or its cluster cannot be reached."""


def launch(config: LauncherConfig, tasks: Sequence[Task]) -> Iterator[tuple[Task, list[dict]]]:
    """Each task with its episode records, as tasks finish (no Ray is started for none)."""
    if config.remote and tasks:
        yield from _ray(config, tasks)
        return
    for task in tasks:
        yield task, task.job.run(task.seeds)


def checkpoint_cache() -> Path:
    """Where a node keeps the checkpoints shipped to it: `$ROBOCOMPOSE_CHECKPOINT_CACHE`, else
    `~/.cache/robocompose/checkpoints`."""
    env = os.environ.get("ROBOCOMPOSE_CHECKPOINT_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache/robocompose/checkpoints"


def content_digest(files: Mapping[str, bytes]) -> str:
    """A hash of the files' names and bytes: equal checkpoints share one cache folder."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(f"{name}\0{len(files[name])}\0".encode())
        digest.update(files[name])
    return digest.hexdigest()


def materialise(digest: str, files: Callable[[], Mapping[str, bytes]], cache: Path) -> Path:
    """`cache/<digest>`, written from `files()` unless already there. Written in a temporary
    folder and renamed, so a killed task leaves no half checkpoint and of two tasks writing at
    once, one wins and the other's copy is dropped."""
    folder = cache / digest
    if folder.is_dir():
        return folder
    cache.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{digest}.", dir=cache))
    try:
        for name, data in files().items():
            (partial / name).write_bytes(data)
        os.rename(partial, folder)
    except OSError:
        if not folder.is_dir():
            raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return folder


@dataclass(frozen=True)
class ShippedCheckpoint:
    """A parent checkpoint's files in Ray's object store, under their content hash."""

    digest: str
    files: ObjectRef  # {file name: bytes}
    size: int  # bytes


def run_shipped_task(job: Job, seeds: list[int], parents: list[ShippedCheckpoint]) -> list[dict]:
    """A task on a Ray worker, its parents read from this node's checkpoint cache (fetched
    from the object store by the first task on the node that needs them)."""
    import ray

    cache, local = checkpoint_cache(), []
    for parent in parents:
        fetch = functools.partial(ray.get, parent.files)
        local.append(str(materialise(parent.digest, fetch, cache)))
    return job.on_parents(local).run(seeds)


def _ship(paths: Iterable[Path]) -> dict[Path, ShippedCheckpoint]:
    """Each checkpoint folder's files read once and put in the object store."""
    import ray

    shipped = {}
    for path in paths:
        files = {name: (path / name).read_bytes() for name in CHECKPOINT_FILES}
        size = sum(len(data) for data in files.values())
        shipped[path] = ShippedCheckpoint(content_digest(files), ray.put(files), size)
    return shipped


def _check_reachable(address: str) -> None:
    """A `HOST:PORT` (or `ray://HOST:PORT`) address that takes no connection fails here, in
    seconds, naming it: Ray itself keeps retrying one for minutes."""
    host, _, port = address.removeprefix(RAY_CLIENT).rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", or a form Ray reads itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise LauncherUnavailable(
            f"cannot reach the Ray cluster at launcher.address={address} ({e}). Start it "
            "(`ray start --head` on the head node) or set the address it printed."
        ) from None


def _on_loopback(address: str) -> bool:
    """A cluster on this machine's loopback: Ray would otherwise swap 127.0.0.1 for the
    machine's network address, where such a cluster does not listen."""
    host = address.removeprefix(RAY_CLIENT).rpartition(":")[0].strip("[]")
    return host in ("127.0.0.1", "localhost", "::1")


def connect(config: LauncherConfig) -> bool:
    """Connect this process to Ray: the cluster at `address`, else a Ray started here
    (`num_cpus`, `temp_dir`, on loopback); nothing if already connected. True when this call
    connected, so its caller disconnects (`ray.shutdown()`)."""
    if not config.address or _on_loopback(config.address):
        os.environ.setdefault(RAY_LOCAL_ONLY, "0")
    try:
        import ray
    except ImportError:
        raise LauncherUnavailable(
            f"launcher=ray needs Ray, which is not installed: {RAY_EXTRA} (the `sweep` extra; "
            "`make setup` installs it), on the driver and on every node."
        ) from None
    if ray.is_initialized():
        return False
    options: dict[str, Any] = {}
    if config.address:
        _check_reachable(config.address)
    else:
        options = {"num_cpus": config.num_cpus, "_node_ip_address": LOOPBACK}
        if config.temp_dir:
            options["_temp_dir"] = config.temp_dir
    # Ray Client hands these to the server's own `ray.init`, which then fails
    if not (config.address or "").startswith(RAY_CLIENT):
        options |= {"include_dashboard": False, "logging_level": logging.WARNING}
    try:
        ray.init(address=config.address, **options)
    except ConnectionError as e:
        raise LauncherUnavailable(
            f"cannot reach the Ray cluster at launcher.address={config.address} "
            f"({str(e).strip().splitlines()[0]})."
        ) from None
    return True


@contextlib.contextmanager
def connected(config: LauncherConfig) -> Iterator[None]:
    """Within the block, one Ray for every `launch` of a run made of several (a search's
    rounds): started or joined once, not per round (a new session starts new workers, which
    import torch again); disconnected at the end if this block connected. Nothing for a local
    launcher."""
    owner = config.remote and connect(config)
    try:
        yield
    finally:
        if owner:
            import ray

            ray.shutdown()


def _ray(config: LauncherConfig, tasks: Sequence[Task]) -> Iterator[tuple[Task, list[dict]]]:
    """Tasks as Ray tasks (one CPU each), on the Ray `connect` finds or starts; disconnects (and
    stops a Ray it started) at the end.

    A task whose worker dies is rerun (`max_retries`); an exception raised by a task is not
    (`retry_exceptions=False`): a task's episodes are fixed by its seeds, so it would fail the
    same way again, and the error stops the run at once. A task still lost after its retries
    does not stop the others: they finish and are yielded, then `WorkersLost` names it."""
    owner = connect(config)
    import ray
    from ray.exceptions import NodeDiedError, ObjectLostError, OutOfMemoryError, WorkerCrashedError

    # a task's process or node died (Ray reran it `max_retries` times) or its result went with it
    lost_errors = (WorkerCrashedError, NodeDiedError, OutOfMemoryError, ObjectLostError)
    try:
        shipped = _ship(dict.fromkeys(p for t in tasks for p in t.job.parent_paths()))
        remote = ray.remote(num_cpus=1, max_retries=config.max_retries, retry_exceptions=False)(
            run_shipped_task
        )
        pending = {
            remote.remote(t.job, t.seeds, [shipped[p] for p in t.job.parent_paths()]): t
            for t in tasks
        }
        size = sum(s.size for s in shipped.values()) / 1e6
        print(
            f"ray: {len(tasks)} tasks submitted; {len(shipped)} parent checkpoints "
            f"({size:.1f} MB) shipped through the object store",
            file=sys.stderr,
        )
        lost, cause = [], ""
        while pending:
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            task = pending.pop(ref)
            try:
                records = ray.get(ref)
            except lost_errors as e:
                lost.append(task)
                cause = str(e).strip().splitlines()[0]
                continue
            yield task, records
        if lost:
            raise WorkersLost(lost, config.max_retries + 1, cause)
    finally:
        if owner:
            ray.shutdown()

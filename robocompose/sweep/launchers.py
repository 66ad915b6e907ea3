"""Who runs a sweep's tasks: this process one after another, or Ray (this machine or a cluster).

A task is `run_task(job, seeds)`: some episodes of one cell on one torch thread. Both launchers
run the same tasks (same seeds, same batches), and each episode's noise comes from its own seed,
so they write the same table; only the order of its rows differs.

On Ray the nodes share no files with the driver: it reads each parent checkpoint once and puts
its files in Ray's object store; a worker writes them to its node's checkpoint cache (one folder
per content hash, reused by later tasks and sweeps) and runs the task on that copy.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import os
import shutil
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robocompose.policies.config import CONFIG, WEIGHTS
from robocompose.sweep.config import LauncherConfig, SweepConfig

if TYPE_CHECKING:
    from ray import ObjectRef

CHECKPOINT_FILES = (CONFIG, WEIGHTS)  # what a worker needs of a parent checkpoint folder
LOOPBACK = "127.0.0.1"
# Read by Ray when imported: set to "0", a Ray started for this machine alone listens and
# advertises on loopback instead of the machine's network address.
RAY_LOCAL_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


@dataclass(frozen=True)
class Task:
    cell: int  # index into the plan's cells
    name: str  # the cell's axis values, for messages
    job: SweepConfig
    seeds: list[int]


class WorkersLost(RuntimeError):
    """Tasks whose Ray worker (or node) died on every try; every other task ran to its end."""

    def __init__(self, tasks: Sequence[Task], tries: int, cause: str) -> None:
        episodes: dict[str, int] = defaultdict(int)
        for task in tasks:
            episodes[task.name] += len(task.seeds)
        cells = "; ".join(f"{name} ({n} episodes)" for name, n in episodes.items())
        super().__init__(
            f"{len(tasks)} task(s) lost their Ray worker on each of {tries} tries ({cause}). "
            f"Not finished: {cells}. Every finished episode is in the table: rerun the same "
            "command to run only these (launcher.max_retries sets the retries)."
        )
        self.tasks = list(tasks)


def run_task(job: SweepConfig, seeds: list[int]) -> list[dict[str, Any]]:
    """The episodes `seeds` of one cell, on one torch thread (evaluate's default), so parallel
    tasks share the cores and a result does not depend on the thread count."""
    from robocompose.evaluation import evaluate  # here: planning a sweep needs no torch

    result = evaluate(
        job.policy(),
        seeds,
        steps=job.composition.steps,
        label=job.label(),
        num_envs=job.num_envs,
        device=job.device,
        batch_invariant=job.batch_invariant,
        progress=False,
    )
    return result.records


def launch(
    config: LauncherConfig, tasks: Sequence[Task]
) -> Iterator[tuple[Task, list[dict[str, Any]]]]:
    """Each task with its episode records, as tasks finish (no Ray is started for none)."""
    if config.name == "ray" and tasks:
        yield from _ray(config, tasks)
        return
    for task in tasks:
        yield task, run_task(task.job, task.seeds)


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


def run_shipped_task(
    job: SweepConfig, seeds: list[int], parents: list[ShippedCheckpoint]
) -> list[dict[str, Any]]:
    """`run_task` on a Ray worker, its parents read from this node's checkpoint cache (fetched
    from the object store by the first task on the node that needs them)."""
    import ray

    cache, local = checkpoint_cache(), []
    for parent in parents:
        fetch = functools.partial(ray.get, parent.files)
        local.append(str(materialise(parent.digest, fetch, cache)))
    return run_task(dataclasses.replace(job, parents=local), seeds)


def _ship(paths: Iterable[Path]) -> dict[Path, ShippedCheckpoint]:
    """Each checkpoint folder's files read once and put in the object store."""
    import ray

    shipped = {}
    for path in paths:
        files = {name: (path / name).read_bytes() for name in CHECKPOINT_FILES}
        size = sum(len(data) for data in files.values())
        shipped[path] = ShippedCheckpoint(content_digest(files), ray.put(files), size)
    return shipped


def _ray(config: LauncherConfig, tasks: Sequence[Task]) -> Iterator[tuple[Task, list[dict]]]:
    """Tasks as Ray tasks (one CPU each). Starts a local Ray unless `address` names a cluster
    or this process is already connected; disconnects (and stops a Ray it started) at the end.

    A task whose worker dies is rerun (`max_retries`); an exception raised by a task is not
    (`retry_exceptions=False`): a task's episodes are fixed by its seeds, so it would fail the
    same way again, and the error stops the sweep at once. A task still lost after its retries
    does not stop the others: they finish and are yielded, then `WorkersLost` names it."""
    if not config.address:
        os.environ.setdefault(RAY_LOCAL_ONLY, "0")
    import ray
    from ray.exceptions import NodeDiedError, ObjectLostError, OutOfMemoryError, WorkerCrashedError

    owner = not ray.is_initialized()
    if owner:
        local = {}
        if not config.address:
            local = {"num_cpus": config.num_cpus, "_node_ip_address": LOOPBACK}
        if config.temp_dir and not config.address:
            local["_temp_dir"] = config.temp_dir
        ray.init(
            address=config.address,
            include_dashboard=False,
            logging_level=logging.WARNING,
            **local,
        )
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

"""Who runs a sweep's tasks: this process one after another, or Ray (this machine or a cluster).

A task is `run_task(job, seeds)`: some episodes of one cell on one torch thread. Both launchers
run the same tasks (same seeds, same batches), and each episode's noise comes from its own seed,
so they write the same table; only the order of its rows differs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from robocompose.composition.api import evaluate
from robocompose.sweep.config import LauncherConfig, SweepConfig


@dataclass(frozen=True)
class Task:
    cell: int  # index into the plan's cells
    job: SweepConfig
    seeds: list[int]


def run_task(job: SweepConfig, seeds: list[int]) -> list[dict[str, Any]]:
    """The episodes `seeds` of one cell; one torch thread, so parallel tasks share the cores
    and a result does not depend on the thread count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = evaluate(
            job.policy(),
            seeds,
            steps=job.composition.steps,
            label=job.label(),
            num_envs=job.num_envs,
            progress=False,
        )
    finally:
        torch.set_num_threads(threads)
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


def _ray(config: LauncherConfig, tasks: Sequence[Task]) -> Iterator[tuple[Task, list[dict]]]:
    """Tasks as Ray tasks (one CPU each). Starts a local Ray unless `address` names a cluster
    or this process is already connected; disconnects (and stops a Ray it started) at the end."""
    import ray

    owner = not ray.is_initialized()
    if owner:
        local = {} if config.address else {"num_cpus": config.num_cpus}
        if config.temp_dir and not config.address:
            local["_temp_dir"] = config.temp_dir
        ray.init(
            address=config.address,
            include_dashboard=False,
            logging_level=logging.WARNING,
            **local,
        )
    try:
        remote = ray.remote(num_cpus=1)(run_task)
        pending = {remote.remote(task.job, task.seeds): task for task in tasks}
        while pending:
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            yield pending.pop(ref), ray.get(ref)
    finally:
        if owner:
            ray.shutdown()

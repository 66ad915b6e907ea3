"""Where a verb's episodes run: the `launcher` field of the sweep, search and eval configs.
Light to import (the command line reads it for `--help`); `launchers.py` runs it."""

from __future__ import annotations

from dataclasses import dataclass

from robocompose.choices import check_choices, one_of

LAUNCHERS = ("local", "ray")


@dataclass(kw_only=True)
class LauncherConfig:
    """Where rollouts run: "local" (this process) or "ray" (Ray tasks, one CPU each)."""

    name: str = one_of(LAUNCHERS, "local")
    # ray: a cluster ("HEAD:6379", "ray://HEAD:10001", "auto"); None: start one here
    address: str | None = None
    num_cpus: int | None = None  # ray without address: CPUs of the local Ray (None: all)
    temp_dir: str | None = None  # ray without address: its session folder (None: Ray's default)
    episodes_per_task: int = 8  # episodes of one policy per task: a kill loses at most these
    max_retries: int = 3  # ray: reruns of a task whose worker or node died

    def __post_init__(self) -> None:
        check_choices(self)
        if self.episodes_per_task < 1:
            raise ValueError(f"`episodes_per_task` must be >= 1. Got {self.episodes_per_task}.")
        if self.max_retries < 0:
            raise ValueError(f"`max_retries` must be >= 0. Got {self.max_retries}.")
        if self.num_cpus is not None and self.num_cpus < 1:
            raise ValueError(f"`num_cpus` must be >= 1 or null. Got {self.num_cpus}.")
        if self.address and (self.num_cpus or self.temp_dir):
            raise ValueError(
                "`num_cpus` and `temp_dir` set up a local Ray; with `address` the cluster's own "
                "settings apply. Drop them or the address."
            )

    @property
    def remote(self) -> bool:
        return self.name == "ray"

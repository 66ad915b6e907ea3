"""Read a local LeRobot v3.0 dataset into `Episode`s (`load_lerobot_demos`), checked on opening."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robocompose.sim.episode import (
    ENV_TYPE_GYMNASIUM,
    DatasetError,
    Episode,
    check_episode,
    read_back_nonfinite,
)
from robocompose.sim.lerobot_dataset.layout import (
    ACTION,
    INFO,
    LAYOUT,
    REWARD,
    SKILL,
    TASKS,
    column_array,
    obs_key_of_feature,
)
from robocompose.sim.lerobot_dataset.video import VideoFrames


class LeRobotFolder:
    """A local LeRobot v3.0 dataset: its info, tasks and episodes table, checked on opening."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.root = Path(path)
        if not self.root.is_dir():
            raise DatasetError(f"{self.root}: no such folder; {LAYOUT}.")
        info_path = self.root / INFO
        if not info_path.is_file():
            raise DatasetError(f"{self.root}: not a LeRobot dataset (no {INFO}); {LAYOUT}.")
        try:
            self.info = json.loads(info_path.read_text())
        except json.JSONDecodeError as e:
            raise DatasetError(f"{info_path}: not valid JSON ({e}).") from None
        version = str(self.info.get("codebase_version", "?"))
        if not version.startswith("v3."):
            raise DatasetError(
                f"{self.root}: LeRobot codebase_version {version}; only v3.x is read. Convert "
                "it with LeRobot's `lerobot.datasets.v30.convert_dataset_v21_to_v30`."
            )
        for key in ("fps", "features", "data_path"):
            if key not in self.info:
                raise DatasetError(f"{info_path}: missing `{key}`; {LAYOUT}.")
        self.features: dict[str, dict[str, Any]] = self.info["features"]
        self.fps = float(self.info["fps"])
        self.tasks = self._read_tasks()
        self.episodes = self._read_table("meta/episodes", "episodes table")
        missing = [
            k
            for k in ("episode_index", "dataset_from_index", "dataset_to_index")
            if k not in self.episodes
        ]
        if missing:
            raise DatasetError(f"{self.root}/meta/episodes: episodes lack columns {missing}.")

    def _read_table(self, folder: str, what: str) -> dict[str, list]:
        paths = sorted((self.root / folder).glob("chunk-*/file-*.parquet"))
        if not paths:
            raise DatasetError(f"{self.root}: no {what} ({folder}/chunk-XXX/file-YYY.parquet).")
        table = pa.concat_tables([pq.read_table(p) for p in paths], promote_options="default")
        return table.to_pydict()

    def _read_tasks(self) -> list[str]:
        """Task strings by task_index; pandas wrote them as the frame's index column."""
        path = self.root / TASKS
        if not path.is_file():
            raise DatasetError(f"{self.root}: no {TASKS}; {LAYOUT}.")
        table = pq.read_table(path)
        pandas = json.loads((table.schema.metadata or {}).get(b"pandas", b"{}"))
        names = [c for c in pandas.get("index_columns", []) if isinstance(c, str)] + ["task"]
        text = next((c for c in names if c in table.column_names), None)
        if "task_index" not in table.column_names or text is None:
            raise DatasetError(
                f"{path}: needs a `task_index` column and the task strings (the pandas index "
                f"or a `task` column). Got columns {table.column_names}."
            )
        tasks = [""] * table.num_rows
        for task, index in zip(
            table[text].to_pylist(), table["task_index"].to_pylist(), strict=True
        ):
            tasks[int(index)] = str(task)
        return tasks

    @property
    def video_keys(self) -> list[str]:
        return [k for k, f in self.features.items() if f.get("dtype") == "video"]

    def obs_features(self) -> dict[str, str]:
        """{obs key: feature name} of every observation feature: as robocompose wrote them,
        else the feature names without their prefix."""
        stored = self.info.get("robocompose", {}).get("obs_features")
        if stored:
            return {key: feature for feature, key in stored.items()}
        keys = {obs_key_of_feature(name, list(self.features)): name for name in self.features}
        return {k: name for k, name in keys.items() if k is not None}

    def env_args(self) -> dict[str, Any]:
        """As our hdf5 files' `env_args`: what robocompose recorded, else no env."""
        stored = self.info.get("robocompose", {}).get("env_args")
        return stored or {"env_name": None, "type": ENV_TYPE_GYMNASIUM, "env_kwargs": {}}

    def skill_vocabulary(self) -> list[dict[str, Any]]:
        """Our skill labels where robocompose wrote them, else one per task string."""
        stored = self.info.get("robocompose", {}).get("skill_vocabulary")
        if stored:
            return stored
        return [{"name": "task", "args": {}, "language": task} for task in self.tasks]

    def episode_rows(self) -> list[dict[str, Any]]:
        columns = self.episodes
        return [{k: v[i] for k, v in columns.items()} for i in range(len(columns["episode_index"]))]

    def read(
        self, obs_keys: Sequence[str] | None = None, *, skip_nonfinite: bool = False
    ) -> list[Episode]:
        """Every episode, in episode order (see `load_lerobot_demos`)."""
        available = self.obs_features()
        keys = sorted(available) if obs_keys is None else list(obs_keys)
        missing = [k for k in keys if k not in available]
        if missing:
            raise DatasetError(
                f"obs key(s) {missing} not found ({self.root}). Available obs keys: "
                f"{sorted(available)} (from features {sorted(available.values())})."
            )
        if ACTION not in self.features:
            raise DatasetError(f"{self.root}: no `{ACTION}` feature; training needs actions.")
        columns = [available[k] for k in keys if available[k] not in self.video_keys]
        columns += [ACTION, "episode_index", "frame_index", "timestamp"]
        columns += [c for c in (REWARD, SKILL, "task_index") if c in self.features]
        frames = self._read_frames(columns)
        videos = VideoFrames(self.root, self.info.get("video_path"), self.fps)
        episodes, skipped = [], []
        for row in sorted(self.episode_rows(), key=lambda r: r["episode_index"]):
            index = int(row["episode_index"])
            start, stop = int(row["dataset_from_index"]), int(row["dataset_to_index"])
            name, where = f"episode_{index}", f"episode {index} in {self.root}"
            rows = slice(start, stop)
            episode_of = frames["episode_index"][rows]
            if len(episode_of) != stop - start or np.any(episode_of != index):
                raise DatasetError(
                    f"frames [{start}, {stop}) of data/ are not all episode {index} ({where})."
                )
            obs = {}
            for key in keys:
                feature = available[key]
                if feature in self.video_keys:
                    timestamps = frames["timestamp"][rows] + float(
                        row.get(f"videos/{feature}/from_timestamp", 0.0)
                    )
                    obs[key] = videos.frames(feature, row, timestamps, where)
                else:
                    obs[key] = as_obs(frames[feature][rows])
            actions = frames[ACTION][rows].astype(np.float32)
            rewards = (
                frames[REWARD][rows].reshape(-1).astype(np.float32)
                if REWARD in frames
                else np.zeros(len(actions), dtype=np.float32)
            )
            check_episode(obs, actions, rewards, where)
            problem = read_back_nonfinite(obs, actions, where, skip=skip_nonfinite, item="episode")
            if problem:
                skipped.append(f"{name}: {problem}")
                continue
            skill_column = SKILL if SKILL in frames else "task_index"
            skills = (
                frames[skill_column][rows].reshape(-1).astype(np.int64)
                if skill_column in frames
                else None
            )
            episodes.append(Episode(obs, actions, rewards, name, skills))
        if skipped:
            warnings.warn(
                f"{self.root}: left out {len(skipped)} episode(s) holding NaN or inf: "
                + "; ".join(skipped),
                stacklevel=3,
            )
        return episodes

    def _read_frames(self, columns: list[str]) -> dict[str, np.ndarray]:
        paths = sorted((self.root / "data").glob("chunk-*/file-*.parquet"))
        if not paths:
            raise DatasetError(f"{self.root}: no frames (data/chunk-XXX/file-YYY.parquet).")
        tables = []
        for path in paths:
            table = pq.read_table(path)
            absent = [c for c in columns if c not in table.column_names]
            if absent:
                raise DatasetError(f"{path}: no column(s) {absent}; has {table.column_names}.")
            tables.append(table.select(columns))
        table = pa.concat_tables(tables)
        return {name: column_array(table.column(name), name) for name in columns}


def as_obs(values: np.ndarray) -> np.ndarray:
    values = values.reshape(len(values), -1) if values.ndim == 1 else values
    return values if values.dtype == np.uint8 else values.astype(np.float32)


def load_lerobot_demos(
    path: str | os.PathLike[str],
    obs_keys: Sequence[str] | None = None,
    *,
    skip_nonfinite: bool = False,
) -> list[Episode]:
    """Episodes of a local LeRobot v3.0 dataset, as `load_demos` gives an hdf5 file's.

    Obs keys are feature names without `observation.images.` / `observation.` (None: all of
    them); video features decode to (T, H, W, 3) uint8. `skills` are the per-frame
    `skill_index` where robocompose wrote one, else the `task_index` (indices into
    `read_lerobot_skill_vocabulary`). NaN or inf is refused as `load_demos` refuses it."""
    if isinstance(obs_keys, str):
        raise TypeError(f"`obs_keys` must be a sequence of keys. Got the string {obs_keys!r}.")
    return LeRobotFolder(path).read(obs_keys, skip_nonfinite=skip_nonfinite)

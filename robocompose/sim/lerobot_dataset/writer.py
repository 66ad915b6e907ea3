"""Write episodes as a LeRobot v3.0 dataset as they come (`LeRobotWriter`, `DemoWriter`'s
interface): one data file and one video per key per episode, the meta files rewritten after each."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robocompose.interrupt import interrupt_deferred
from robocompose.sim.episode import (
    ENV_TYPE_GYMNASIUM,
    DatasetError,
    check_episode,
    check_finite,
    skill_indices,
)
from robocompose.sim.lerobot_dataset.layout import (
    ACTION,
    CHUNKS_SIZE,
    CODEBASE_VERSION,
    DATA_PATH,
    EPISODES_PATH,
    INDEX_FEATURES,
    INFO,
    REWARD,
    SKILL,
    STATS,
    TASKS,
    VIDEO_PATH,
    VIDEO_PIX_FMT,
    atomic_write,
    episode_file,
    feature_names,
    list_array,
    pandas_index_metadata,
    signature,
    vector_feature,
)
from robocompose.sim.lerobot_dataset.reader import LeRobotFolder
from robocompose.sim.lerobot_dataset.stats import aggregate_stats, episode_stats
from robocompose.sim.lerobot_dataset.video import encode_video


class LeRobotWriter:
    """Write episodes as a LeRobot v3.0 dataset as they come (`DemoWriter`'s interface).

    `task` is every frame's task string when an episode has no skill labels. `append` reopens
    an existing dataset written by this class (same env) and continues its episode numbering.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        env_name: str,
        env_kwargs: Mapping[str, Any] | None = None,
        *,
        fps: float = 10.0,
        task: str = "",
        overwrite: bool = False,
        append: bool = False,
    ) -> None:
        if overwrite and append:
            raise ValueError("`overwrite` and `append` exclude each other.")
        if fps <= 0:
            raise ValueError(f"`fps` must be > 0. Got {fps}.")
        self.root = Path(path)
        self.env_args = {
            "env_name": env_name,
            "type": ENV_TYPE_GYMNASIUM,
            "env_kwargs": dict(env_kwargs or {}),
        }
        try:
            self.env_args = json.loads(json.dumps(self.env_args))
        except TypeError as e:
            raise ValueError(f"`env_kwargs` must be JSON-serialisable. Got {env_kwargs!r}.") from e
        self.fps, self.task = fps, task or env_name
        self.features: dict[str, dict[str, Any]] | None = None
        self.names: dict[str, str] = {}  # our obs key -> feature name
        self.tasks: list[str] = []
        self.vocabulary: list[dict[str, Any]] = []
        self.rows: list[dict[str, Any]] = []  # the episodes table
        self.demo_attrs: list[dict[str, Any]] = []
        self._closed = False
        if self.root.exists() and any(self.root.iterdir()):
            if append:
                self._reopen()
            elif not overwrite:
                raise DatasetError(
                    f"{self.root}: exists and is not empty; pass append or overwrite."
                )
            else:
                remove_dataset(self.root)

    def _reopen(self) -> None:
        folder = LeRobotFolder(self.root)
        stored = folder.info.get("robocompose", {})
        env_args = stored.get("env_args") or {}
        for key in ("env_name", "env_kwargs"):
            if env_args.get(key) != self.env_args[key]:
                raise DatasetError(
                    f"{self.root}: `env_args.{key}` is {env_args.get(key)!r}, cannot append "
                    f"episodes of {self.env_args[key]!r}. Write to a new folder."
                )
        self.features = folder.features
        self.names = folder.obs_features()
        self.fps = folder.fps
        self.tasks = folder.tasks
        self.vocabulary = stored.get("skill_vocabulary", [])
        self.rows = sorted(folder.episode_rows(), key=lambda r: r["episode_index"])
        self.demo_attrs = [attrs_of(row) for row in self.rows]

    def add_episode(
        self,
        obs: Mapping[str, np.ndarray],
        actions: np.ndarray,
        rewards: np.ndarray,
        attrs: Mapping[str, Any] | None = None,
        skills: Sequence[Mapping[str, Any]] | None = None,
    ) -> str:
        """Validate then write one episode; `attrs` (e.g. its seed) go in the episodes table
        as `robocompose/<name>` columns, `skills` as per-frame labels and task strings."""
        if self._closed:
            raise RuntimeError(f"LeRobotWriter for {self.root} is closed.")
        index = len(self.rows)
        where = f"episode {index} for {self.root}"
        obs = {k: np.asarray(v) for k, v in obs.items()}
        actions = np.asarray(actions, dtype=np.float32)
        rewards = np.asarray(rewards, dtype=np.float32)
        check_episode(obs, actions, rewards, where)
        check_finite({"actions": actions} | {f"obs/{k}": v for k, v in obs.items()}, where)
        steps = len(actions)
        if skills is not None and len(skills) != steps:
            raise DatasetError(
                f"`skills` must have one label per step. Got {len(skills)} != {steps} ({where})."
            )
        names = feature_names(obs)
        if self.features is not None and names != self.names:
            raise DatasetError(
                f"obs keys {sorted(obs)} must match the dataset's {sorted(self.names)} ({where})."
            )
        features = self._features_of(obs, names, actions, skills is not None)
        if self.features is None:
            self.features, self.names = features, names
        elif signature(features) != signature(self.features):
            raise DatasetError(
                f"features {signature(features)} must match the dataset's "
                f"{signature(self.features)} ({where})."
            )
        skill_index = skill_indices(self.vocabulary, skills) if skills is not None else None
        task_index = self._task_indices(skills, steps)
        start = self.rows[-1]["dataset_to_index"] if self.rows else 0
        timestamps = (np.arange(steps) / self.fps).astype(np.float32)
        columns: dict[str, pa.Array] = {}
        for key, value in obs.items():
            if value.dtype != np.uint8:
                columns[names[key]] = list_array(value.reshape(steps, -1))
        columns[ACTION] = list_array(actions)
        columns[REWARD] = pa.array(rewards, pa.float32())
        if skill_index is not None:
            columns[SKILL] = pa.array(skill_index, pa.int64())
        columns["timestamp"] = pa.array(timestamps, pa.float32())
        columns["frame_index"] = pa.array(np.arange(steps), pa.int64())
        columns["episode_index"] = pa.array(np.full(steps, index), pa.int64())
        columns["index"] = pa.array(np.arange(start, start + steps), pa.int64())
        columns["task_index"] = pa.array(task_index, pa.int64())
        file = episode_file(index)
        row: dict[str, Any] = {
            "episode_index": index,
            "tasks": sorted({self.tasks[i] for i in task_index}),
            "length": steps,
            "data/chunk_index": file["chunk_index"],
            "data/file_index": file["file_index"],
            "dataset_from_index": start,
            "dataset_to_index": start + steps,
            "meta/episodes/chunk_index": 0,
            "meta/episodes/file_index": 0,
        }
        with interrupt_deferred():  # Ctrl-C waits: an episode is written and counted whole
            for key, value in obs.items():
                if value.dtype == np.uint8:
                    video = names[key]
                    path = self.root / VIDEO_PATH.format(video_key=video, **file)
                    atomic_write(path, lambda p, v=value: encode_video(p, v, self.fps))
                    row |= {
                        f"videos/{video}/chunk_index": file["chunk_index"],
                        f"videos/{video}/file_index": file["file_index"],
                        f"videos/{video}/from_timestamp": 0.0,
                        f"videos/{video}/to_timestamp": steps / self.fps,
                    }
            row |= episode_stats(obs, names, actions, rewards)
            row |= {f"robocompose/{k}": v for k, v in dict(attrs or {}).items()}
            table = pa.table(columns)
            atomic_write(self.root / DATA_PATH.format(**file), lambda p: pq.write_table(table, p))
            self.rows.append(row)
            self.demo_attrs.append(dict(attrs or {}))
            self._write_meta()
        return f"episode_{index}"

    def _features_of(
        self,
        obs: Mapping[str, np.ndarray],
        names: Mapping[str, str],
        actions: np.ndarray,
        with_skills: bool,
    ) -> dict[str, dict[str, Any]]:
        features: dict[str, dict[str, Any]] = {}
        for key, value in sorted(obs.items()):
            if "." in key or "/" in key:
                raise DatasetError(f"obs keys must not contain '.' or '/'. Got {key!r}.")
            if value.dtype == np.uint8 and value.ndim == 4 and value.shape[-1] == 3:
                h, w = value.shape[1:3]
                features[names[key]] = {
                    "dtype": "video",
                    "shape": [h, w, 3],
                    "names": ["height", "width", "channels"],
                    "info": {
                        "video.height": h,
                        "video.width": w,
                        "video.codec": "h264",
                        "video.pix_fmt": VIDEO_PIX_FMT,
                        "video.is_depth_map": False,
                        "video.fps": self.fps,
                        "video.channels": 3,
                        "has_audio": False,
                    },
                }
            elif value.dtype == np.uint8:
                raise DatasetError(
                    f"obs key {key!r}: uint8 arrays must be (T, H, W, 3) images. Got {value.shape}."
                )
            else:
                size = int(np.prod(value.shape[1:]))
                features[names[key]] = vector_feature(size)
        features[ACTION] = vector_feature(actions.shape[1])
        features[REWARD] = {"dtype": "float32", "shape": [1], "names": None}
        if with_skills:
            features[SKILL] = {"dtype": "int64", "shape": [1], "names": None}
        features["timestamp"] = {"dtype": "float32", "shape": [1], "names": None}
        for name in INDEX_FEATURES[1:]:
            features[name] = {"dtype": "int64", "shape": [1], "names": None}
        return features

    def _task_indices(self, skills: Sequence[Mapping[str, Any]] | None, steps: int) -> np.ndarray:
        """Each frame's task: its skill's language, else the dataset's task string."""
        texts = [str(s["language"]) for s in skills] if skills is not None else [self.task] * steps
        for text in dict.fromkeys(texts):
            if text not in self.tasks:
                self.tasks.append(text)
        return np.asarray([self.tasks.index(t) for t in texts], dtype=np.int64)

    def _write_meta(self) -> None:
        """Episodes table, tasks, stats and info, each replaced whole."""
        episodes = pa.Table.from_pylist(self.rows)
        atomic_write(
            self.root / EPISODES_PATH.format(chunk_index=0, file_index=0),
            lambda p: pq.write_table(episodes, p),
        )
        tasks = pa.table(
            {
                "task_index": pa.array(range(len(self.tasks)), pa.int64()),
                "__index_level_0__": pa.array(self.tasks, pa.string()),
            }
        ).replace_schema_metadata({b"pandas": pandas_index_metadata()})
        atomic_write(self.root / TASKS, lambda p: pq.write_table(tasks, p))
        stats = aggregate_stats(self.rows, self.features or {})
        atomic_write(self.root / STATS, lambda p: p.write_text(json.dumps(stats, indent=4)))
        frames = self.rows[-1]["dataset_to_index"] if self.rows else 0
        video_keys = [k for k, f in (self.features or {}).items() if f["dtype"] == "video"]
        info = {
            "codebase_version": CODEBASE_VERSION,
            "robot_type": None,
            "total_episodes": len(self.rows),
            "total_frames": frames,
            "total_tasks": len(self.tasks),
            "chunks_size": CHUNKS_SIZE,
            "data_files_size_in_mb": 100,
            "video_files_size_in_mb": 200,
            "fps": self.fps if self.fps != int(self.fps) else int(self.fps),
            "splits": {"train": f"0:{len(self.rows)}"},
            "data_path": DATA_PATH,
            "video_path": VIDEO_PATH if video_keys else None,
            "features": self.features,
            "robocompose": {
                "env_args": self.env_args,
                "skill_vocabulary": self.vocabulary,
                "obs_features": {feature: key for key, feature in self.names.items()},
            },
        }
        atomic_write(self.root / INFO, lambda p: p.write_text(json.dumps(info, indent=4)))

    def close(self) -> None:
        self._closed = True

    def __enter__(self) -> LeRobotWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def attrs_of(row: Mapping[str, Any]) -> dict[str, Any]:
    prefix = "robocompose/"
    return {k[len(prefix) :]: v for k, v in row.items() if k.startswith(prefix) and v is not None}


def remove_dataset(root: Path) -> None:
    """Only what a LeRobot dataset holds, so `overwrite` never deletes someone's other files."""
    import shutil

    for part in ("meta", "data", "videos"):
        if (root / part).is_dir():
            shutil.rmtree(root / part)

"""Demonstrations as a local LeRobot dataset (format v3.0): read into `Episode`s, written from them.

    robocompose collect PushT format=lerobot --out data/PushT_lerobot
    robocompose train dataset=data/PushT_lerobot out=ckpt/pusht

Layout (LeRobot's `LeRobotDataset`, codebase_version "v3.0")::

    meta/info.json          fps, features {name: {dtype, shape, names}}, data_path, video_path
    meta/stats.json         per feature: min, max, mean, std, count
    meta/tasks.parquet      task strings (the index) -> task_index
    meta/episodes/chunk-XXX/file-YYY.parquet   one row per episode: length, tasks,
                            dataset_from_index/_to_index, data/{chunk,file}_index,
                            videos/<key>/{chunk_index, file_index, from_timestamp, to_timestamp}
    data/chunk-XXX/file-YYY.parquet            one row per frame: the features, timestamp,
                            frame_index, episode_index, index, task_index
    videos/<key>/chunk-XXX/file-YYY.mp4        a video feature's frames, episodes back to back

Our obs keys map to feature names as LeRobot names them (`feature_names`): the robot's own state
is `observation.state`, so `proprio` is that and `state` (object poses too) is
`observation.environment_state` beside it, or `observation.state` alone; another low-dim key
`k` is `observation.k`, an image key `k` (H, W, 3) uint8 the video feature
`observation.images.k`; `actions` is `action`, `rewards` `next.reward`. info.json keeps the
mapping (`robocompose.obs_features`); a dataset without it is read by the inverse rule
(`obs_key_of_feature`), so a LeRobot dataset's `observation.images.top` is obs key `top`.

The writer puts each episode in its own data file and its own video file per key (v3.0 allows any
split of episodes into files; the episodes table says where each one is) and rewrites the meta
files after every episode, so an interrupted collection keeps every finished episode and
resumes. Videos are H.264 in RGB at CRF 0, lossless: frames read back exactly as written.
Task strings are a skill's language where the demos carry skill labels (the exact labels stay in
the `skill_index` feature and info.json's `robocompose` entry), else the task's name. Parquet is
read and written with pyarrow, video with PyAV.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping, Sequence
from fractions import Fraction
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
    Episode,
    NonFiniteError,
    check_episode,
    check_finite,
    nonfinite,
)

CODEBASE_VERSION = "v3.0"
INFO, STATS, TASKS = "meta/info.json", "meta/stats.json", "meta/tasks.parquet"
CHUNK_FILE = "chunk-{chunk_index:03d}/file-{file_index:03d}"
EPISODES_PATH = "meta/episodes/" + CHUNK_FILE + ".parquet"
DATA_PATH = "data/" + CHUNK_FILE + ".parquet"
VIDEO_PATH = "videos/{video_key}/" + CHUNK_FILE + ".mp4"
CHUNKS_SIZE = 1000  # files per chunk folder, as LeRobot's default
IMAGE_PREFIX, OBS_PREFIX = "observation.images.", "observation."
ACTION, REWARD, SKILL = "action", "next.reward", "skill_index"
INDEX_FEATURES = ("timestamp", "frame_index", "episode_index", "index", "task_index")
VIDEO_CODEC, VIDEO_PIX_FMT = "libx264rgb", "rgb24"
LAYOUT = (
    "a LeRobot v3.0 dataset folder holds meta/info.json, meta/tasks.parquet, "
    "meta/episodes/chunk-XXX/file-YYY.parquet, data/chunk-XXX/file-YYY.parquet and, for video "
    "features, videos/<feature>/chunk-XXX/file-YYY.mp4"
)


def is_lerobot_folder(path: str | os.PathLike[str]) -> bool:
    """A folder is read as a LeRobot dataset (a file as hdf5)."""
    return os.path.isdir(path)


def feature_names(obs: Mapping[str, np.ndarray]) -> dict[str, str]:
    """{our obs key: LeRobot feature name} for an episode's obs (see the module docstring)."""
    names = {}
    for key, value in obs.items():
        if value.dtype == np.uint8:
            names[key] = IMAGE_PREFIX + key
        elif key == "proprio" or (key == "state" and "proprio" not in obs):
            names[key] = OBS_PREFIX + "state"
        elif key == "state":
            names[key] = OBS_PREFIX + "environment_state"
        else:
            names[key] = OBS_PREFIX + key
    return names


def obs_key_of_feature(feature: str, features: Sequence[str]) -> str | None:
    """The obs key a LeRobot feature is read as, `feature_names` inverted: observation.state
    is `proprio` beside observation.environment_state (which is `state`), else `state`; other
    features lose their prefix. None for a feature that is no observation."""
    if feature == OBS_PREFIX + "environment_state":
        return "state"
    if feature == OBS_PREFIX + "state":
        return "proprio" if OBS_PREFIX + "environment_state" in features else "state"
    for prefix in (IMAGE_PREFIX, OBS_PREFIX):
        if feature.startswith(prefix):
            return feature[len(prefix) :]
    return None


def _episode_file(index: int) -> dict[str, int]:
    return {"chunk_index": index // CHUNKS_SIZE, "file_index": index % CHUNKS_SIZE}


# ---- reading --------------------------------------------------------------------------------


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
        videos = _VideoFrames(self.root, self.info.get("video_path"), self.fps)
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
                    obs[key] = _as_obs(frames[feature][rows])
            actions = frames[ACTION][rows].astype(np.float32)
            rewards = (
                frames[REWARD][rows].reshape(-1).astype(np.float32)
                if REWARD in frames
                else np.zeros(len(actions), dtype=np.float32)
            )
            check_episode(obs, actions, rewards, where)
            problem = nonfinite({"actions": actions} | {f"obs/{k}": v for k, v in obs.items()})
            if problem and not skip_nonfinite:
                raise NonFiniteError(
                    f"{problem} ({where}); every value must be finite. Fix or delete that "
                    "episode, or leave such episodes out (training: skip_nonfinite_demos=true)."
                )
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
        return {name: _column_array(table.column(name), name) for name in columns}


def _column_array(column: pa.ChunkedArray, name: str) -> np.ndarray:
    """A parquet column as (N,) or (N, D): list columns stacked, scalars as they are."""
    column = column.combine_chunks()
    if pa.types.is_fixed_size_list(column.type):
        values = column.flatten().to_numpy(zero_copy_only=False)
        return values.reshape(len(column), column.type.list_size)
    if pa.types.is_list(column.type):
        values = column.to_pylist()
        try:
            return np.asarray(values)
        except ValueError:
            raise DatasetError(f"column `{name}` holds lists of unequal length.") from None
    return column.to_numpy(zero_copy_only=False)


def _as_obs(values: np.ndarray) -> np.ndarray:
    values = values.reshape(len(values), -1) if values.ndim == 1 else values
    return values if values.dtype == np.uint8 else values.astype(np.float32)


class _VideoFrames:
    """Decoded video files, each decoded once; an episode's frames picked by timestamp."""

    def __init__(self, root: Path, video_path: str | None, fps: float) -> None:
        self.root, self.video_path, self.fps = root, video_path, fps
        self._decoded: dict[Path, tuple[np.ndarray, np.ndarray]] = {}

    def frames(
        self, feature: str, row: Mapping[str, Any], timestamps: np.ndarray, where: str
    ) -> np.ndarray:
        if not self.video_path:
            raise DatasetError(f"{self.root}/{INFO}: video feature {feature} but no `video_path`.")
        path = self.root / self.video_path.format(
            video_key=feature,
            chunk_index=int(row.get(f"videos/{feature}/chunk_index", 0)),
            file_index=int(row.get(f"videos/{feature}/file_index", 0)),
        )
        if path not in self._decoded:
            self._decoded[path] = decode_video(path)
        times, images = self._decoded[path]
        nearest = np.clip(np.searchsorted(times, timestamps), 1, max(len(times) - 1, 1))
        left = nearest - 1
        pick = np.where(
            np.abs(times[left] - timestamps) <= np.abs(times[nearest] - timestamps), left, nearest
        )
        pick = np.minimum(pick, len(times) - 1)
        off = np.abs(times[pick] - timestamps)
        if len(times) == 0 or off.max() > 0.5 / self.fps:
            raise DatasetError(
                f"{path}: no frame within half a frame of timestamp "
                f"{float(timestamps[int(np.argmax(off))]) if len(times) else timestamps[0]:.4f} s "
                f"({where})."
            )
        return images[pick]


def decode_video(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(timestamps (N,) in seconds, frames (N, H, W, 3) uint8) of an mp4, in time order."""
    import av

    if not path.is_file():
        raise DatasetError(f"{path}: missing video file; {LAYOUT}.")
    times, images = [], []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        for frame in container.decode(stream):
            times.append(float(frame.pts * stream.time_base))
            images.append(frame.to_ndarray(format="rgb24"))
    order = np.argsort(times, kind="stable")
    return np.asarray(times)[order], np.stack(images)[order]


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


# ---- writing --------------------------------------------------------------------------------


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
                _remove_dataset(self.root)

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
        self.demo_attrs = [_attrs_of(row) for row in self.rows]

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
        elif _signature(features) != _signature(self.features):
            raise DatasetError(
                f"features {_signature(features)} must match the dataset's "
                f"{_signature(self.features)} ({where})."
            )
        skill_index = self._skill_indices(skills) if skills is not None else None
        task_index = self._task_indices(skills, steps)
        start = self.rows[-1]["dataset_to_index"] if self.rows else 0
        timestamps = (np.arange(steps) / self.fps).astype(np.float32)
        columns: dict[str, pa.Array] = {}
        for key, value in obs.items():
            if value.dtype != np.uint8:
                columns[names[key]] = _list_array(value.reshape(steps, -1))
        columns[ACTION] = _list_array(actions)
        columns[REWARD] = pa.array(rewards, pa.float32())
        if skill_index is not None:
            columns[SKILL] = pa.array(skill_index, pa.int64())
        columns["timestamp"] = pa.array(timestamps, pa.float32())
        columns["frame_index"] = pa.array(np.arange(steps), pa.int64())
        columns["episode_index"] = pa.array(np.full(steps, index), pa.int64())
        columns["index"] = pa.array(np.arange(start, start + steps), pa.int64())
        columns["task_index"] = pa.array(task_index, pa.int64())
        file = _episode_file(index)
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
                    _atomic(path, lambda p, v=value: encode_video(p, v, self.fps))
                    row |= {
                        f"videos/{video}/chunk_index": file["chunk_index"],
                        f"videos/{video}/file_index": file["file_index"],
                        f"videos/{video}/from_timestamp": 0.0,
                        f"videos/{video}/to_timestamp": steps / self.fps,
                    }
            row |= _episode_stats(obs, names, actions, rewards)
            row |= {f"robocompose/{k}": v for k, v in dict(attrs or {}).items()}
            table = pa.table(columns)
            _atomic(self.root / DATA_PATH.format(**file), lambda p: pq.write_table(table, p))
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
                features[names[key]] = _vector_feature(size)
        features[ACTION] = _vector_feature(actions.shape[1])
        features[REWARD] = {"dtype": "float32", "shape": [1], "names": None}
        if with_skills:
            features[SKILL] = {"dtype": "int64", "shape": [1], "names": None}
        features["timestamp"] = {"dtype": "float32", "shape": [1], "names": None}
        for name in INDEX_FEATURES[1:]:
            features[name] = {"dtype": "int64", "shape": [1], "names": None}
        return features

    def _skill_indices(self, labels: Sequence[Mapping[str, Any]]) -> np.ndarray:
        known = {json.dumps(v, sort_keys=True): i for i, v in enumerate(self.vocabulary)}
        indices = []
        for label in labels:
            key = json.dumps(dict(label), sort_keys=True)
            if key not in known:
                known[key] = len(self.vocabulary)
                self.vocabulary.append(dict(label))
            indices.append(known[key])
        return np.asarray(indices, dtype=np.int64)

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
        _atomic(
            self.root / EPISODES_PATH.format(chunk_index=0, file_index=0),
            lambda p: pq.write_table(episodes, p),
        )
        tasks = pa.table(
            {
                "task_index": pa.array(range(len(self.tasks)), pa.int64()),
                "__index_level_0__": pa.array(self.tasks, pa.string()),
            }
        ).replace_schema_metadata({b"pandas": _pandas_index_metadata()})
        _atomic(self.root / TASKS, lambda p: pq.write_table(tasks, p))
        stats = _aggregate_stats(self.rows, self.features or {})
        _atomic(self.root / STATS, lambda p: p.write_text(json.dumps(stats, indent=4)))
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
        _atomic(self.root / INFO, lambda p: p.write_text(json.dumps(info, indent=4)))

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


def _vector_feature(size: int) -> dict[str, Any]:
    return {"dtype": "float32", "shape": [size], "names": None}


def _signature(features: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple]:
    return {k: (f["dtype"], tuple(f["shape"])) for k, f in features.items()}


def _list_array(values: np.ndarray) -> pa.Array:
    """(T, D) float32 as a fixed-size list column, as LeRobot's `datasets` features store it."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), values.shape[1])


def _pandas_index_metadata() -> bytes:
    """Parquet metadata that makes pandas read `__index_level_0__` back as the task index
    (LeRobot reads tasks.parquet with pandas, the task strings being the index)."""
    return json.dumps(
        {
            "index_columns": ["__index_level_0__"],
            "column_indexes": [],
            "columns": [
                {
                    "name": "task_index",
                    "field_name": "task_index",
                    "pandas_type": "int64",
                    "numpy_type": "int64",
                    "metadata": None,
                },
                {
                    "name": None,
                    "field_name": "__index_level_0__",
                    "pandas_type": "unicode",
                    "numpy_type": "object",
                    "metadata": None,
                },
            ],
            "pandas_version": "2.0.0",
        }
    ).encode()


def _attrs_of(row: Mapping[str, Any]) -> dict[str, Any]:
    prefix = "robocompose/"
    return {k[len(prefix) :]: v for k, v in row.items() if k.startswith(prefix) and v is not None}


def _episode_stats(
    obs: Mapping[str, np.ndarray],
    names: Mapping[str, str],
    actions: np.ndarray,
    rewards: np.ndarray,
) -> dict[str, Any]:
    """Per-episode `stats/<feature>/<stat>` columns: per dimension for vectors, per channel in
    [0, 1] for videos (LeRobot's layout), each flattened to a list."""
    arrays: dict[str, np.ndarray] = {ACTION: actions, REWARD: rewards.reshape(-1, 1)}
    for key, value in obs.items():
        if value.dtype == np.uint8:
            arrays[names[key]] = value.reshape(-1, 3) / 255.0
        else:
            arrays[names[key]] = value.reshape(len(value), -1)
    row: dict[str, Any] = {}
    for name, x in arrays.items():
        x = x.astype(np.float64)
        for stat, value in (
            ("min", x.min(0)),
            ("max", x.max(0)),
            ("mean", x.mean(0)),
            ("std", x.std(0)),
            ("count", np.array([len(x)])),
        ):
            row[f"stats/{name}/{stat}"] = value.tolist()
    return row


def _aggregate_stats(
    rows: Sequence[Mapping[str, Any]], features: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, list]]:
    """Dataset stats from the episodes' (pooled means and variances); video stats as
    (3, 1, 1) per channel, as LeRobot stores them."""
    stats: dict[str, dict[str, list]] = {}
    for name, feature in features.items():
        if f"stats/{name}/mean" not in (rows[0] if rows else {}):
            continue
        n = np.array([r[f"stats/{name}/count"][0] for r in rows], dtype=np.float64)
        mean = np.array([r[f"stats/{name}/mean"] for r in rows])
        std = np.array([r[f"stats/{name}/std"] for r in rows])
        total = n.sum()
        pooled = (n[:, None] * mean).sum(0) / total
        var = (n[:, None] * (std**2 + mean**2)).sum(0) / total - pooled**2
        entry = {
            "min": np.min([r[f"stats/{name}/min"] for r in rows], axis=0),
            "max": np.max([r[f"stats/{name}/max"] for r in rows], axis=0),
            "mean": pooled,
            "std": np.sqrt(np.maximum(var, 0.0)),
        }
        shape = (3, 1, 1) if feature["dtype"] == "video" else (-1,)
        stats[name] = {k: v.reshape(shape).tolist() for k, v in entry.items()}
        stats[name]["count"] = [int(total)]
    return stats


def encode_video(path: Path, frames: np.ndarray, fps: float) -> None:
    """(T, H, W, 3) uint8 as lossless H.264 in RGB (CRF 0), frame i at i / fps seconds."""
    import av

    rate = Fraction(fps).limit_denominator(1000)
    with av.open(str(path), mode="w", format="mp4") as container:
        stream = container.add_stream(VIDEO_CODEC, rate=rate)
        stream.width, stream.height = int(frames.shape[2]), int(frames.shape[1])
        stream.pix_fmt = VIDEO_PIX_FMT
        stream.options = {"crf": "0", "preset": "veryfast"}
        stream.time_base = 1 / rate
        for i, image in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
            frame.pts = i
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def _atomic(path: Path, write) -> None:
    """Write to a temporary file beside `path`, then rename: a kill never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    write(tmp)
    os.replace(tmp, path)


def _remove_dataset(root: Path) -> None:
    """Only what a LeRobot dataset holds, so `overwrite` never deletes someone's other files."""
    import shutil

    for part in ("meta", "data", "videos"):
        if (root / part).is_dir():
            shutil.rmtree(root / part)

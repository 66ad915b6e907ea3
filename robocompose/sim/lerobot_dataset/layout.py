"""The v3.0 layout's names and paths, how our obs keys map to LeRobot features, and the parquet
and file helpers the reader and the writer share."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from robocompose.sim.episode import DatasetError

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


def episode_file(index: int) -> dict[str, int]:
    return {"chunk_index": index // CHUNKS_SIZE, "file_index": index % CHUNKS_SIZE}


def vector_feature(size: int) -> dict[str, Any]:
    return {"dtype": "float32", "shape": [size], "names": None}


def signature(features: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple]:
    return {k: (f["dtype"], tuple(f["shape"])) for k, f in features.items()}


def list_array(values: np.ndarray) -> pa.Array:
    """(T, D) float32 as a fixed-size list column, as LeRobot's `datasets` features store it."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), values.shape[1])


def column_array(column: pa.ChunkedArray, name: str) -> np.ndarray:
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


def pandas_index_metadata() -> bytes:
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


def atomic_write(path: Path, write: Callable[[Path], Any]) -> None:
    """Write to a temporary file beside `path`, then rename: a kill never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    write(tmp)
    os.replace(tmp, path)

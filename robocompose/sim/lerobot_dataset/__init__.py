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

Modules: `layout` (names, paths, the key mapping, parquet helpers), `reader` (`LeRobotFolder`,
`load_lerobot_demos`), `writer` (`LeRobotWriter`), `video` (mp4 in and out), `stats` (feature
statistics).
"""

from robocompose.sim.lerobot_dataset.layout import (
    feature_names,
    is_lerobot_folder,
    obs_key_of_feature,
)
from robocompose.sim.lerobot_dataset.reader import LeRobotFolder, load_lerobot_demos
from robocompose.sim.lerobot_dataset.video import decode_video, encode_video
from robocompose.sim.lerobot_dataset.writer import LeRobotWriter

__all__ = [
    "LeRobotFolder",
    "LeRobotWriter",
    "decode_video",
    "encode_video",
    "feature_names",
    "is_lerobot_folder",
    "load_lerobot_demos",
    "obs_key_of_feature",
]

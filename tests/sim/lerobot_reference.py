"""LeRobot's own dataset code (the `lerobot-dataset` package, module `ledataset`), run in its
environment (`.venv-lerobot`, built by `make setup-all`) by tests/sim/test_lerobot_dataset.py:

    python lerobot_reference.py read DATASET_DIR OUT.npz   # each frame as LeRobotDataset gives it
    python lerobot_reference.py write DATASET_DIR OUT.npz  # a dataset LeRobotDataset.create made

`read` stores per feature the stacked frames (videos as (N, H, W, 3) uint8, from LeRobot's
float CHW in [0, 1]) and each frame's task string. `write` makes two episodes of state, action
and a 24x32 camera with two task strings, and stores what it added, for our reader to match.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def read(root: str, out: str) -> None:
    from ledataset.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset("local/test", root=root, video_backend="pyav")
    frames: dict[str, list] = {}
    for i in range(len(dataset)):
        item = dataset[i]
        for key, value in item.items():
            if key in dataset.meta.video_keys:
                value = (value.permute(1, 2, 0).numpy() * 255.0).round().astype(np.uint8)
            elif hasattr(value, "numpy"):
                value = value.numpy()
            frames.setdefault(key, []).append(value)
    np.savez(out, **{k.replace("/", "|"): np.stack(v) for k, v in frames.items()})


def write(root: str, out: str) -> None:
    from ledataset.datasets.lerobot_dataset import LeRobotDataset

    features = {
        "observation.state": {"dtype": "float32", "shape": (3,), "names": None},
        "observation.images.top": {
            "dtype": "video",
            "shape": (24, 32, 3),
            "names": ["height", "width", "channels"],
        },
        "action": {"dtype": "float32", "shape": (2,), "names": None},
    }
    dataset = LeRobotDataset.create(
        "local/test", fps=10, features=features, root=root, use_videos=True
    )
    rng = np.random.default_rng(0)
    added: dict[str, list] = {"state": [], "image": [], "action": [], "episode": []}
    for episode, (length, task) in enumerate([(7, "push the T"), (5, "pick the cube")]):
        for _ in range(length):
            frame = {
                "observation.state": rng.normal(size=3).astype(np.float32),
                # smooth images: a lossy codec keeps them within a few levels
                "observation.images.top": np.full((24, 32, 3), rng.integers(40, 200), np.uint8),
                "action": rng.normal(size=2).astype(np.float32),
                "task": task,
            }
            dataset.add_frame(frame)
            added["state"].append(frame["observation.state"])
            added["image"].append(frame["observation.images.top"])
            added["action"].append(frame["action"])
            added["episode"].append(episode)
        dataset.save_episode()
    dataset.finalize()
    np.savez(out, **{k: np.stack(v) for k, v in added.items()})


if __name__ == "__main__":
    command, root, out = sys.argv[1:4]
    {"read": read, "write": write}[command](str(Path(root)), out)

"""Feature statistics as LeRobot keeps them: per episode in the episodes table
(`stats/<feature>/<stat>`), pooled over the episodes in meta/stats.json."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from robocompose.sim.lerobot_dataset.layout import ACTION, REWARD


def episode_stats(
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


def aggregate_stats(
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

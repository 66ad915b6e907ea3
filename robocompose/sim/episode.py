"""One demonstration in memory (`Episode`) and what every demo writer and reader shares
(robocompose.sim.hdf5_dataset, robocompose.sim.lerobot_dataset): the same step count in every
array, finite numbers, skill labels stored as indices into one vocabulary, the env type both
record. Both formats import from here, never from each other (load_demos reaches a LeRobot folder
through a function-level import, one way)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# robomimic's EnvType uses 1 = robosuite, 2 = old `gym` (its EnvGym calls gym.make), 3 = iGibson
# MoMaRT (0.3.0 and 0.5.0 alike). Our envs are gymnasium ids, which EnvGym cannot build, so we take
# the unused value 4: robomimic fails loudly on it instead of building the wrong thing.
ENV_TYPE_GYMNASIUM = 4
# hdf5: robomimic's layout (hdf5_dataset.py); lerobot: a LeRobot v3.0 folder (lerobot_dataset/)
FORMATS = ("hdf5", "lerobot")


class DatasetError(ValueError):
    """A demonstration file or episode that cannot be read or written as asked."""


class NonFiniteError(DatasetError):
    """A demonstration holding NaN or inf where training needs numbers."""


@dataclass
class Episode:
    """One demonstration: `obs[key]` (T, ...), `actions` (T, A), `rewards` (T,)."""

    obs: dict[str, np.ndarray]
    actions: np.ndarray
    rewards: np.ndarray
    name: str = ""
    skills: np.ndarray | None = None  # (T,) int64 indices into the file's skill vocabulary

    def __len__(self) -> int:
        return len(self.actions)


def check_episode(
    obs: Mapping[str, np.ndarray], actions: np.ndarray, rewards: np.ndarray, where: str
) -> None:
    """Every array must have the same number of steps T >= 1; errors name the key and both T."""
    if actions.ndim != 2:
        raise DatasetError(f"`actions` must have shape (T, A). Got {actions.shape} ({where}).")
    steps = len(actions)
    if steps == 0:
        raise DatasetError(f"`actions` must have at least one step. Got 0 ({where}).")
    if rewards.ndim != 1:
        raise DatasetError(f"`rewards` must have shape (T,). Got {rewards.shape} ({where}).")
    if not obs:
        raise DatasetError(f"`obs` must have at least one key. Got none ({where}).")
    lengths = {"rewards": len(rewards)} | {f"obs/{k}": len(v) for k, v in obs.items()}
    for key, length in lengths.items():
        if length != steps:
            raise DatasetError(
                f"`{key}` must have as many steps as `actions`. Got {length} != {steps} ({where})."
            )


def nonfinite(arrays: Mapping[str, np.ndarray]) -> str | None:
    """What is not finite in the float `arrays` ({key: array}): the first such key, its first
    bad index and value, and how many it holds; None when every value is finite."""
    for key, value in arrays.items():
        if value.dtype.kind not in "fc":
            continue
        bad = ~np.isfinite(value)
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            at = index[0] if len(index) == 1 else index
            return f"`{key}` holds {value[index]} at index {at} ({int(bad.sum())} non-finite)"
    return None


def check_finite(arrays: Mapping[str, np.ndarray], where: str) -> None:
    """Refuse NaN or inf in float `arrays`, naming key, index and `where` (e.g. the demo and
    file). Any reader calls it on what it read: one NaN in one action makes the normalisers,
    then every weight trained from them, NaN."""
    problem = nonfinite(arrays)
    if problem:
        raise NonFiniteError(f"{problem} ({where}); every value must be finite.")


def read_back_nonfinite(
    obs: Mapping[str, np.ndarray], actions: np.ndarray, where: str, *, skip: bool, item: str
) -> str | None:
    """What is not finite in a demo a reader just read (None: every value is). Refused with
    `NonFiniteError` unless `skip`: then the reader leaves the `item` out and reports the
    returned problem (training's `skip_nonfinite_demos`)."""
    problem = nonfinite({"actions": actions} | {f"obs/{k}": v for k, v in obs.items()})
    if problem and not skip:
        raise NonFiniteError(
            f"{problem} ({where}); every value must be finite. Fix or delete that {item}, "
            f"or leave such {item}s out (training: skip_nonfinite_demos=true)."
        )
    return problem


def skill_indices(
    vocabulary: list[dict[str, Any]], labels: Sequence[Mapping[str, Any]]
) -> np.ndarray:
    """(T,) int64 indices of `labels` in `vocabulary`, which grows (in place) by the labels it
    lacks: a file stores each step's skill as an index into its one list of labels."""
    known = {json.dumps(v, sort_keys=True): i for i, v in enumerate(vocabulary)}
    indices = []
    for label in labels:
        key = json.dumps(dict(label), sort_keys=True)
        if key not in known:
            known[key] = len(vocabulary)
            vocabulary.append(dict(label))
        indices.append(known[key])
    return np.asarray(indices, dtype=np.int64)

"""Demonstrations on disk in robomimic's hdf5 layout: `DemoWriter` writes them as they come,
`load_demos` reads them back (and LeRobot dataset folders, through robocompose.sim.lerobot_dataset).

Layout (robomimic, `docs/datasets/overview.md`)::

    data                     attrs: total (sum of num_samples), env_args (JSON)
    data/demo_{i}            attrs: num_samples = T
    data/demo_{i}/obs/<key>  (T, ...) float32, or uint8 images gzip-compressed one chunk per frame
    data/demo_{i}/actions    (T, A) float32
    data/demo_{i}/rewards    (T,) float32
    data/demo_{i}/dones      (T,) int64, 1 at the last step
    data/demo_{i}/skills     (T,) int64, optional: each step's skill, an index into the JSON list
                             `data` attrs `skill_vocabulary` ({"name", "args", "language"} each)
    mask/train, mask/valid   demo names as byte strings (b"demo_0")

Training windows and statistics over the episodes read are in robocompose.sim.windows. No torch
here: sim/ is the lowest layer; the torch Dataset wrapper lives in policies/.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

import h5py
import numpy as np

from robocompose.interrupt import interrupt_deferred
from robocompose.sim.episode import (
    ENV_TYPE_GYMNASIUM,
    DatasetError,
    Episode,
    check_episode,
    check_finite,
    read_back_nonfinite,
    skill_indices,
)

_DEMO_NAME = re.compile(r"demo_(\d+)")


class DemoWriter:
    """Write episodes as they come, so an interrupted collection keeps every finished demo.

    `total` and the train/valid masks are rewritten after each episode and the file flushed, so
    the file on disk is complete between episodes, not only after `close` (HDF5 is not journaled:
    a hard kill in the middle of a write can still corrupt it).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        env_name: str,
        env_kwargs: Mapping[str, Any] | None = None,
        *,
        valid_fraction: float = 0.1,
        seed: int = 0,
        overwrite: bool = False,
        append: bool = False,
    ) -> None:
        if not 0.0 <= valid_fraction < 1.0:
            raise ValueError(f"`valid_fraction` must be in [0, 1). Got {valid_fraction}.")
        env_args = {
            "env_name": env_name,
            "type": ENV_TYPE_GYMNASIUM,
            "env_kwargs": env_kwargs or {},
        }
        try:
            env_args_json = json.dumps(env_args, indent=4)
        except TypeError as e:
            raise ValueError(f"`env_kwargs` must be JSON-serialisable. Got {env_kwargs!r}.") from e
        self.path = os.fspath(path)
        self.valid_fraction = valid_fraction
        self.seed = seed
        if overwrite and append:
            raise ValueError("`overwrite` and `append` exclude each other.")
        self._lengths: list[int] = []
        self._signature: dict[str, tuple[tuple[int, ...], bool]] | None = None
        self.demo_attrs: list[dict[str, Any]] = []
        if append and os.path.exists(self.path):
            self._file = _open_for_append(self.path, json.loads(env_args_json))
            self._data = self._file["data"]
            for name in _demo_names(self._file, None, allow_empty=True):
                demo = self._data[name]
                self._lengths.append(int(demo.attrs["num_samples"]))
                self.demo_attrs.append(dict(demo.attrs))
                self._signature = _signature(demo)
        else:
            self._file = h5py.File(self.path, "w" if overwrite or append else "x")
            self._data = self._file.create_group("data")
            self._data.attrs["env_args"] = env_args_json
        self._update_metadata()

    def add_episode(
        self,
        obs: Mapping[str, np.ndarray],
        actions: np.ndarray,
        rewards: np.ndarray,
        attrs: Mapping[str, Any] | None = None,
        skills: Sequence[Mapping[str, Any]] | None = None,
    ) -> str:
        """Validate then write one episode as `demo_{i}` (with extra `attrs`, e.g. its seed).

        `skills`: one JSON-able label per step ({"name", "args", "language"}), stored as int
        indices into the file's `skill_vocabulary` (labels not in it yet are appended)."""
        if not self._file:
            raise RuntimeError(f"DemoWriter for {self.path} is closed.")
        name = f"demo_{len(self._lengths)}"
        obs = {k: np.asarray(v) for k, v in obs.items()}
        actions = np.asarray(actions, dtype=np.float32)
        rewards = np.asarray(rewards, dtype=np.float32)
        check_episode(obs, actions, rewards, where=f"episode {name} for {self.path}")
        arrays = {"actions": actions} | {f"obs/{k}": v for k, v in obs.items()}
        if skills is not None:
            if len(skills) != len(actions):
                raise DatasetError(
                    f"`skills` must have one label per step. Got {len(skills)} != "
                    f"{len(actions)} (episode {name} for {self.path})."
                )
            arrays["skills"] = self._skill_indices(skills)
        signature = {k: (v.shape[1:], v.dtype == np.uint8) for k, v in arrays.items()}
        if self._signature is not None and signature != self._signature:
            first = self._signature
            key = sorted(k for k in signature.keys() | first if signature.get(k) != first.get(k))[0]
            raise DatasetError(
                f"`{key}` must match demo_0's (per-frame shape, is_uint8) = {first.get(key)}. "
                f"Got {signature.get(key)} (episode {name} for {self.path})."
            )
        if any("/" in k for k in obs):
            raise DatasetError(f"obs keys must not contain '/'. Got {sorted(obs)}.")
        check_finite(arrays, where=f"episode {name} for {self.path}")
        with interrupt_deferred():  # Ctrl-C waits: a demo is written and counted whole
            group = self._data.create_group(name)
            try:
                for key, value in obs.items():
                    if value.dtype == np.uint8:
                        chunks = (1, *value.shape[1:]) if value.ndim > 1 else None
                        group.create_dataset(
                            f"obs/{key}", data=value, chunks=chunks, compression="gzip"
                        )
                    else:
                        group.create_dataset(f"obs/{key}", data=value.astype(np.float32))
                group.create_dataset("actions", data=actions)
                if skills is not None:
                    group.create_dataset("skills", data=arrays["skills"])
                group.create_dataset("rewards", data=rewards)
                dones = np.zeros(len(actions), dtype=np.int64)
                dones[-1] = 1
                group.create_dataset("dones", data=dones)
                group.attrs["num_samples"] = len(actions)
                group.attrs.update(dict(attrs or {}))
            except BaseException:
                del self._data[name]  # never leave a half-written demo behind
                raise
            self._signature = signature
            self._lengths.append(len(actions))
            self.demo_attrs.append(dict(group.attrs))
            self._update_metadata()
        return name

    def _skill_indices(self, labels: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """(T,) int64 indices of `labels` in the file's vocabulary, which grows as needed."""
        vocabulary = json.loads(self._data.attrs.get("skill_vocabulary", "[]"))
        indices = skill_indices(vocabulary, labels)
        self._data.attrs["skill_vocabulary"] = json.dumps(vocabulary)
        return indices

    def _update_metadata(self) -> None:
        """`total` and a seeded train/valid split; floor(fraction * n) valid, as robomimic does."""
        self._data.attrs["total"] = int(sum(self._lengths))
        n = len(self._lengths)
        order = np.random.default_rng(self.seed).permutation(n)
        n_valid = int(self.valid_fraction * n)
        splits = {"valid": sorted(order[:n_valid]), "train": sorted(order[n_valid:])}
        mask = self._file.require_group("mask")
        for split, indices in splits.items():
            if split in mask:
                del mask[split]
            mask.create_dataset(split, data=np.array([f"demo_{i}" for i in indices], dtype="S"))
        self._file.flush()

    def close(self) -> None:
        if self._file:
            self._file.close()

    def __enter__(self) -> DemoWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _signature(demo: h5py.Group) -> dict[str, tuple[tuple[int, ...], bool]]:
    arrays = {"actions": demo["actions"]} | {f"obs/{k}": v for k, v in demo["obs"].items()}
    if "skills" in demo:
        arrays["skills"] = demo["skills"]
    return {k: (v.shape[1:], v.dtype == np.uint8) for k, v in arrays.items()}


def _open_for_append(path: str, env_args: dict[str, Any]) -> h5py.File:
    """Reopen a file to add demos; it must hold demos of the same env and kwargs."""
    f = _open(path)
    f.close()
    f = h5py.File(path, "a")
    if "data" not in f:
        f.close()
        raise DatasetError(f"{path}: missing `data` group; cannot append to it.")
    stored = json.loads(f["data"].attrs.get("env_args", "{}"))
    for key in ("env_name", "env_kwargs"):
        if stored.get(key) != env_args[key]:
            f.close()
            raise DatasetError(
                f"{path}: `env_args.{key}` is {stored.get(key)!r}, cannot append demos of "
                f"{env_args[key]!r}. Write to a new file."
            )
    for name in _demo_names(f, None, allow_empty=True):
        problems = _demo_problems(f["data"][name])
        if problems:
            f.close()
            raise DatasetError(
                f"{path}: cannot append: `data/{name}` {'; '.join(problems)}, so this is not a "
                "demo file written by `robocompose collect`. Write to a new file."
            )
    return f


def _demo_problems(demo: h5py.Group) -> list[str]:
    """What a demo lacks of the parts `DemoWriter` reads back when it appends."""
    problems = [f"has no `{k}`" for k in ("actions", "obs") if k not in demo]
    if "obs" in demo and not isinstance(demo["obs"], h5py.Group):
        problems.append("has `obs` that is not a group of per-key datasets")
    if "num_samples" not in demo.attrs:
        problems.append("has no `num_samples` attribute")
    return problems


def _open(path: str | os.PathLike[str]) -> h5py.File:
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise DatasetError(f"{path}: no such file.")
    if not h5py.is_hdf5(path):
        raise DatasetError(f"{path}: not an hdf5 file.")
    return h5py.File(path, "r")


def read_env_args(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The `data.attrs["env_args"]` dict: {"env_name", "type", "env_kwargs"}. An external
    task's file makes its task known (`robocompose.sim.tasks.register_recorded`)."""
    from robocompose.sim.tasks import register_recorded

    if os.path.isdir(path):  # a LeRobot dataset folder
        from robocompose.sim.lerobot_dataset import LeRobotFolder

        env_args = LeRobotFolder(path).env_args()
        register_recorded(env_args.get("env_name"), env_args.get("env_kwargs"))
        return env_args
    with _open(path) as f:
        if "data" not in f or "env_args" not in f["data"].attrs:
            raise DatasetError(f"{f.filename}: no `data` group with an `env_args` attribute.")
        env_args = json.loads(f["data"].attrs["env_args"])
    register_recorded(env_args.get("env_name"), env_args.get("env_kwargs"))
    return env_args


def _demo_names(f: h5py.File, filter_key: str | None, *, allow_empty: bool = False) -> list[str]:
    """Demo names in numeric order (demo_2 < demo_10), optionally those in `mask/<filter_key>`.

    `allow_empty` for appending: a collection killed before its first demo leaves none.
    """
    if "data" not in f:
        raise DatasetError(f"{f.filename}: no `data` group. Top-level keys: {sorted(f.keys())}.")
    names = [k for k in f["data"] if _DEMO_NAME.fullmatch(k)]
    if not names and not allow_empty:
        raise DatasetError(f"{f.filename}: `data` has no demo_<i> groups.")
    if filter_key is not None:
        masks = sorted(f["mask"].keys()) if "mask" in f else []
        if filter_key not in masks:
            raise DatasetError(
                f"{f.filename}: unknown filter key `{filter_key}`. Masks in the file: {masks}."
            )
        wanted = [b.decode("utf-8") for b in f["mask"][filter_key][()]]
        missing = sorted(set(wanted) - set(names))
        if missing:
            raise DatasetError(f"{f.filename}: `mask/{filter_key}` names missing demos {missing}.")
        names = wanted
    return sorted(names, key=lambda k: int(k[len("demo_") :]))


def load_demos(
    path: str | os.PathLike[str],
    obs_keys: Sequence[str] | None = None,
    *,
    filter_key: str | None = None,
    skip_nonfinite: bool = False,
) -> list[Episode]:
    """Read episodes from our files or robomimic's (`next_obs`, `states` etc. are ignored), or
    from a LeRobot dataset folder (`robocompose.sim.lerobot_dataset`).

    Float arrays come back as float32, uint8 images as uint8. `obs_keys=None` takes the first
    demo's keys. Missing `rewards` read as zeros, as robomimic's SequenceDataset does.
    NaN or inf in the actions or a read obs key is refused (`check_finite`); `skip_nonfinite`
    leaves such demos out instead, with a warning naming them.
    """
    if os.path.isdir(path):  # a LeRobot dataset folder
        from robocompose.sim.lerobot_dataset import load_lerobot_demos

        if filter_key is not None:
            raise DatasetError(f"{path}: a LeRobot dataset has no `{filter_key}` mask.")
        return load_lerobot_demos(path, obs_keys, skip_nonfinite=skip_nonfinite)
    if isinstance(obs_keys, str):
        raise TypeError(f"`obs_keys` must be a sequence of keys. Got the string {obs_keys!r}.")
    keys = list(obs_keys) if obs_keys is not None else None
    episodes, skipped = [], []
    with _open(path) as f:
        for name in _demo_names(f, filter_key):
            demo = f["data"][name]
            where = f"{name} in {f.filename}"
            for required in ("actions", "obs"):
                if required not in demo:
                    raise DatasetError(f"`data/{name}/{required}` is missing ({where}).")
            if not isinstance(demo["obs"], h5py.Group):
                raise DatasetError(
                    f"`data/{name}/obs` must be a group of per-key datasets ({where})."
                )
            if keys is None:
                keys = sorted(demo["obs"].keys())
            available = sorted(demo["obs"].keys())
            missing = [k for k in keys if k not in available]
            if missing:
                raise DatasetError(
                    f"obs key(s) {missing} not found ({where}). Available obs keys: {available}."
                )
            obs = {k: _as_stored(demo["obs"][k][()]) for k in keys}
            actions = demo["actions"][()].astype(np.float32)
            if "rewards" in demo:
                rewards = demo["rewards"][()].astype(np.float32)
            else:
                rewards = np.zeros(len(actions), dtype=np.float32)
            check_episode(obs, actions, rewards, where)
            problem = read_back_nonfinite(obs, actions, where, skip=skip_nonfinite, item="demo")
            if problem:
                skipped.append(f"{name}: {problem}")
                continue
            skills = demo["skills"][()].astype(np.int64) if "skills" in demo else None
            if skills is not None and skills.shape != (len(actions),):
                raise DatasetError(
                    f"`skills` must have shape ({len(actions)},). Got {skills.shape} ({where})."
                )
            num_samples = demo.attrs.get("num_samples", len(actions))
            if num_samples != len(actions):
                raise DatasetError(
                    f"`num_samples` must equal the number of actions. "
                    f"Got {num_samples} != {len(actions)} ({where})."
                )
            episodes.append(Episode(obs, actions, rewards, name, skills))
    if skipped:
        warnings.warn(
            f"{path}: left out {len(skipped)} demo(s) holding NaN or inf: {'; '.join(skipped)}",
            stacklevel=2,
        )
    return episodes


def read_skill_vocabulary(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The skill labels a file's `skills` datasets index into ([] when it has none); a
    LeRobot dataset folder's are its task strings (or the labels robocompose wrote)."""
    if os.path.isdir(path):
        from robocompose.sim.lerobot_dataset import LeRobotFolder

        return LeRobotFolder(path).skill_vocabulary()
    with _open(path) as f:
        return json.loads(f["data"].attrs.get("skill_vocabulary", "[]"))


def _as_stored(value: np.ndarray) -> np.ndarray:
    return value if value.dtype == np.uint8 else value.astype(np.float32)

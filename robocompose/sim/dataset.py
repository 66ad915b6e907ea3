"""Demonstrations on disk in robomimic's hdf5 layout, and diffusion_policy-style training windows.

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

No torch here: sim/ is the lowest layer; the torch Dataset wrapper lives in policies/.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import h5py
import numpy as np

from robocompose.interrupt import interrupt_deferred

# robomimic's EnvType uses 1 = robosuite, 2 = old `gym` (its EnvGym calls gym.make), 3 = iGibson
# MoMaRT (0.3.0 and 0.5.0 alike). Our envs are gymnasium ids, which EnvGym cannot build, so we take
# the unused value 4: robomimic fails loudly on it instead of building the wrong thing.
ENV_TYPE_GYMNASIUM = 4

_DEMO_NAME = re.compile(r"demo_(\d+)")


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


def _check_episode(
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
        _check_episode(obs, actions, rewards, where=f"episode {name} for {self.path}")
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
        known = {json.dumps(v, sort_keys=True): i for i, v in enumerate(vocabulary)}
        indices = []
        for label in labels:
            key = json.dumps(dict(label), sort_keys=True)
            if key not in known:
                known[key] = len(vocabulary)
                vocabulary.append(dict(label))
            indices.append(known[key])
        self._data.attrs["skill_vocabulary"] = json.dumps(vocabulary)
        return np.asarray(indices, dtype=np.int64)

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
            _check_episode(obs, actions, rewards, where)
            problem = nonfinite({"actions": actions} | {f"obs/{k}": v for k, v in obs.items()})
            if problem and not skip_nonfinite:
                raise NonFiniteError(
                    f"{problem} ({where}); every value must be finite. Fix or delete that demo, "
                    "or leave such demos out (training: skip_nonfinite_demos=true)."
                )
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


Conditioning = Callable[[Mapping[str, Any]], Mapping[str, np.ndarray]]


def skill_segments(
    episodes: Sequence[Episode],
    vocabulary: Sequence[Mapping[str, Any]],
    conditioning: Conditioning | None = None,
) -> list[Episode]:
    """Each episode cut into its runs of one skill, so `SequenceWindows` over the result cuts
    only windows inside one skill segment (the ends repeat the segment's first/last frame).

    `conditioning(label)` gives per-skill obs arrays (e.g. its language tokens) that every step of
    the segment gets as extra obs keys."""
    segments = []
    for episode in episodes:
        if episode.skills is None:
            raise DatasetError(f"episode {episode.name or '?'} has no `skills` labels.")
        cuts = np.flatnonzero(np.diff(episode.skills)) + 1
        for start, stop in zip([0, *cuts], [*cuts, len(episode)], strict=True):
            index = int(episode.skills[start])
            if not 0 <= index < len(vocabulary):
                raise DatasetError(
                    f"episode {episode.name or '?'}: skill index {index} outside the "
                    f"vocabulary of {len(vocabulary)} labels."
                )
            extra = dict(conditioning(vocabulary[index])) if conditioning else {}
            obs = {k: v[start:stop] for k, v in episode.obs.items()}
            obs |= {k: np.repeat(np.asarray(v)[None], stop - start, 0) for k, v in extra.items()}
            segments.append(
                Episode(
                    obs,
                    episode.actions[start:stop],
                    episode.rewards[start:stop],
                    f"{episode.name}[{start}:{stop}]",
                    episode.skills[start:stop],
                )
            )
    return segments


def _as_stored(value: np.ndarray) -> np.ndarray:
    return value if value.dtype == np.uint8 else value.astype(np.float32)


class SequenceWindows:
    """Training windows as diffusion_policy's `SequenceSampler` (pad_before = n_obs_steps - 1,
    pad_after = n_action_steps - 1) cuts them.

    A window is `horizon` frames starting at `start` in
    [-(n_obs_steps - 1), T - horizon + n_action_steps - 1]; frame indices outside [0, T - 1] are
    clamped, i.e. the first/last frame repeats. `obs` is the window's first `n_obs_steps` frames,
    `actions` the whole window. An episode shorter than horizon - n_obs_steps - n_action_steps + 2
    yields no window, as in diffusion_policy.
    """

    def __init__(
        self,
        episodes: Sequence[Episode],
        obs_keys: Sequence[str],
        n_obs_steps: int,
        horizon: int,
        n_action_steps: int,
    ) -> None:
        if n_obs_steps < 1:
            raise ValueError(f"`n_obs_steps` must be >= 1. Got {n_obs_steps}.")
        if n_action_steps < 1:
            raise ValueError(f"`n_action_steps` must be >= 1. Got {n_action_steps}.")
        # The policy executes action_pred[:, n_obs_steps - 1 : n_obs_steps - 1 + n_action_steps]
        # (diffusion_policy's predict_action), so that slice must fit in the horizon.
        if horizon < n_obs_steps + n_action_steps - 1:
            raise ValueError(
                "`horizon` must be >= n_obs_steps + n_action_steps - 1. "
                f"Got {horizon} < {n_obs_steps + n_action_steps - 1}."
            )
        for episode in episodes:
            missing = [k for k in obs_keys if k not in episode.obs]
            if missing:
                raise DatasetError(
                    f"obs key(s) {missing} not in episode {episode.name or '?'}. "
                    f"Available obs keys: {sorted(episode.obs)}."
                )
        self.episodes = list(episodes)
        self.obs_keys = list(obs_keys)
        self.n_obs_steps = n_obs_steps
        self.horizon = horizon
        self.n_action_steps = n_action_steps
        self._windows = [
            (e, start)
            for e, episode in enumerate(self.episodes)
            for start in range(-(n_obs_steps - 1), len(episode) - horizon + n_action_steps)
        ]
        if not self._windows:
            raise ValueError(
                f"No episode is long enough for one window: each needs T >= "
                f"{horizon - n_obs_steps - n_action_steps + 2} (horizon={horizon}, "
                f"n_obs_steps={n_obs_steps}, n_action_steps={n_action_steps})."
            )

        self._frames: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self._windows)

    def batch(self, indices: np.ndarray) -> dict[str, Any]:
        """Windows `indices` gathered at once: {"obs": {key: (B, n_obs_steps, ...)},
        "actions": (B, horizon, A)}; the fast path for training on a whole in-memory dataset."""
        if self._frames is None:
            offsets = np.cumsum([0] + [len(e) for e in self.episodes])
            self._frames = np.stack(
                [
                    offsets[e] + np.clip(np.arange(start, start + self.horizon), 0, len(ep) - 1)
                    for e, start in self._windows
                    for ep in (self.episodes[e],)
                ]
            )
            self._obs = {
                k: np.concatenate([e.obs[k] for e in self.episodes]) for k in self.obs_keys
            }
            self._actions = np.concatenate([e.actions for e in self.episodes])
        frames = self._frames[np.asarray(indices)]
        obs_frames = frames[:, : self.n_obs_steps]
        return {
            "obs": {k: v[obs_frames] for k, v in self._obs.items()},
            "actions": self._actions[frames],
        }

    def __getitem__(self, i: int) -> dict[str, Any]:
        """{"obs": {key: (n_obs_steps, ...)}, "actions": (horizon, A)}, fresh writable copies."""
        if not -len(self) <= i < len(self):
            raise IndexError(f"window index {i} out of range for {len(self)} windows.")
        e, start = self._windows[i]
        episode = self.episodes[e]
        frames = np.clip(np.arange(start, start + self.horizon), 0, len(episode) - 1)
        obs_frames = frames[: self.n_obs_steps]
        return {
            "obs": {k: episode.obs[k][obs_frames] for k in self.obs_keys},
            "actions": episode.actions[frames],
        }


@dataclass(frozen=True)
class Stats:
    """Per-dimension statistics over all frames, each of the per-frame shape; std is population
    std and is 0 for constant dimensions (the normaliser decides how to guard that)."""

    min: np.ndarray
    max: np.ndarray
    mean: np.ndarray
    std: np.ndarray


def _stats(arrays: Iterable[np.ndarray]) -> Stats:
    """Stream over episodes merging (n, mean, M2) with Chan et al.'s parallel update, so image
    datasets never need all frames in float64 at once."""
    n, mean, m2, low, high = 0, 0.0, 0.0, None, None
    for array in arrays:
        x = np.asarray(array, dtype=np.float64)
        n_b, mean_b = len(x), x.mean(axis=0)
        m2_b = ((x - mean_b) ** 2).sum(axis=0)
        delta = mean_b - mean
        total = n + n_b
        mean = mean + delta * n_b / total
        m2 = m2 + m2_b + delta**2 * n * n_b / total
        n = total
        low = x.min(axis=0) if low is None else np.minimum(low, x.min(axis=0))
        high = x.max(axis=0) if high is None else np.maximum(high, x.max(axis=0))
    if n == 0:
        raise ValueError("`episodes` must not be empty.")
    f32 = np.float32
    return Stats(low.astype(f32), high.astype(f32), mean.astype(f32), np.sqrt(m2 / n).astype(f32))


def action_stats(episodes: Sequence[Episode]) -> Stats:
    """Per action dimension min/max/mean/std over every frame of every episode."""
    return _stats(episode.actions for episode in episodes)


def obs_stats(
    episodes: Sequence[Episode], obs_keys: Sequence[str] | None = None
) -> dict[str, Stats]:
    """Per obs key, per dimension min/max/mean/std over every frame; `None` = the first's keys."""
    if not episodes:
        raise ValueError("`episodes` must not be empty.")
    keys = list(obs_keys) if obs_keys is not None else sorted(episodes[0].obs)
    return {k: _stats(episode.obs[k] for episode in episodes) for k in keys}

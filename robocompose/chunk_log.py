"""Chunk logs: every action chunk an episode executed, with the observation it was predicted
from, where it came from and how the episode ended. An evaluation writes them on request
(`evaluate(..., chunk_log=FOLDER)`); they are a learned chunk verifier's training data
(`robocompose.composition.verifier_training`), at no simulator cost beyond the episodes run.

One file per episode, `FOLDER/seed_<seed>.npz`, written when the episode ends to a temporary
file and renamed: a file is complete or absent (an interrupted episode leaves none, and its
rerun writes it). Its arrays, for an episode of N chunks and L steps:

    obs           (N, D) float32  the low-dim observation keys (meta "obs_keys", in order) at
                                  the step the chunk was predicted, flattened and concatenated,
                                  in env units; image keys are not logged
    actions       (N, n, A) float32  the chunk's actions to execute, in env units (the last
                                  chunk whole, though the episode may end inside it)
    step          (N,) int64      the episode step at which its first action ran
    source        (N,) str        the parent that made it (its checkpoint folder's name) or
                                  "composition"; a selector's chosen candidate per chunk
    return_to_go  (N,) float64    the rewards from `step` to the episode's end, summed
    rewards       (L,) float64    the reward of every step
    success       () bool         the episode's outcome, as its record says
    score         () float64
    meta          () str          JSON: seed, task (env id), label, policy_id, batch, obs_keys
                                  and obs_sizes (each key's flat size), parents ([{"name",
                                  "fingerprint"}]), the episode's record
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from robocompose.policies.checkpoint import write_atomic

__all__ = ["ChunkLog", "EpisodeChunks", "episode_files", "load_npz", "read_episode", "save_npz"]

FORMAT = 1
COMPOSITION = "composition"


def _is_image(value: np.ndarray) -> bool:
    """An image observation (H, W, C), as `policies.base.is_image_shape` tells them."""
    return np.ndim(value) == 3


@dataclass
class _Episode:
    obs: list[np.ndarray] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    step: list[int] = field(default_factory=list)
    source: list[str] = field(default_factory=list)


class ChunkLog:
    """The chunk log of one evaluation: one policy on one task, one file per episode.

    The policy runner hands it each planned chunk (`add`), the rollout harness each finished
    episode (`end`), which writes the episode's file. `parents`: (name, fingerprint) of the
    trained policies behind the policy; `source`: what a chunk came from unless the runner says
    ("parent<i>" or "composition")."""

    def __init__(
        self,
        folder: str | os.PathLike[str],
        *,
        task: str,
        label: str,
        policy_id: str,
        batch: str,
        parents: Sequence[tuple[str, str]],
        source: str,
    ) -> None:
        self.folder = Path(folder)
        self.meta = {
            "format": FORMAT,
            "task": task,
            "label": label,
            "policy_id": policy_id,
            "batch": batch,
            "parents": [{"name": n, "fingerprint": f} for n, f in parents],
        }
        self.source = source
        self.obs_keys: list[str] | None = None
        self.obs_sizes: dict[str, int] = {}
        self._open: dict[int, _Episode] = {}

    def path(self, seed: int) -> Path:
        return self.folder / f"seed_{seed}.npz"

    def check(self) -> None:
        """Refuse a folder holding episodes of another task, policy or inference layout: one
        folder is one policy's, as an episodes file is."""
        for path in sorted(self.folder.glob("seed_*.npz")):
            held = read_episode(path).meta
            for key in ("task", "policy_id", "batch"):
                if held.get(key) != self.meta[key]:
                    raise ValueError(
                        f"{path} holds chunks of {key} {held.get(key)!r}, this evaluation's is "
                        f"{self.meta[key]!r}: one chunk log folder holds one policy's episodes. "
                        "Use another folder."
                    )

    def missing(self, seeds: Iterable[int]) -> list[int]:
        """The seeds whose episode has no file here."""
        return [s for s in seeds if not self.path(s).is_file()]

    def add(
        self,
        seed: int,
        step: int,
        frame: Mapping[str, np.ndarray],
        actions: np.ndarray,
        source: str | None = None,
    ) -> None:
        """One chunk of episode `seed` (< 0: a slot replaying for nothing, not logged), planned
        at `step` from the current observation `frame` ({key: array}); `source` "parent<i>",
        "composition" or None (this log's own)."""
        if seed < 0:
            return
        if self.obs_keys is None:
            self.obs_keys = [k for k, v in frame.items() if not _is_image(v)]
            self.obs_sizes = {k: int(np.size(frame[k])) for k in self.obs_keys}
        episode = self._open.setdefault(seed, _Episode())
        flat = [np.asarray(frame[k], dtype=np.float32).ravel() for k in self.obs_keys]
        episode.obs.append(np.concatenate(flat) if flat else np.zeros(0, np.float32))
        episode.actions.append(np.asarray(actions, dtype=np.float32))
        episode.step.append(step)
        episode.source.append(self._name(source or self.source))

    def _name(self, source: str) -> str:
        """A source as logged: "parent<i>" -> parent i's name; anything else as it is."""
        if re.fullmatch(r"parent\d+", source):
            return str(self.meta["parents"][int(source.removeprefix("parent"))]["name"])
        return source

    def end(self, record: dict[str, Any], rewards: np.ndarray) -> None:
        """Episode `record["seed"]` ended with these per-step rewards: write its file whole."""
        seed = int(record["seed"])
        episode = self._open.pop(seed, _Episode())
        rewards = np.asarray(rewards, dtype=np.float64)
        to_go = np.cumsum(rewards[::-1])[::-1]
        steps = np.asarray(episode.step, dtype=np.int64)
        meta = self.meta | {
            "seed": seed,
            "obs_keys": self.obs_keys or [],
            "obs_sizes": self.obs_sizes,
            "record": record,
        }
        arrays = {
            "obs": np.stack(episode.obs) if episode.obs else np.zeros((0, 0), np.float32),
            "actions": np.stack(episode.actions)
            if episode.actions
            else np.zeros((0, 0, 0), np.float32),
            "step": steps,
            "source": np.asarray(episode.source, dtype=str),
            "return_to_go": np.append(to_go, 0.0)[np.minimum(steps, len(rewards))],
            "rewards": rewards,
            "success": np.asarray(bool(record["success"])),
            "score": np.asarray(float(record["score"])),
            "meta": np.asarray(json.dumps(meta)),
        }
        save_npz(self.path(seed), arrays)


def save_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """`arrays` as one compressed .npz at `path`, written to a temporary file and renamed: the
    file is complete or absent, whatever interrupts the write."""
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(tmp: Path) -> None:
        with tmp.open("wb") as f:  # a file object: np.savez would append ".npz" to a name
            np.savez_compressed(f, **arrays)

    write_atomic(path, write)


def load_npz(path: Path, kind: str, version: int) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays and the JSON array `meta` of a `kind` file (say "chunk log episode") that
    `save_npz` wrote; a file that is not one, or holds another format than `version`, names
    itself."""
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
        meta = json.loads(str(arrays.pop("meta")))
    except (OSError, ValueError, KeyError) as e:
        raise ValueError(f"{path} is not a {kind} file ({e}).") from None
    if meta.get("format") != version:
        raise ValueError(f"{path}: {kind} format {meta.get('format')!r}, expected {version}.")
    return arrays, meta


@dataclass(frozen=True)
class EpisodeChunks:
    """One episode's chunk log, as read back."""

    path: Path
    meta: dict[str, Any]
    obs: np.ndarray
    actions: np.ndarray
    step: np.ndarray
    source: np.ndarray
    return_to_go: np.ndarray
    rewards: np.ndarray
    success: bool
    score: float

    @property
    def seed(self) -> int:
        return int(self.meta["seed"])

    @property
    def error(self) -> str | None:
        """Why the episode stopped early (a crash, a NaN), or None."""
        return self.meta["record"].get("error")


def read_episode(path: str | os.PathLike[str]) -> EpisodeChunks:
    """One episode file; a file that is not one names itself."""
    path = Path(path)
    arrays, meta = load_npz(path, "chunk log episode", FORMAT)
    return EpisodeChunks(
        path=path,
        meta=meta,
        obs=arrays["obs"],
        actions=arrays["actions"],
        step=arrays["step"],
        source=arrays["source"],
        return_to_go=arrays["return_to_go"],
        rewards=arrays["rewards"],
        success=bool(arrays["success"]),
        score=float(arrays["score"]),
    )


def episode_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The episode files under `paths`: a file as it is, a folder's `seed_*.npz` at any depth
    (say, one folder per candidate of a search); a path holding none is refused."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        files = [path] if path.is_file() else sorted(path.rglob("seed_*.npz"))
        if not files:
            raise FileNotFoundError(f"no chunk log episode file (seed_*.npz) in {path}.")
        found.extend(files)
    return found

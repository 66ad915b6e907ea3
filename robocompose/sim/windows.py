"""Training windows and statistics over demonstrations in memory, as diffusion_policy's
`SequenceSampler` and normaliser fitting see them: `SequenceWindows` cuts each episode into
(obs history, action horizon) windows, `skill_segments` cuts episodes at skill changes first,
`action_stats` / `obs_stats` stream per-dimension statistics for the normalisers.

Reading and writing the episodes: robocompose.sim.hdf5_dataset (and lerobot_dataset)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from robocompose.sim.episode import DatasetError, Episode

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

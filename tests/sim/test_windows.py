"""Training windows (diffusion_policy's SequenceSampler cuts) and the normaliser statistics."""

from __future__ import annotations

import re

import numpy as np
import pytest

from robocompose.sim.episode import DatasetError, Episode
from robocompose.sim.windows import SequenceWindows, action_stats, obs_stats


def _ramp(steps: int, name: str = "") -> Episode:
    """Every value equals its frame index, so a window's values are its (clamped) indices."""
    t = np.arange(steps, dtype=np.float32)
    return Episode({"x": t[:, None]}, np.stack([t, 10 * t], axis=1), np.zeros(steps), name)


def test_windows_by_hand() -> None:
    # T=5, n_obs_steps=2, horizon=4, n_action_steps=2: start in [-(2-1), 5-4+(2-1)] = [-1, 2].
    windows = SequenceWindows([_ramp(5)], ["x"], n_obs_steps=2, horizon=4, n_action_steps=2)
    expected = [  # frames of each window after clamping to [0, 4]
        [0, 0, 1, 2],  # start -1
        [0, 1, 2, 3],  # start 0
        [1, 2, 3, 4],  # start 1
        [2, 3, 4, 4],  # start 2
    ]
    assert len(windows) == len(expected)
    for i, frames in enumerate(expected):
        item = windows[i]
        np.testing.assert_array_equal(item["actions"][:, 0], frames)
        np.testing.assert_array_equal(item["actions"][:, 1], 10 * np.array(frames))
        np.testing.assert_array_equal(item["obs"]["x"][:, 0], frames[:2])
        assert item["obs"]["x"].shape == (2, 1) and item["actions"].shape == (4, 2)
    with pytest.raises(IndexError):
        windows[4]


def test_batch_gathers_the_same_windows() -> None:
    windows = SequenceWindows([_ramp(5, "a"), _ramp(7, "b")], ["x"], 2, 4, 2)
    indices = np.array([0, 3, len(windows) - 1, 3])
    batch = windows.batch(indices)
    for row, i in enumerate(indices):
        np.testing.assert_array_equal(batch["obs"]["x"][row], windows[i]["obs"]["x"])
        np.testing.assert_array_equal(batch["actions"][row], windows[i]["actions"])


def test_windows_across_episodes_and_short_ones() -> None:
    # Per episode: T - horizon + n_obs_steps + n_action_steps - 1 windows, or none if negative.
    episodes = [_ramp(5, "a"), _ramp(1, "short"), _ramp(3, "b")]
    windows = SequenceWindows(episodes, ["x"], n_obs_steps=2, horizon=4, n_action_steps=2)
    assert len(windows) == 4 + 0 + 2
    np.testing.assert_array_equal(windows[4]["actions"][:, 0], [0, 0, 1, 2])
    np.testing.assert_array_equal(windows[5]["actions"][:, 0], [0, 1, 2, 2])
    windows[5]["actions"][:] = -1  # items are copies
    assert episodes[2].actions.min() == 0


def test_window_arguments_are_validated() -> None:
    episodes = [_ramp(5)]
    msg = "`horizon` must be >= n_obs_steps + n_action_steps - 1. Got 4 < 9."
    with pytest.raises(ValueError, match=re.escape(msg)):
        SequenceWindows(episodes, ["x"], n_obs_steps=2, horizon=4, n_action_steps=8)
    with pytest.raises(ValueError, match="`n_obs_steps` must be >= 1. Got 0."):
        SequenceWindows(episodes, ["x"], n_obs_steps=0, horizon=4, n_action_steps=1)
    with pytest.raises(ValueError, match="`n_action_steps` must be >= 1. Got 0."):
        SequenceWindows(episodes, ["x"], n_obs_steps=1, horizon=4, n_action_steps=0)
    with pytest.raises(DatasetError, match=r"\['y'\] not in episode .* keys: \['x'\]"):
        SequenceWindows(episodes, ["y"], n_obs_steps=1, horizon=4, n_action_steps=1)
    with pytest.raises(ValueError, match="needs T >= 5"):  # 8 - 1 - 4 + 2
        SequenceWindows([_ramp(4)], ["x"], n_obs_steps=1, horizon=8, n_action_steps=4)


def test_stats_match_numpy_over_all_frames() -> None:
    episodes = [_ramp(5), _ramp(2)]
    episodes[1].actions[:] += 100.0  # a second episode far away tests the merge
    stats = action_stats(episodes)
    frames = np.concatenate([e.actions for e in episodes]).astype(np.float64)
    np.testing.assert_allclose(stats.mean, frames.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(stats.std, frames.std(axis=0), rtol=1e-6)
    np.testing.assert_array_equal(stats.min, frames.min(axis=0))
    np.testing.assert_array_equal(stats.max, frames.max(axis=0))
    x = obs_stats(episodes)["x"]
    np.testing.assert_allclose([x.min[0], x.max[0], x.mean[0]], [0.0, 4.0, 11 / 7], rtol=1e-6)
    with pytest.raises(ValueError, match="must not be empty"):
        action_stats([])

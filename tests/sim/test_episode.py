"""What both demo formats share when they read a demo back: non-finite values are refused by name,
or reported for the reader to leave the demo out."""

from __future__ import annotations

import numpy as np
import pytest

from robocompose.sim.episode import NonFiniteError, read_back_nonfinite


def _demo() -> tuple[dict[str, np.ndarray], np.ndarray]:
    obs = {"state": np.zeros((4, 3), np.float32), "image": np.zeros((4, 2, 2, 3), np.uint8)}
    return obs, np.zeros((4, 2), np.float32)


def test_finite_demo_reads_back_as_is():
    obs, actions = _demo()
    assert read_back_nonfinite(obs, actions, "demo_0 in x.hdf5", skip=False, item="demo") is None


def test_nonfinite_demo_is_refused_naming_key_index_and_remedy():
    obs, actions = _demo()
    obs["state"][2, 1] = np.inf
    with pytest.raises(NonFiniteError) as refused:
        read_back_nonfinite(obs, actions, "episode 3 in folder", skip=False, item="episode")
    message = str(refused.value)
    assert "`obs/state` holds inf at index (2, 1)" in message
    assert "(episode 3 in folder)" in message
    assert "leave such episodes out (training: skip_nonfinite_demos=true)" in message


def test_skip_returns_the_problem_for_the_reader_to_leave_the_demo_out():
    obs, actions = _demo()
    actions[1, 0] = np.nan
    problem = read_back_nonfinite(obs, actions, "demo_1", skip=True, item="demo")
    assert problem is not None and problem.startswith("`actions` holds nan at index (1, 0)")

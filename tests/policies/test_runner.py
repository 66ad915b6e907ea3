"""The policy runner's history: a runner that only observed an episode's earlier frames plans
from the same history as one that ran it."""

from __future__ import annotations

import numpy as np
import torch

from robocompose.policies.runner import PolicyRunner


class _Seen:
    """A chunk predictor of two-frame history that keeps the histories it planned from."""

    obs_keys = ("state",)
    n_obs_steps = 2
    noise_shape = (3, 1)
    device = torch.device("cpu")
    dtype = torch.float32

    def __init__(self) -> None:
        self.histories: list[np.ndarray] = []

    def predict_actions(self, obs, noise):
        self.histories.append(obs["state"][0].numpy().copy())
        return noise[:, :3]

    def fingerprint(self) -> str:
        return "seen"


def _frame(t: int) -> dict[str, np.ndarray]:
    return {"state": np.array([float(t)]), "image": np.zeros((2, 2, 3), np.uint8)}


def test_a_runner_that_observed_the_frames_plans_from_the_history_of_one_that_ran_them() -> None:
    ran, took_over = _Seen(), _Seen()
    first = PolicyRunner(ran)
    first.reset(np.ones(1, dtype=bool), seeds=np.array([5]))
    for t in range(4):  # plans at frames 0 and 3
        first({k: v[None] for k, v in _frame(t).items()})
    second = PolicyRunner(took_over)
    second.reset(np.ones(1, dtype=bool), seeds=np.array([5]))
    second.observe([_frame(t) for t in range(3)])
    second({k: v[None] for k, v in _frame(3).items()})
    np.testing.assert_array_equal(took_over.histories[0], ran.histories[1])
    np.testing.assert_array_equal(ran.histories[1], [[2.0], [3.0]])

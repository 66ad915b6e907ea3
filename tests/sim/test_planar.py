"""Exact PushT coverage against a Monte-Carlo estimate of the same overlap."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robocompose.sim.planar import Rect, shape_overlap
from robocompose.sim.pusht import GOAL_POSE, T_AREA, T_RECTS, PushTEnv


def _inside(points: np.ndarray, pose: tuple[float, float, float]) -> np.ndarray:
    x, y, theta = pose
    c, s = math.cos(theta), math.sin(theta)
    local = points - (x, y)
    u, v = c * local[:, 0] + s * local[:, 1], -s * local[:, 0] + c * local[:, 1]
    hit = np.zeros(len(points), bool)
    for r in T_RECTS:
        hit |= (abs(u - r.cx) <= r.hx) & (abs(v - r.cy) <= r.hy)
    return hit


@pytest.mark.parametrize(
    "pose", [(0.01, -0.02, 0.5), (0.03, 0.0, GOAL_POSE[2]), (-0.05, 0.04, 2.0)]
)
def test_coverage_matches_monte_carlo(pose) -> None:
    rng = np.random.default_rng(0)
    points = rng.uniform(-0.15, 0.15, (400_000, 2))
    both = (_inside(points, pose) & _inside(points, GOAL_POSE)).mean() * 0.3**2
    assert shape_overlap(T_RECTS, pose, GOAL_POSE) == pytest.approx(both, abs=3e-5)


def test_coverage_at_goal_is_one_and_far_away_zero() -> None:
    assert PushTEnv.coverage_of(GOAL_POSE) == pytest.approx(1.0)
    assert PushTEnv.coverage_of((1.0, 1.0, 0.0)) == 0.0
    assert pytest.approx(sum(r.area for r in T_RECTS)) == T_AREA


def test_rect_overlap_of_shifted_squares() -> None:
    square = (Rect(0.0, 0.0, 0.5, 0.5),)
    assert shape_overlap(square, (0.0, 0.0, 0.0), (0.25, 0.0, 0.0)) == pytest.approx(0.75)
    assert shape_overlap(square, (0.0, 0.0, 0.0), (0.0, 0.0, math.pi / 4)) == pytest.approx(
        2 * (math.sqrt(2) - 1), rel=1e-9
    )

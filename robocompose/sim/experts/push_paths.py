"""The push primitive both PushT experts plan with (ours in metres, gym-pusht's in pixels).

A push = go around the block, outside a clearance circle about its centre, to a pre-contact point
`gap` off a contact point on its outline, then push along the inward normal (turned by each of
`angles`) by each of `depths`. The geometry is the same in any length unit; the experts differ
only in their simulators and units.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PushShape:
    """Lengths in the caller's unit. `limit`: targets are clipped to [-limit, limit] on both
    axes (a square workspace centred at 0); None: no clipping."""

    radius: float  # clearance circle about the block's centre
    pusher_radius: float
    gap: float  # pusher surface to block face at the pre-contact point
    travel_step: float
    push_step: float
    angles: Sequence[float]
    depths: Sequence[float]
    settle_steps: int
    limit: float | None = None


def push_paths(
    shape: PushShape,
    start: np.ndarray,
    centre: np.ndarray,
    contact: np.ndarray,
    normal: np.ndarray,
) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    """(approach targets from `start` to the pre-contact point, one target list per push) for
    the world-frame `contact` point and its outward `normal`."""
    pre = contact + normal * (shape.pusher_radius + shape.gap)
    radius = shape.radius
    waypoints = [start]
    here = start - centre
    if np.linalg.norm(here) < radius:
        waypoints.append(centre + here / max(np.linalg.norm(here), 1e-9) * radius)
    entry = ray_circle_exit(pre - centre, normal, radius) + centre
    a0 = math.atan2(*(waypoints[-1] - centre)[::-1])
    a1 = math.atan2(*(entry - centre)[::-1])
    sweep = math.remainder(a1 - a0, 2 * math.pi)
    n_arc = int(abs(sweep) * radius / shape.travel_step)
    for k in range(1, n_arc + 1):
        a = a0 + sweep * k / (n_arc + 1)
        waypoints.append(centre + radius * np.array([math.cos(a), math.sin(a)]))
    waypoints += [entry, pre]
    approach = resample(waypoints, shape.travel_step, shape.limit)
    pushes = []
    for angle in shape.angles:
        c, s = math.cos(angle), math.sin(angle)
        direction = -np.array([c * normal[0] - s * normal[1], s * normal[0] + c * normal[1]])
        for depth in shape.depths:
            end = pre + direction * (depth + shape.gap / c)
            push = resample([pre, end], shape.push_step, shape.limit)
            pushes.append(push + [push[-1]] * shape.settle_steps)
    return approach, pushes


def ray_circle_exit(origin: np.ndarray, direction: np.ndarray, radius: float) -> np.ndarray:
    """Where the ray origin + t * direction (t >= 0) leaves the circle |x| = radius."""
    b = float(origin @ direction)
    c = float(origin @ origin) - radius**2
    t = -b + math.sqrt(max(b * b - c, 0.0))
    return origin + max(t, 0.0) * direction


def resample(
    waypoints: list[np.ndarray], step: float, limit: float | None = None
) -> list[np.ndarray]:
    """Targets every `step` along the polyline, ending exactly at its last point."""
    targets = [np.asarray(waypoints[0], float)]
    for a, b in zip(waypoints[:-1], waypoints[1:], strict=True):
        n = max(1, math.ceil(np.linalg.norm(b - a) / step))
        targets += [a + (b - a) * k / n for k in range(1, n + 1)]
    if limit is not None:
        targets = [targets[0]] + [np.clip(t, -limit, limit) for t in targets[1:]]
    return targets[1:] or targets

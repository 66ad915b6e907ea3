"""Exact planar area overlap of shapes made of disjoint rectangles (the PushT coverage score).

Coverage = area(block ∩ goal) / area(goal). Both shapes are unions of disjoint rectangles, so the
intersection is the sum of pairwise convex intersections, each found by Sutherland-Hodgman
clipping. Plain Python floats: for 4-gons this beats numpy's per-call overhead.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

Point = tuple[float, float]


@dataclass(frozen=True)
class Rect:
    """An axis-aligned rectangle in a shape's own frame: centre and half extents, metres."""

    cx: float
    cy: float
    hx: float
    hy: float

    @property
    def area(self) -> float:
        return 4.0 * self.hx * self.hy


def rect_corners(rect: Rect, x: float, y: float, theta: float) -> list[Point]:
    """Corners (counter-clockwise) of `rect` after placing its shape frame at pose (x, y, theta)."""
    c, s = math.cos(theta), math.sin(theta)
    corners = []
    for dx, dy in ((-1, -1), (1, -1), (1, 1), (-1, 1)):
        px, py = rect.cx + dx * rect.hx, rect.cy + dy * rect.hy
        corners.append((x + c * px - s * py, y + s * px + c * py))
    return corners


def _clip(polygon: list[Point], a: Point, b: Point) -> list[Point]:
    """Keep the part of `polygon` left of the directed edge a -> b."""
    out: list[Point] = []
    ex, ey = b[0] - a[0], b[1] - a[1]
    n = len(polygon)
    for i in range(n):
        p, q = polygon[i], polygon[(i + 1) % n]
        sp = ex * (p[1] - a[1]) - ey * (p[0] - a[0])
        sq = ex * (q[1] - a[1]) - ey * (q[0] - a[0])
        if sp >= 0:
            out.append(p)
        if (sp >= 0) != (sq >= 0):
            t = sp / (sp - sq)
            out.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])))
    return out


def polygon_area(polygon: list[Point]) -> float:
    area = 0.0
    n = len(polygon)
    for i in range(n):
        x0, y0 = polygon[i]
        x1, y1 = polygon[(i + 1) % n]
        area += x0 * y1 - x1 * y0
    return 0.5 * abs(area)


def convex_overlap(p: list[Point], q: list[Point]) -> float:
    """Area of the intersection of two convex counter-clockwise polygons."""
    out = p
    for i in range(len(q)):
        if not out:
            return 0.0
        out = _clip(out, q[i], q[(i + 1) % len(q)])
    return polygon_area(out) if len(out) >= 3 else 0.0


@functools.lru_cache(maxsize=8)
def _placed(rects: tuple[Rect, ...], pose: tuple[float, float, float]) -> tuple:
    """Corners, centre and bounding radius of each rectangle at `pose` (the goal's is fixed,
    so caching it halves the work)."""
    x, y, theta = pose
    c, s = math.cos(theta), math.sin(theta)
    return tuple(
        (
            rect_corners(r, x, y, theta),
            (x + c * r.cx - s * r.cy, y + s * r.cx + c * r.cy),
            math.hypot(r.hx, r.hy),
        )
        for r in rects
    )


def shape_overlap(
    rects: tuple[Rect, ...], pose_a: tuple[float, float, float], pose_b: tuple[float, float, float]
) -> float:
    """Area shared by the same rectangle-union shape placed at two poses."""
    total = 0.0
    for corners_a, (ax, ay), ra in _placed(rects, pose_a):
        for corners_b, (bx, by), rb in _placed(rects, pose_b):
            if (ax - bx) ** 2 + (ay - by) ** 2 < (ra + rb) ** 2:  # else the two cannot touch
                total += convex_overlap(corners_a, corners_b)
    return total

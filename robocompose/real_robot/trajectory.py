"""Timestamped waypoints and the trajectory through them that the control process samples.

A waypoint is a pose the arm should be at at a time (`time.monotonic()`): a position, optionally
a rotation (unit quaternion w, x, y, z) and a gripper command. On the wire it is one fixed-size
record (`WAYPOINT_WIDTH` floats, see `pack_waypoint`). The trajectory interpolates positions
linearly or by a cubic (Catmull-Rom) through the waypoints, rotations by slerp, and holds the
gripper stepwise: between two waypoints the gripper is the one of the waypoint being approached
(as `env.step` sets the gripper at the start of the step that moves toward a target).

Scheduling follows time, never arrival order: a waypoint whose time has passed when it arrives
is dropped (late); a waypoint at or before the last queued one starts a new plan, which is
blended in by time over `blend_s`: (1 - w) old + w new with w rising from 0 to 1, the new plan
extended backwards before its first waypoint, so the stream stays continuous however much two
plans differ (a plan starting from rest blends in from the commanded pose); a later waypoint
extends the plan. Nothing is replayed: sampling only moves forward in time.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

WAYPOINT_WIDTH = 10  # [t, x, y, z, qw, qx, qy, qz, gripper, flags]
HAS_ROTATION, HAS_GRIPPER = 1, 2  # flag bits
INTERPOLATIONS = ("linear", "cubic")
INVALID_KINDS = ("not finite", "not a unit quaternion", "bad flags", "bad size")


@dataclass(frozen=True)
class Waypoint:
    time_s: float
    pos_m: np.ndarray  # (3,)
    quat: np.ndarray | None = None  # (4,) w, x, y, z
    gripper: float | None = None


def pack_waypoint(
    time_s: float, pos_m: np.ndarray, gripper: float | None = None, quat: np.ndarray | None = None
) -> np.ndarray:
    """The ring-buffer record of one waypoint (no check: the control process checks it)."""
    record = np.zeros(WAYPOINT_WIDTH)
    record[0] = time_s
    record[1:4] = pos_m
    flags = 0
    if quat is not None:
        record[4:8] = quat
        flags |= HAS_ROTATION
    if gripper is not None:
        record[8] = gripper
        flags |= HAS_GRIPPER
    record[9] = flags
    return record


def unpack_waypoint(record: np.ndarray) -> tuple[Waypoint | None, str]:
    """(the waypoint, "") or (None, why it is refused: one of `INVALID_KINDS`)."""
    if record.shape != (WAYPOINT_WIDTH,):
        return None, "bad size"
    flags = int(record[9]) if np.isfinite(record[9]) else -1
    if not 0 <= flags <= HAS_ROTATION | HAS_GRIPPER:
        return None, "bad flags"
    used = [0, 1, 2, 3] + ([4, 5, 6, 7] if flags & HAS_ROTATION else [])
    used += [8] if flags & HAS_GRIPPER else []
    if not np.all(np.isfinite(record[used])):
        return None, "not finite"
    quat = None
    if flags & HAS_ROTATION:
        norm = float(np.linalg.norm(record[4:8]))
        if abs(norm - 1.0) > 1e-3:
            return None, "not a unit quaternion"
        quat = record[4:8] / norm
    gripper = float(record[8]) if flags & HAS_GRIPPER else None
    return Waypoint(float(record[0]), record[1:4].copy(), quat, gripper), ""


def slerp(q0: np.ndarray, q1: np.ndarray, alpha: float) -> np.ndarray:
    """Spherical linear interpolation of unit quaternions, along the shorter arc."""
    dot = float(np.dot(q0, q1))
    if dot < 0.0:
        q1, dot = -q1, -dot
    if dot > 0.9995:  # nearly equal: linear, renormalised
        q = q0 + alpha * (q1 - q0)
        return q / np.linalg.norm(q)
    theta = np.arccos(dot)
    return (np.sin((1 - alpha) * theta) * q0 + np.sin(alpha * theta) * q1) / np.sin(theta)


@dataclass(frozen=True)
class Sample:
    pos_m: np.ndarray
    quat: np.ndarray | None
    gripper: float | None


class WaypointPath:
    """Waypoints in time order, sampled by interpolation; before the first waypoint the first
    segment is extended backwards (so a plan blended in from an earlier time has a value)."""

    def __init__(self, cubic: bool) -> None:
        self.cubic = cubic
        self.points: list[Waypoint] = []
        self.times: list[float] = []

    def append(self, waypoint: Waypoint) -> None:
        cut = bisect.bisect_left(self.times, waypoint.time_s)
        del self.points[cut:], self.times[cut:]
        self.points.append(waypoint)
        self.times.append(waypoint.time_s)

    def prune(self, now_s: float) -> None:
        """Forget waypoints no segment at or after `now_s` needs."""
        keep_from = max(0, bisect.bisect_right(self.times, now_s) - 1 - int(self.cubic))
        if keep_from:
            del self.points[:keep_from], self.times[:keep_from]

    def sample(self, t_s: float) -> Sample:
        p = self.points
        i = bisect.bisect_right(self.times, t_s) - 1
        if i >= len(p) - 1 or len(p) == 1:
            return Sample(p[-1].pos_m, p[-1].quat, self._gripper(len(p) - 1))
        if i < 0:  # before the plan: its first segment extended backwards
            a, b = p[0], p[1]
            alpha = (t_s - a.time_s) / (b.time_s - a.time_s)
            return Sample(a.pos_m + alpha * (b.pos_m - a.pos_m), a.quat, self._gripper(0))
        a, b = p[i], p[i + 1]
        alpha = (t_s - a.time_s) / (b.time_s - a.time_s)
        pos = self._cubic(i, alpha) if self.cubic else a.pos_m + alpha * (b.pos_m - a.pos_m)
        quat = b.quat
        if a.quat is not None and b.quat is not None:
            quat = slerp(a.quat, b.quat, alpha)
        return Sample(pos, quat, self._gripper(i + 1))

    def _gripper(self, i: int) -> float | None:
        """The gripper of waypoint i, or of the latest before it that has one."""
        for point in reversed(self.points[: i + 1]):
            if point.gripper is not None:
                return point.gripper
        return None

    def _cubic(self, i: int, alpha: float) -> np.ndarray:
        """Catmull-Rom (tangents from the neighbours, by time) on the segment i -> i + 1."""
        p, t = self.points, self.times
        h = t[i + 1] - t[i]

        def tangent(j: int) -> np.ndarray:
            lo, hi = max(0, j - 1), min(len(p) - 1, j + 1)
            return (p[hi].pos_m - p[lo].pos_m) / (t[hi] - t[lo])

        m0, m1 = tangent(i) * h, tangent(i + 1) * h
        a2, a3 = alpha * alpha, alpha * alpha * alpha
        return (
            (2 * a3 - 3 * a2 + 1) * p[i].pos_m
            + (a3 - 2 * a2 + alpha) * m0
            + (-2 * a3 + 3 * a2) * p[i + 1].pos_m
            + (a3 - a2) * m1
        )


class Trajectory:
    """The plan being run and, for `blend_s` after a new one started, the one it replaces; see
    the module docstring."""

    def __init__(self, interpolation: str = "linear", blend_s: float = 0.1) -> None:
        if interpolation not in INTERPOLATIONS:
            raise ValueError(
                f"`interpolation` must be one of {INTERPOLATIONS}. Got {interpolation!r}."
            )
        if not blend_s > 0:
            raise ValueError(f"`blend_s` must be > 0. Got {blend_s}.")
        self.cubic = interpolation == "cubic"
        self.blend_s = blend_s
        self.plan = WaypointPath(self.cubic)
        self.previous: WaypointPath | None = None
        self.blend_start_s = 0.0

    def __len__(self) -> int:
        return len(self.plan.points)

    @property
    def end_s(self) -> float | None:
        return self.plan.times[-1] if self.plan.times else None

    def clear(self) -> None:
        self.plan, self.previous = WaypointPath(self.cubic), None

    def insert(self, waypoint: Waypoint, now_s: float, current: Sample | None) -> bool:
        """Queue `waypoint`; False (dropped) if its time is not after `now_s`. A waypoint at or
        before the last queued one (or the first after the plan ended) starts a new plan,
        blended in from what is commanded now (`current`, or the old plan)."""
        if waypoint.time_s <= now_s:
            return False
        end = self.end_s
        if end is not None and now_s < end < waypoint.time_s:
            self.plan.append(waypoint)  # extends the plan being run
            return True
        old = self.plan if self.plan.points else None
        if current is not None and (old is None or end is None or end < now_s):
            old = WaypointPath(self.cubic)
            old.append(Waypoint(now_s, current.pos_m, current.quat, current.gripper))
        self.previous, self.blend_start_s = old, now_s
        self.plan = WaypointPath(self.cubic)
        self.plan.append(waypoint)
        return True

    def prune(self, now_s: float) -> None:
        self.plan.prune(now_s)
        if self.previous is not None:
            if now_s >= self.blend_start_s + self.blend_s:
                self.previous = None
            else:
                self.previous.prune(now_s)

    def sample(self, t_s: float) -> Sample | None:
        """The pose commanded for time `t_s` (the last waypoint's after the end), blended from
        the previous plan for `blend_s` after a new one began; None if nothing is queued."""
        if not self.plan.points:
            return None
        new = self.plan.sample(t_s)
        w = (t_s - self.blend_start_s) / self.blend_s
        if self.previous is None or w >= 1.0:
            return new
        old = self.previous.sample(t_s)
        w = max(0.0, w)
        quat = new.quat
        if old.quat is not None and new.quat is not None:
            quat = slerp(old.quat, new.quat, w)
        return Sample((1 - w) * old.pos_m + w * new.pos_m, quat, new.gripper)

"""Timestamped waypoints and the trajectory through them that the control process samples.

A waypoint is a pose the arm should be at at a time (`time.monotonic()`): a position, optionally
a rotation (unit quaternion w, x, y, z) and a gripper command. On the wire it is one fixed-size
record (`WAYPOINT_WIDTH` floats, see `pack_waypoint`). The trajectory interpolates positions
linearly or by a cubic (Catmull-Rom) through the waypoints, rotations by slerp, and holds the
gripper stepwise: between two waypoints the gripper is the one of the waypoint being approached
(as `env.step` sets the gripper at the start of the step that moves toward a target).

Scheduling follows time, never arrival order: a waypoint whose time has passed when it arrives
is dropped (late); a waypoint at time t replaces every queued one at or after t (a newer plan
overrides the older one from its first time on), and the arm is blended from where it is
commanded now into the new plan. Nothing is replayed: sampling only moves forward in time.
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


class Trajectory:
    """The queued waypoints; see the module docstring."""

    def __init__(self, interpolation: str = "linear") -> None:
        if interpolation not in INTERPOLATIONS:
            raise ValueError(
                f"`interpolation` must be one of {INTERPOLATIONS}. Got {interpolation!r}."
            )
        self.cubic = interpolation == "cubic"
        self.points: list[Waypoint] = []
        self._times: list[float] = []

    def __len__(self) -> int:
        return len(self.points)

    @property
    def end_s(self) -> float | None:
        return self._times[-1] if self._times else None

    def clear(self) -> None:
        self.points, self._times = [], []

    def insert(self, waypoint: Waypoint, now_s: float, current: Sample | None) -> bool:
        """Queue `waypoint`; False (dropped) if its time is not after `now_s`. `current` is what
        is commanded now: the anchor the new plan is blended from."""
        if waypoint.time_s <= now_s:
            return False
        cut = bisect.bisect_left(self._times, waypoint.time_s)
        del self.points[cut:], self._times[cut:]
        if current is not None and (not self._times or self._times[-1] < now_s):
            # nothing queued up to now: the segment into the plan starts where the arm is sent
            anchor = Waypoint(now_s, current.pos_m, current.quat, current.gripper)
            self.points, self._times = [anchor], [now_s]
        self.points.append(waypoint)
        self._times.append(waypoint.time_s)
        return True

    def prune(self, now_s: float) -> None:
        """Forget waypoints no segment at or after `now_s` needs (one before it stays)."""
        keep_from = max(0, bisect.bisect_right(self._times, now_s) - 1 - int(self.cubic))
        if keep_from:
            del self.points[:keep_from], self._times[:keep_from]

    def sample(self, t_s: float) -> Sample | None:
        """The pose commanded for time `t_s`; the last waypoint's after the end; None if empty."""
        if not self.points:
            return None
        i = bisect.bisect_right(self._times, t_s) - 1
        if i < 0:
            first = self.points[0]
            return Sample(first.pos_m, first.quat, first.gripper)
        if i >= len(self.points) - 1:
            last = self.points[-1]
            return Sample(last.pos_m, last.quat, self._gripper(len(self.points) - 1))
        a, b = self.points[i], self.points[i + 1]
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
        p, t = self.points, self._times
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

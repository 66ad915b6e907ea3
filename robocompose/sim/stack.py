"""Stack: stack coloured 4 cm blocks in a given order with a gantry gripper.

## Description
The tabletop scene of `robocompose.sim.pick_place` with one block per name in `blocks` (colours
from `COLORS`). `order` names the blocks to stack, bottom to top; the bottom block may stay where
it starts. Blocks not in `order` are distractors. The block set is an argument so that
hierarchical tasks can build on this env.

## Action space
`Box(4,)`: absolute ee target (x, y, z) in metres within the gantry workspace
(x, y in [-0.2, 0.2], z in [0.015, 0.25]), then the gripper command in [-1, 1] (-1 open, +1
closed). The table top is at z = 0.

## Observation space
- `state` (4 + 5 * len(blocks),): ee x, y, z (m); finger opening (m, 0..0.09); per block, in the
  order of `blocks` (not `order`): x, y, z (m), cos(4 yaw), sin(4 yaw) (yaw of the block's most
  horizontal axis; 4 yaw is invariant to its quarter-turn symmetry).
- `image` (96, 96, 3) uint8, optional: the angled camera (`camera="angled"`) or the top-down one
  (`camera="top"`).

## Score and success
A consecutive pair (lower, upper) of `order` is *stacked* when the upper block's centre is within
`STACK_XY_TOL_M` (1.5 cm) of the lower one's in xy and 4 cm (within 5 mm) above it, the upper
block is still (speed < 5 cm/s) and no finger pad touches it. The bottom block must rest on the
table for its pair to count, and the top pair also needs the gripper open wider than a block by
5 mm. score = (number of stacked pairs) / (len(order) - 1); success = score == 1, at which the
episode terminates. reward = score.

## Starting state
Blocks uniform in [-0.15, 0.15]^2 with random yaw, centres at least 10 cm apart. Gripper open,
ee uniform in [-0.1, 0.1]^2 x [0.12, 0.18].

## Episode end
Termination at success. No truncation in the env itself: wrap with `TimeLimit` at
`MAX_EPISODE_STEPS` (300 steps = 30 s at 10 Hz).

## Arguments
`obs_keys`, `image_size`, `render_mode` as in `MujocoTaskEnv`; `blocks`: 2 to 5 distinct names
from `COLORS`; `order`: 2 or more distinct names from `blocks`, bottom to top (default: `blocks`);
`camera`.

## Version history
- v0: first release.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from robocompose.sim.pick_place import CUBE_HALF_M, REST_TOL_M, TabletopEnv, cube_xml

MAX_EPISODE_STEPS = 300
STACK_XY_TOL_M = 0.015
MAX_BLOCKS = 5  # what fits 10 cm apart in the start area with room to spare
COLORS: dict[str, tuple[float, float, float, float]] = {
    "red": (0.85, 0.15, 0.12, 1.0),
    "green": (0.15, 0.7, 0.2, 1.0),
    "blue": (0.15, 0.3, 0.9, 1.0),
    "yellow": (0.95, 0.82, 0.1, 1.0),
    "purple": (0.55, 0.2, 0.75, 1.0),
    "orange": (1.0, 0.5, 0.05, 1.0),
    "cyan": (0.1, 0.8, 0.85, 1.0),
    "white": (0.97, 0.97, 0.97, 1.0),
}


def _validate(blocks: Sequence[str], order: Sequence[str]) -> None:
    if isinstance(blocks, str) or not 2 <= len(blocks) <= MAX_BLOCKS:
        raise ValueError(f"`blocks` must be 2 to {MAX_BLOCKS} colour names. Got {blocks!r}.")
    unknown = [b for b in blocks if b not in COLORS]
    if unknown:
        raise ValueError(f"`blocks` has unknown colours {unknown}; choose from {sorted(COLORS)}.")
    if len(set(blocks)) != len(blocks):
        raise ValueError(f"`blocks` must not repeat a colour. Got {blocks!r}.")
    if isinstance(order, str) or len(order) < 2:
        raise ValueError(f"`order` must name 2 or more blocks. Got {order!r}.")
    missing = [b for b in order if b not in blocks]
    if missing:
        raise ValueError(f"`order` names blocks {missing} that are not in `blocks` {blocks!r}.")
    if len(set(order)) != len(order):
        raise ValueError(f"`order` must not repeat a block. Got {order!r}.")


def blocks_xml(blocks: Sequence[str]) -> str:
    """One cube body per colour name in `blocks`, in a row on the table (a reset places them)."""
    return "".join(
        cube_xml(name, COLORS[name], (0.1 * i, 0.0, CUBE_HALF_M)) for i, name in enumerate(blocks)
    )


class StackEnv(TabletopEnv):
    """Stack the blocks of `order` bottom to top. See the module docstring for details."""

    def __init__(
        self,
        *,
        obs_keys: tuple[str, ...] = ("state",),
        image_size: int = 96,
        render_mode: str | None = None,
        blocks: Sequence[str] = ("red", "green", "blue"),
        order: Sequence[str] | None = None,
        camera: str = "angled",
    ) -> None:
        order = tuple(blocks) if order is None else order
        _validate(blocks, order)
        self.blocks, self.order = tuple(blocks), tuple(order)
        self.order_ids = tuple(self.blocks.index(b) for b in self.order)
        super().__init__(
            "stack",
            blocks_xml(self.blocks),
            self.blocks,
            obs_keys=obs_keys,
            image_size=image_size,
            render_mode=render_mode,
            camera=camera,
        )

    def stacked(self, k: int) -> bool:
        """Whether pair k, (order[k], order[k + 1]), is stacked (see the module docstring)."""
        lower, upper = self.order_ids[k], self.order_ids[k + 1]
        d = self.cube_pos(upper) - self.cube_pos(lower)
        on_top = np.hypot(d[0], d[1]) < STACK_XY_TOL_M and abs(d[2] - 2 * CUBE_HALF_M) < REST_TOL_M
        if not on_top or self.cube_speed(upper) > 0.05 or self.gripper_touches(upper):
            return False
        if k == 0 and not self.at_rest(lower, CUBE_HALF_M):
            return False
        return k < len(self.order) - 2 or self.released(upper)

    def n_stacked_from_bottom(self) -> int:
        """How many pairs, counted from the bottom, are stacked without a gap."""
        for k in range(len(self.order) - 1):
            if not self.stacked(k):
                return k
        return len(self.order) - 1

    def _state_obs(self) -> np.ndarray:
        return np.concatenate(
            [self.robot_obs(), *(self.cube_obs(i) for i in range(len(self.blocks)))]
        )

    def _evaluate(self) -> tuple[bool, float]:
        n_pairs = len(self.order) - 1
        n_stacked = sum(self.stacked(k) for k in range(n_pairs))
        return n_stacked == n_pairs, n_stacked / n_pairs

    def _randomize(self, rng: np.random.Generator) -> None:
        self._randomize_scene(rng)

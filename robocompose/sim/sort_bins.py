"""SortBins: put every coloured block into the flat bin of its colour, with a gantry gripper.

## Description
The tabletop scene of `robocompose.sim.pick_place` with one 4 cm block per name in `blocks`
(colours from `robocompose.sim.stack.COLORS`) and one flat bin per name in `bins`: a disc of
radius `BIN_RADIUS_M` (5 cm) drawn on the table in a lighter shade of its colour (visual only,
like PickPlace's target disc, and inside PickPlace's target range, so a PickPlace policy can
bring a block to a bin). Every block colour has a bin; extra bins are distractors.

## Action space
`Box(4,)`: absolute ee target (x, y, z) in metres within the gantry workspace
(x, y in [-0.2, 0.2], z in [0.015, 0.25]), then the gripper command in [-1, 1] (-1 open, +1
closed). The table top is at z = 0.

## Observation space
- `state` (4 + 5 * len(blocks) + 2 * len(bins),): ee x, y, z (m); finger opening (m, 0..0.09);
  per block, in the order of `blocks`: x, y, z (m), cos(4 yaw), sin(4 yaw); per bin, in the
  order of `bins`: centre x, y (m).
- `image` (96, 96, 3) uint8, optional: the angled camera (`camera="angled"`) or the top-down one
  (`camera="top"`).

## Score and success
A block is *sorted* when its centre is within `BIN_RADIUS_M` of its colour's bin centre in xy,
it rests on the table (centre height within 5 mm of 2 cm, speed < 5 cm/s), no finger pad touches
it and the gripper is open wider than a block by 5 mm. success = every block sorted; the episode
terminates at success. score = mean over blocks of 1 when sorted, else
`0.9 * max(0, 1 - max(0, d - r) / 0.25)` with d the block's xy distance to its bin centre and r
the bin radius. reward = score.

## Starting state
Bin centres uniform in [-0.12, 0.12]^2, at least `BIN_GAP_M` (13 cm) apart. Blocks uniform in
[-0.15, 0.15]^2 with random yaw, centres at least 10 cm apart and at least 10 cm from every bin
centre (so none starts in a bin). Gripper open, ee uniform in [-0.1, 0.1]^2 x [0.12, 0.18].

## Episode end
Termination at success. No truncation in the env itself: wrap with `TimeLimit` at
`MAX_EPISODE_STEPS` (450 steps = 45 s at 10 Hz).

## Arguments
`obs_keys`, `image_size`, `render_mode` as in `MujocoTaskEnv`; `blocks`: 1 to 3 distinct names
from `COLORS`; `bins`: 1 to 3 distinct names from `COLORS` including every block's colour
(default: `blocks`); `camera`.

## Version history
- v0: first release.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from robocompose.sim.pick_place import (
    SCORE_SCALE_M,
    TARGET_RADIUS_M,
    TabletopEnv,
)
from robocompose.sim.stack import COLORS, blocks_xml

MAX_EPISODE_STEPS = 450
BIN_RADIUS_M = TARGET_RADIUS_M
BIN_RANGE_M = 0.12  # bin centres in [-range, range]^2: PickPlace's target range
BIN_GAP_M = 0.13  # between bin centres
BLOCK_KEEP_OUT_M = BIN_RADIUS_M + 0.05  # block centres start this far from every bin centre
MAX_ITEMS = 3  # blocks or bins: what fits with these gaps in the start area


def _validate(blocks: Sequence[str], bins: Sequence[str]) -> None:
    for field, names in (("blocks", blocks), ("bins", bins)):
        if isinstance(names, str) or not 1 <= len(names) <= MAX_ITEMS:
            raise ValueError(f"`{field}` must be 1 to {MAX_ITEMS} colour names. Got {names!r}.")
        unknown = [n for n in names if n not in COLORS]
        if unknown:
            raise ValueError(
                f"`{field}` has unknown colours {unknown}; choose from {sorted(COLORS)}."
            )
        if len(set(names)) != len(names):
            raise ValueError(f"`{field}` must not repeat a colour. Got {names!r}.")
    missing = [b for b in blocks if b not in bins]
    if missing:
        raise ValueError(f"`bins` {tuple(bins)!r} has no bin for the blocks of colour {missing}.")


def bin_xml(name: str, colour: str) -> str:
    """A flat disc on the table (mocap, no collision) in a lighter shade of `colour`."""
    r, g, b, _ = COLORS[colour]
    shade = " ".join(f"{0.5 * c + 0.5:.3f}" for c in (r, g, b))
    return f"""
    <body name="{name}" mocap="true" pos="0 0 0.0005">
      <geom name="{name}" type="cylinder" size="{BIN_RADIUS_M} 0.0005"
            rgba="{shade} 1" contype="0" conaffinity="0"/>
    </body>"""


class SortBinsEnv(TabletopEnv):
    """Put each block in the bin of its colour. See the module docstring for details."""

    bin_radius_m = BIN_RADIUS_M

    def __init__(
        self,
        *,
        obs_keys: tuple[str, ...] = ("state",),
        image_size: int = 96,
        render_mode: str | None = None,
        blocks: Sequence[str] = ("red", "green", "blue"),
        bins: Sequence[str] | None = None,
        camera: str = "angled",
    ) -> None:
        bins = tuple(blocks) if bins is None else bins
        _validate(blocks, bins)
        self.blocks, self.bin_colours = tuple(blocks), tuple(bins)
        self.bin_of_block = tuple(self.bin_colours.index(b) for b in self.blocks)
        bodies = "".join(bin_xml(f"{c}_bin", c) for c in self.bin_colours) + blocks_xml(self.blocks)
        super().__init__(
            "sort_bins",
            bodies,
            self.blocks,
            obs_keys=obs_keys,
            image_size=image_size,
            render_mode=render_mode,
            camera=camera,
        )

    def _bind(self) -> None:
        super()._bind()
        self._bin_mocap = np.array(
            [self.model.body(f"{c}_bin").mocapid[0] for c in self.bin_colours]
        )

    def bin_xy(self, k: int) -> np.ndarray:
        """Centre (x, y) of bin k, m."""
        return self.data.mocap_pos[self._bin_mocap[k], :2].copy()

    def sorted_block(self, i: int) -> bool:
        """Block i rests on the table inside its colour's bin, let go by the gripper."""
        return self.placed_in_disc(i, self.bin_xy(self.bin_of_block[i]), BIN_RADIUS_M)

    def _state_obs(self) -> np.ndarray:
        blocks = [self.cube_obs(i) for i in range(len(self.blocks))]
        bins = [self.bin_xy(k) for k in range(len(self.bin_colours))]
        return np.concatenate([self.robot_obs(), *blocks, *bins])

    def _evaluate(self) -> tuple[bool, float]:
        scores = []
        for i in range(len(self.blocks)):
            if self.sorted_block(i):
                scores.append(1.0)
                continue
            gap = np.linalg.norm(self.cube_pos(i)[:2] - self.bin_xy(self.bin_of_block[i]))
            scores.append(0.9 * max(0.0, 1.0 - max(0.0, gap - BIN_RADIUS_M) / SCORE_SCALE_M))
        success = all(s == 1.0 for s in scores)
        return success, float(np.mean(scores))

    def _randomize(self, rng: np.random.Generator) -> None:
        centres: list[np.ndarray] = []
        while len(centres) < len(self.bin_colours):
            xy = rng.uniform(-BIN_RANGE_M, BIN_RANGE_M, 2)
            if all(np.linalg.norm(xy - c) >= BIN_GAP_M for c in centres):
                centres.append(xy)
        for k, xy in enumerate(centres):
            self.data.mocap_pos[self._bin_mocap[k], :2] = xy
        self._randomize_scene(rng, keep_out=centres, keep_out_m=BLOCK_KEEP_OUT_M)

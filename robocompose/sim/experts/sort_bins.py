"""Scripted expert for SortBins: the grasping expert's pick-and-place, once per unsorted block.

After every placement it re-reads which blocks are sorted and takes the next unsorted one in the
order of `blocks`, so a block that bounced out of its bin is brought back. Each block goes to its
bin's centre plus a small random offset (within a third of the bin radius).
"""

from __future__ import annotations

from collections.abc import Iterator

from robocompose.sim.experts.grasping import Command, GraspExpertConfig, _GraspingExpert
from robocompose.sim.pick_place import CUBE_HALF_M, TabletopEnv
from robocompose.sim.sort_bins import BIN_RADIUS_M, SortBinsEnv


class SortBinsExpertConfig(GraspExpertConfig):
    """`GraspExpertConfig` under the name `robocompose.sim.tasks.make_expert` looks up."""


class SortBinsExpert(_GraspingExpert):
    """Brings each block into the bin of its colour."""

    task_type = SortBinsEnv
    config_type = SortBinsExpertConfig

    def _plan(self, task: TabletopEnv) -> Iterator[Command]:
        assert isinstance(task, SortBinsEnv)
        n = len(task.blocks)
        for _ in range(2 * n):
            unsorted = [i for i in range(n) if not task.sorted_block(i)]
            if not unsorted:
                return
            i = unsorted[0]
            k = task.bin_of_block[i]
            offset = self._rng.uniform(-BIN_RADIUS_M / 3, BIN_RADIUS_M / 3, 2)
            yield from self._pick_and_place(
                task,
                i,
                lambda k=k, offset=offset: task.bin_xy(k) + offset,
                lambda: CUBE_HALF_M + 0.004,
                f"{task.bin_colours[k]}_bin",
            )

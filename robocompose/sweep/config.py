"""A sweep's config and its cells: the base config, the axes, one job per point of their grid.

Axes come from `sweep.axes` (an ablation preset, e.g. `sweep=operators`) and from sweep
overrides on the command line (`composition=convex,mixture seed=0,1`), expanded as Hydra's basic
sweeper does (choice and range sweeps, cartesian product in axis order). A plain override of an
axis's key pins it. Every cell is composed by Hydra and built into a `SweepConfig` before any
rollout runs, so a bad value fails at once and names its cell.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException

from robocompose.config import ConfigError, build, compose_all, to_tree
from robocompose.launch.config import LauncherConfig
from robocompose.rollout_config import RolloutConfig

# what may change when a sweep is rerun into the same folder: nothing that moves a result
FREE_KEYS = ("episodes", "sweep", "launcher")


@dataclass(kw_only=True)
class SweepSettings:
    """Which sweep: its name and folder, its preset axes (`sweep=<preset>` fills them)."""

    name: str = "sweep"
    dir: str = "runs/sweeps/${sweep.name}"  # episodes.csv, summary.md, plots/, sweep.json
    axes: dict[str, str] = field(default_factory=dict)  # key -> Hydra sweep, e.g. "convex,mixture"
    requires: str = ""  # the command that makes the sweep's parents, named when one is missing


@dataclass(kw_only=True)
class SweepConfig(RolloutConfig):
    """`robocompose sweep`: the job of every cell, plus where the table goes and who runs it."""

    episodes: int = 20
    sweep: SweepSettings = field(default_factory=SweepSettings)
    launcher: LauncherConfig = field(default_factory=LauncherConfig)


@dataclass(frozen=True)
class Cell:
    """One point of the grid: its axis values (override strings, in axis order) and its job."""

    values: tuple[str, ...]
    job: SweepConfig

    def name(self, axes: Sequence[str]) -> str:
        return " ".join(f"{k}={v}" for k, v in zip(axes, self.values, strict=True))


@dataclass
class SweepPlan:
    base: SweepConfig
    axes: list[str]
    cells: list[Cell]
    tree: dict[str, Any]  # the resolved base config

    def fixed(self) -> dict[str, Any]:
        """The base config less FREE_KEYS: a rerun into the same folder must match it."""
        return {k: v for k, v in self.tree.items() if k not in FREE_KEYS}


def _parse(overrides: Sequence[str]) -> list[Override]:
    try:
        return OverridesParser.create().parse_overrides(list(overrides))
    except HydraException as e:
        raise ConfigError(str(e).replace("\n", " ")) from None


def _values(override: Override) -> list[str]:
    if not override.is_sweep_override():
        return [override.get_value_element_as_str()]
    if not override.is_discrete_sweep():
        raise ConfigError(
            f"{override.input_line!r}: a sweep axis must be a choice (a,b,c) or a range "
            "(range(0,5)); intervals have no grid."
        )
    return list(override.sweep_string_iterator())


def plan(overrides: Sequence[str], require_axes: bool = True) -> SweepPlan:
    """Compose the base config, collect the axes, and build every cell's job.

    Without any axis a sweep cannot run; `require_axes=False` (for `--cfg`) returns the base
    config with no axes and no cells instead of raising.
    """
    parsed = _parse(overrides)
    plain = [o for o in parsed if not o.is_sweep_override()]
    plain_lines = [str(o.input_line) for o in plain]
    tree = to_tree(compose_all("sweep", SweepConfig, [plain_lines])[0])
    base = build(SweepConfig, tree)
    pinned = {o.get_key_element() for o in plain}
    axes: dict[str, list[str]] = {}
    preset = [f"{key}={text}" for key, text in base.sweep.axes.items() if key not in pinned]
    for override in _parse(preset) + [o for o in parsed if o.is_sweep_override()]:
        axes[override.get_key_element()] = _values(override)
    if not axes and not require_axes:
        return SweepPlan(base, [], [], tree)
    if not axes:
        raise ConfigError(
            "a sweep needs at least one axis: e.g. `robocompose sweep -m "
            "composition=convex,mixture seed=0,1`, or an ablation preset `sweep=operators` "
            "(configs/sweep/)."
        )
    points = list(itertools.product(*axes.values()))
    lines = [plain_lines + [f"{k}={v}" for k, v in zip(axes, p, strict=True)] for p in points]
    cells = []
    for point, config in zip(points, compose_all("sweep", SweepConfig, lines), strict=True):
        cell_tree = to_tree(config)
        try:
            cells.append(Cell(point, build(SweepConfig, cell_tree)))
        except ConfigError as e:
            name = " ".join(f"{k}={v}" for k, v in zip(axes, point, strict=True))
            raise ConfigError(f"sweep cell {name}: {e}") from None
    return SweepPlan(base, list(axes), cells, tree)

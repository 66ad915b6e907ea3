"""`robocompose search [CKPT ...]`: test-time search of compositions on a seed list
(`robocompose.composition.search`): the candidates of every method in `search.operators` (by
default every searchable one: convex's simplex grid, the product of experts and each parent
sharpened by weighted_sum) and each parent alone race in one pool. Prints the candidates' table
and the choice (its method and weights), writes `out/search.json` and `out/search.png`, then
confirms the choice against the better parent on `confirm` fresh seeds
(`robocompose.compare.confirm_search`), into search.json too.

`composition.operator` and `composition.weights` are what `compose` and `eval` run; a search
reads neither (`search.operators` names its methods, and the weights are what it finds). The
other composition fields (sampler, steps, grid, ...) apply to every candidate.

Light to import (the command line reads `SearchConfig` for `--help`); `run` imports the search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robocompose.composition.weight_search import SearchSettings
from robocompose.launch.config import LauncherConfig
from robocompose.rollout_config import RolloutConfig

if TYPE_CHECKING:
    from robocompose.composition.weight_search import SearchResult


@dataclass(kw_only=True)
class SearchConfig(RolloutConfig):
    """`robocompose search`: the candidates of `search.operators` and each parent alone (the
    composition's operator and weights are not read; its other fields apply to every
    candidate)."""

    search: SearchSettings = field(default_factory=SearchSettings)
    out: str = "runs/search"
    # fresh seeds (after the search's) on which the choice runs against the better parent,
    # paired; 0: no confirmation
    confirm: int = 50
    # every executed chunk of every candidate to <out>/chunks/<candidate>/ (training data for
    # `robocompose verifier`, at no extra episode)
    chunk_log: bool = False
    # who runs each round's episodes: local (this process) or ray (the round's candidates as
    # Ray tasks of launcher.episodes_per_task seeds, in parallel; launcher.address: a cluster)
    launcher: LauncherConfig = field(default_factory=LauncherConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.confirm < 0:
            raise ValueError(f"`confirm` must be >= 0 (0: none). Got {self.confirm}.")


def run(config: SearchConfig) -> SearchResult:
    """Search, then print the table, the parents' times, which candidate won and the files."""
    from robocompose.launch.launchers import connected

    with connected(config.launcher):  # one Ray for the search and its confirmation
        return _search_and_confirm(config)


def _search_and_confirm(config: SearchConfig) -> SearchResult:
    from robocompose.composition import search

    result = search(
        config.parents or config.parent_paths(),
        config.seeds(),
        out_dir=config.out,
        task=config.task.name,
        operators=config.search.operators,
        method=config.search.method,
        step=config.search.step,
        first_slice=config.search.first_slice,
        tolerance=config.search.tolerance,
        beat_parent_z=config.search.beat_parent_z,
        num_envs=config.num_envs,
        device=config.device,
        batch_invariant=config.batch_invariant,
        chunk_log=config.chunk_log,
        launcher=config.launcher,
        **config.composition.settings(),
    )
    print(result.table())
    if result.times is not None:
        print(result.times.summary())
    names = [p["name"] for p in result.provenance["parents"]]
    print(f"won: {result.chosen_kind}, {result.chosen_text(names)}")
    print(f"chosen {result.chosen}; {result.episodes_spent} episodes spent")
    if config.confirm:
        confirm(config, result)
    print(f"record: {Path(config.out) / 'search.json'}\nplot: {Path(config.out) / 'search.png'}")
    return result


def confirm(config: SearchConfig, result: SearchResult) -> dict[str, Any]:
    """The choice against the better parent on fresh seeds: printed, and saved in search.json
    under result.confirm."""
    from robocompose.compare import confirm_search
    from robocompose.composition.search_record import RECORD, seed_entry

    record = Path(config.out) / RECORD
    versus = confirm_search(
        record, config.confirm, out_dir=Path(config.out) / "confirm", launcher=config.launcher
    )
    if versus is None:
        print("confirm: the choice is the better parent alone; nothing to confirm")
        entry: dict[str, Any] = {"episodes": 0, "chosen_is_better_parent": True}
    else:
        seeds = seed_entry([r["seed"] for r in versus.results[0].records])
        print(f"confirm on {config.confirm} fresh seeds from {seeds['start']}: {versus}")
        entry = versus.to_dict() | {"episodes": config.confirm, "seeds": seeds}
    result.extra["confirm"] = entry
    result.save(record)
    return entry

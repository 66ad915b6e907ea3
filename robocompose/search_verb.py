"""`robocompose search [CKPT ...]`: test-time search of a composition's weights on a seed list
(`robocompose.composition.search`); prints the candidates' table and the choice, writes
`out/search.json` and `out/search.png`.

Light to import (the command line reads `SearchConfig` for `--help`); `run` imports the search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from robocompose.composition.weight_search import SearchSettings
from robocompose.rollout_config import RolloutConfig

if TYPE_CHECKING:
    from robocompose.composition.weight_search import SearchResult


@dataclass(kw_only=True)
class SearchConfig(RolloutConfig):
    """`robocompose search`: the weights of `composition.operator` (its `weights` are what the
    search finds; the other composition fields apply to every candidate)."""

    search: SearchSettings = field(default_factory=SearchSettings)
    out: str = "runs/search"


def run(config: SearchConfig) -> SearchResult:
    """Search, then print the table, the parents' times, which candidate won and the files."""
    from robocompose.composition import search

    result = search(
        config.parents or config.parent_paths(),
        config.seeds(),
        out_dir=config.out,
        task=config.task.name,
        operator=config.composition.operator,
        method=config.search.method,
        step=config.search.step,
        first_slice=config.search.first_slice,
        tolerance=config.search.tolerance,
        num_envs=config.num_envs,
        device=config.device,
        batch_invariant=config.batch_invariant,
        **config.composition.settings(),
    )
    print(result.table())
    if result.times is not None:
        print(result.times.summary())
    names = [p["name"] for p in result.provenance["parents"]]
    print(f"won: {result.chosen_kind}, {result.chosen_text(names)}")
    print(f"chosen {result.chosen}; {result.episodes_spent} episodes spent")
    print(f"record: {Path(config.out) / 'search.json'}\nplot: {Path(config.out) / 'search.png'}")
    return result

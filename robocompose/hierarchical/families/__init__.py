"""Benchmark families: instructions in many wordings, each with a scene, a seed and a gold answer.

    from robocompose.hierarchical.families import FAMILIES, family_items, make_world, unmet

    for item in family_items("test"):          # or "dev"; families=("swap",) to pick
        world = make_world(item)               # its env, arranged start, reset to item.seed
        ...                                    # plan and run item.instruction
        ok = item.feasible and not unmet(world, item.goal)

Families (>= 12 phrasings each per split): tower_three, tower_two (stack orders), rebuild (a
tower given at the start, rebuilt in another order), sort_distractor (sort with a bin no block
needs), named_bins (named blocks into named, non-matching bins), all_but_one, swap (two blocks
in a tower or between bins), conditional ("if red is on blue, ..."; the scene makes the
condition true or false), and infeasible (objects not in the scene, "put red on red",
contradictions, several possible goals, unreachable or unsafe goals: gold = refuse or ask).

The dev split (`dev.py`) is what prompts and few-shot examples may be tuned on; the test split
(`heldout.py`) is written once and never enters a prompt (tests check it). Modules: `base`
(facts, Scene, FamilyItem), `build` (the builders the phrasing files call), `check` (gold
against the world, outcomes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from robocompose.hierarchical.families import dev, heldout
from robocompose.hierarchical.families.base import (
    GOAL,
    REFUSE_OR_ASK,
    SPLITS,
    Fact,
    FamilyItem,
    Scene,
    fact_text,
)
from robocompose.hierarchical.families.check import OUTCOMES, FactView, holds, outcome, unmet

FAMILIES = tuple(dev.PHRASINGS)
FEASIBLE_FAMILIES = tuple(f for f in FAMILIES if f != "infeasible")
_SOURCES = {"dev": dev.PHRASINGS, "test": heldout.PHRASINGS}
_SEED_BASE = {"dev": 30_000, "test": 70_000}

__all__ = [
    "FAMILIES",
    "FEASIBLE_FAMILIES",
    "GOAL",
    "OUTCOMES",
    "REFUSE_OR_ASK",
    "Fact",
    "FactView",
    "FamilyItem",
    "Scene",
    "fact_text",
    "family_items",
    "holds",
    "make_world",
    "outcome",
    "unmet",
]


def family_items(split: str, families: Sequence[str] = FAMILIES) -> list[FamilyItem]:
    """Every item of `split` in the named families, family by family; seeds are fixed."""
    if split not in SPLITS:
        raise ValueError(f"`split` must be one of {SPLITS}. Got {split!r}.")
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown family {unknown[0]!r}; have {list(FAMILIES)}.")
    items = []
    for f, family in enumerate(FAMILIES):
        if family not in families:
            continue
        for k, spec in enumerate(_SOURCES[split][family]):
            seed = _SEED_BASE[split] + 100 * f + k
            items.append(FamilyItem(family, split, k, *spec[:2], seed, *spec[2:]))
    return items


def make_world(item: FamilyItem, **world_kwargs: Any) -> Any:
    """A SimWorld of the item's env and blocks, reset to its seed, its start facts arranged."""
    from robocompose.hierarchical.world import SimWorld

    world = SimWorld(item.scene.env, item.scene.env_kwargs(), **world_kwargs)
    world.reset(item.seed)
    if item.scene.start:
        world.arrange(item.scene.start)
    return world

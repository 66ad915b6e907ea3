"""The one loader of the benchmark's data files (`data/<collection>.yaml`, package data).

A dev or test file lists, per category, its `seed` and its `items`: entries in the shorthand
(`shorthand.py`). The long-horizon file lists, per category, its `seed`, its `instructions`
(templates, `templates.py`) and the scenes they are cycled over: one Stack `scene` and its tower
`orders`, or SortBins `scenes`. Item k of a category has seed `seed` + k. Bad data fails with an
`InstructionDataError` naming the file, the entry and the field.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from robocompose.hierarchical.instructions.items import COLLECTIONS, InstructionItem, Scene
from robocompose.hierarchical.instructions.shorthand import (
    FieldError,
    colours,
    gold,
    make_scene,
    parse_scene,
    sorted_facts,
    tower_facts,
)
from robocompose.hierarchical.instructions.templates import SORT_SLOTS, STACK_SLOTS, needs, render

DATA = Path(__file__).with_name("data")


class InstructionDataError(ValueError):
    """A data file that does not say an item: `where` is the file, the entry and the field."""


def instruction_items(
    collection: str, categories: Sequence[str] | None = None
) -> list[InstructionItem]:
    """Every item of `collection` ("dev", "test" or "long_horizon") in the named categories
    (None: all), in the file's order; seeds are fixed per item."""
    items = _collection(collection)
    if categories is None:
        return list(items)
    have = category_names(collection)
    unknown = [c for c in categories if c not in have]
    if unknown:
        raise ValueError(f"unknown {collection} category {unknown[0]!r}; have {list(have)}.")
    return [item for item in items if item.category in categories]


def category_names(collection: str, feasible_only: bool = False) -> tuple[str, ...]:
    """The collection's categories in the file's order (`feasible_only`: those with a goal)."""
    items = _collection(collection)
    return tuple(dict.fromkeys(i.category for i in items if i.feasible or not feasible_only))


def with_order(
    item: InstructionItem, order: Sequence[str], reword: bool = False
) -> InstructionItem:
    """A stacking item with another tower `order` (bottom to top): its scene's order and its
    goal; `reword`: its instruction rendered again from its template for that order."""
    if not item.scene.order:
        raise ValueError(f"{item.key} is no stacking item; `order` applies to stacking only.")
    order = tuple(order)
    scene = make_scene("order", **{**_fields(item.scene), "order": order})
    instruction = item.instruction
    if reword:
        data = _read(DATA / f"{item.collection}.yaml")
        template = data["categories"][item.category]["instructions"][item.index]
        field = f"categories.{item.category}.instructions[{item.index}]"
        words = data.get("other_words", {})
        instruction = render(template, order, STACK_SLOTS, words, field)
    return dataclasses.replace(item, scene=scene, goal=tower_facts(order), instruction=instruction)


def _fields(scene: Scene) -> dict[str, Any]:
    return {f.name: getattr(scene, f.name) for f in dataclasses.fields(scene)}


@functools.cache
def _collection(collection: str) -> tuple[InstructionItem, ...]:
    if collection not in COLLECTIONS:
        raise ValueError(f"`collection` must be one of {COLLECTIONS}. Got {collection!r}.")
    return read_items(DATA / f"{collection}.yaml", collection)


@functools.cache
def _read(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise InstructionDataError(f"{path}: not YAML: {error}") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("categories"), Mapping):
        raise InstructionDataError(f"{path}: needs a `categories` mapping at the top.")
    return dict(data)


def read_items(path: Path, collection: str) -> tuple[InstructionItem, ...]:
    """The items a data file says, category by category."""
    data = _read(Path(path))
    words = data.get("other_words", {})
    items: list[InstructionItem] = []
    for category, spec in data["categories"].items():
        where = f"categories.{category}"
        try:
            if not isinstance(spec, Mapping) or not isinstance(spec.get("seed"), int):
                raise FieldError("seed", "every category needs an integer `seed`.")
            if "items" in spec:
                items += _entries(path, collection, category, spec)
            else:
                items += _templated(collection, category, spec, words)
        except FieldError as error:
            raise InstructionDataError(f"{path}: {where}: `{error.field}` {error}") from None
    return tuple(items)


def _entries(
    path: Path, collection: str, category: str, spec: Mapping[str, Any]
) -> list[InstructionItem]:
    out = []
    for k, entry in enumerate(spec["items"]):
        text = entry.get("instruction") if isinstance(entry, Mapping) else None
        try:
            if not isinstance(text, str) or not text.strip():
                raise FieldError("instruction", "is missing or empty.")
            found = gold(entry)
        except FieldError as error:
            said = f" ({text!r})" if isinstance(text, str) else ""
            raise InstructionDataError(
                f"{path}: categories.{category}.items[{k}]{said}: `{error.field}` {error}"
            ) from None
        seed = spec["seed"] + k
        out.append(InstructionItem(collection, category, k, text, found.scene, seed, found.goal,
                                   found.expect, found.why))  # fmt: skip
    return out


def _templated(
    collection: str, category: str, spec: Mapping[str, Any], words: Mapping[str, str]
) -> list[InstructionItem]:
    """A stacking category (`scene`, `orders`) or a sorting one (`scenes`)."""
    templates = spec.get("instructions")
    if not isinstance(templates, list) or not all(isinstance(t, str) for t in templates):
        raise FieldError("instructions", "must be a list of instruction templates.")
    out = []
    if "orders" in spec:
        scene = parse_scene(spec.get("scene"))
        orders = [colours(o, f"orders[{i}]") for i, o in enumerate(spec["orders"])]
        for k, template in enumerate(templates):
            field = f"instructions[{k}]"
            order = orders[k % len(orders)]
            placed = make_scene(f"orders[{k % len(orders)}]", **{**_fields(scene), "order": order})
            needs(template, STACK_SLOTS, field)
            text = render(template, order, STACK_SLOTS, words, field)
            out.append(InstructionItem(collection, category, k, text, placed, spec["seed"] + k,
                                       tower_facts(order)))  # fmt: skip
        return out
    if "scenes" not in spec:
        raise FieldError("items | orders | scenes", "a category needs one of these.")
    scenes = [parse_scene(s, f"scenes[{i}]") for i, s in enumerate(spec["scenes"])]
    for k, template in enumerate(templates):
        field = f"instructions[{k}]"
        count = needs(template, SORT_SLOTS, field)
        fits = [s for s in scenes if len(s.blocks) >= count]
        if not fits:
            raise FieldError(field, f"names {count} blocks; no scene has that many.")
        scene = fits[k % len(fits)]
        text = render(template, scene.blocks, SORT_SLOTS, words, field)
        out.append(InstructionItem(collection, category, k, text, scene, spec["seed"] + k,
                                   sorted_facts(scene.blocks)))  # fmt: skip
    return out

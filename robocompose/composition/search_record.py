"""search.json: what a search runs on, written before its first episode.

Episode files in `<out_dir>/episodes/` are named by operator and weights only, so a second search
into the same folder with other parents, another task or other composition settings would read
the first one's episodes as its own. The record is written when a search starts and checked when
one reruns into a folder holding its episodes: a rerun that would change what they mean is
refused, naming what differs (a search stopped before its first episode binds nothing). The
seeds, method, grid step, operators searched and device may change (a rerun resumes, extends or
narrows the search: a file's name says its operator and weights), and so may num_envs while
episodes are batch invariant.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from robocompose.composition.config import CompositionConfig
from robocompose.composition.weight_search import SearchSettings
from robocompose.policies.base import GenerativePolicy
from robocompose.sim.tasks import TaskSpec

RECORD = "search.json"
# what decides the outcome of an episode file: a rerun into the folder must match these
BINDING = ("task", "parents", "composition", "batching")


class SearchRecordError(ValueError):
    """A search folder that holds another search."""


def parent_entry(given: Any, policy: GenerativePolicy) -> dict[str, Any]:
    """A parent as given (a checkpoint folder, or None for a policy passed loaded), its name
    (the checkpoint folder's) and its fingerprint (config, normalisers, weights), which is what
    a rerun is checked against."""
    path = None if isinstance(given, GenerativePolicy) else str(given)
    folder = (
        path
        or getattr(policy, "checkpoint_dir", None)
        or policy.metadata.get("train", {}).get("out")
    )
    name = Path(folder).name if folder else "policy"
    return {"name": name, "path": path, "fingerprint": policy.fingerprint()}


def seed_entry(seeds: Sequence[int]) -> dict[str, Any]:
    """A consecutive run of seeds as its start and count, any other list in full."""
    seeds = list(seeds)
    if seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return {"start": seeds[0], "count": len(seeds)}
    return {"list": seeds, "count": len(seeds)}


def provenance(
    task: TaskSpec,
    parents: Iterable[tuple[Any, GenerativePolicy]],
    composition: CompositionConfig,
    settings: SearchSettings,
    seeds: Sequence[int],
    *,
    num_envs: int | None,
    device: str,
    batch_invariant: bool,
) -> dict[str, Any]:
    """Everything a search's episodes and choice depend on, and where it ran.

    `parents`: (as given, loaded) pairs; `composition`: the settings every candidate shares
    (its operator and weights are not recorded: each candidate has its own, and the methods
    searched are `settings.operators`)."""
    shared = composition.as_record()
    entries = [parent_entry(given, policy) for given, policy in parents]
    return {
        "robocompose": metadata.version("robocompose"),
        "task": {"name": task.name, "env_id": task.env_id},
        "parents": entries,
        "composition": {k: v for k, v in shared.items() if k not in ("operator", "weights")},
        "search": {**dataclasses.asdict(settings), "step": settings.grid_step(len(entries))},
        "seeds": seed_entry(seeds),
        "num_envs": num_envs,
        "device": device,
        "batch_invariant": batch_invariant,
    }


def _binding(record: dict[str, Any]) -> dict[str, Any]:
    parents = [p["fingerprint"] for p in record.get("parents", [])]
    return {
        "task": record.get("task", {}).get("env_id"),
        "parents": parents,
        "composition": record.get("composition"),
        "batching": _batching(record),
    }


def _batching(record: dict[str, Any]) -> str:
    """Batch-invariant episodes do not depend on num_envs; batched ones do."""
    if record.get("batch_invariant", True):
        return "one batch per episode"
    return f"{record.get('num_envs')} envs in one batch"


def _describe(key: str, record: dict[str, Any]) -> str:
    if key == "parents":
        return ", ".join(f"{p['name']} ({p['fingerprint']})" for p in record.get("parents", []))
    if key == "task":
        return str(record.get("task", {}).get("name"))
    if key == "composition":
        return json.dumps(record.get("composition"), sort_keys=True)
    if key == "batching":
        return _batching(record)
    return repr(record.get(key))


def _episodes_of(path: Path) -> list[Path]:
    """The candidates' episode files next to the record at `path`, whatever method or parent
    wrote them (a search stopped before its first episode left none, and binds nothing)."""
    return [f for f in (path.parent / "episodes").glob("*.jsonl") if f.stat().st_size > 0]


def start(folder: str | os.PathLike[str], record: dict[str, Any]) -> Path:
    """Write `folder`/search.json for a search about to run; refuse a folder whose episodes
    belong to another search."""
    path = Path(folder) / RECORD
    if path.exists() and _episodes_of(path):
        try:
            saved = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise SearchRecordError(
                f"{path} is not valid JSON ({e}); delete it only if {path.parent} holds no "
                "episodes of another search, or use another out_dir."
            ) from None
        if "parents" not in saved:
            raise SearchRecordError(
                f"{path} was written by a robocompose that did not record the parents, so "
                f"whose episodes {path.parent} holds is unknown; use another out_dir."
            )
        before, now = _binding(saved), _binding(record)
        differ = [k for k in BINDING if before[k] != now[k]]
        if differ:
            lines = "; ".join(
                f"{k}: {_describe(k, saved)} there, {_describe(k, record)} now" for k in differ
            )
            raise SearchRecordError(
                f"{path.parent} holds a search of other {', '.join(differ)} ({lines}). Its "
                "episode files would be read as this search's: use another out_dir, or rerun "
                "with the same parents, task, composition settings and batching."
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**record, "status": "running"}, indent=2) + "\n")
    return path

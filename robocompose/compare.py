"""Two policies on the same seeds: each one's success, where each succeeds alone, and the paired
difference. Before a search it says whether a pair has anything to gain: a composition can only
win on seeds where one parent succeeds and the other fails; after one, whether its choice holds
against the better parent on fresh seeds (`confirm_search`).

    from robocompose.compare import compare
    print(compare("Stack_diffusion_mlp", "Stack_flow_mlp",
                  range(100_000, 100_100), out_dir="runs/compare").table())

`robocompose compare A B` (`robocompose.verbs.compare`) parses A and B as candidate specs
(`CandidateSpec`): a checkpoint folder, `OPERATOR:WEIGHTS:CKPT,CKPT` or a search's record.
Light to import: `compare` imports the rollout when it runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robocompose.records import EvalResult, is_success
from robocompose.shipped import checkpoint_folder
from robocompose.stats import PairedOutcomes, paired_outcomes

if TYPE_CHECKING:
    from robocompose.evaluation import PolicyLike
    from robocompose.launch.config import LauncherConfig
    from robocompose.launch.episodes import PolicyRecipe

SEARCH_RECORD = "search.json"  # robocompose.composition.search_record.RECORD, without torch


@dataclass(frozen=True)
class CandidateSpec:
    """A candidate written as text: a checkpoint folder; `OPERATOR:WEIGHTS:CKPT,CKPT` (e.g.
    `convex:0.6,0.4:ckpt/a,ckpt/b`, that composition at the operator's defaults); or a search's
    record (search.json or its folder): the candidate the search chose, with its settings."""

    parents: tuple[str, ...]  # checkpoint folders; one and no operator: that checkpoint alone
    operator: str | None = None
    weights: tuple[float, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)  # other CompositionConfig fields

    @classmethod
    def parse(cls, spec: str) -> CandidateSpec:
        path = Path(spec)
        if path.is_dir() and (path / SEARCH_RECORD).is_file():
            path = path / SEARCH_RECORD
        if path.name == SEARCH_RECORD or path.suffix == ".json":
            return cls.chosen_by(path)
        if checkpoint_folder(spec).is_dir():
            return cls((spec,))
        parts = spec.split(":", 2)
        if len(parts) != 3:
            raise FileNotFoundError(
                f"candidate {spec!r} is neither a checkpoint (a folder or a shipped name), a "
                "search.json nor OPERATOR:WEIGHTS:CKPT,CKPT (e.g. convex:0.6,0.4:ckpt/a,ckpt/b)."
            )
        operator, weights, parents = parts
        try:
            numbers = tuple(float(w) for w in weights.split(","))
        except ValueError:
            raise ValueError(
                f"candidate {spec!r}: WEIGHTS must be numbers joined by ',', e.g. 0.6,0.4."
            ) from None
        folders = tuple(parents.split(","))
        missing = [f for f in folders if not checkpoint_folder(f).is_dir()]
        if missing:
            raise FileNotFoundError(f"candidate {spec!r}: no checkpoint folder {missing[0]}.")
        return cls(folders, operator, numbers)

    @classmethod
    def chosen_by(cls, record_path: Path) -> CandidateSpec:
        """The candidate the search recorded at `record_path` chose: a parent alone, or the
        chosen method (`chosen_operator`; a record older than it searched its one `operator`)
        at its weights."""
        record = read_search(record_path)
        result, parents = record["result"], search_parents(record_path, record)
        if result["chosen_kind"] == "parent_native":
            return cls((parents[result["chosen"].index(1.0)],))
        operator = result.get("chosen_operator") or record["operator"]
        weights = tuple(result["chosen"])
        return cls(tuple(parents), operator, weights, record["composition"])

    def label(self) -> str:
        """The folder's name of a checkpoint, else the composition's candidate label."""
        if self.operator is None:
            return Path(self.parents[0]).name
        from robocompose.composition.api import candidate_label

        return candidate_label(self.operator, self.weights)

    def policy(self) -> PolicyLike:
        """The checkpoint folder (evaluate loads it), or the composition built."""
        if self.operator is None:
            return self.parents[0]
        from robocompose.composition.api import compose, load

        parents = [load(p) for p in self.parents]
        return compose(parents, self.operator, self.weights, **self.settings)

    def parent_paths(self) -> list[Path]:
        """Its checkpoint folders: with `policy` and `on_parents`, a `PolicyRecipe`, so a Ray
        worker builds it."""
        return [checkpoint_folder(p).resolve() for p in self.parents]

    def on_parents(self, paths: list[str]) -> CandidateSpec:
        return replace(self, parents=tuple(paths))


def read_search(path: Path) -> dict[str, Any]:
    """A finished search's record, or a one-line error naming the file."""
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"no search record {path}.") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON ({e}).") from None
    if record.get("status") != "done" or "result" not in record:
        status = record.get("status")
        raise ValueError(f"{path} holds an unfinished search (status {status!r}); rerun it.")
    return record


def search_parents(path: Path, record: dict[str, Any]) -> list[str]:
    """The parents' checkpoint folders a search recorded (passed loaded: none to name)."""
    folders = [p.get("path") for p in record.get("parents", [])]
    if not folders or None in folders:
        raise ValueError(
            f"{path} does not name its parents' checkpoint folders (they were passed to "
            "`search` loaded); compare the composition as OPERATOR:WEIGHTS:CKPT,CKPT instead."
        )
    return folders


def better_parent(path: Path) -> CandidateSpec:
    """The parent that did best alone on a search's seeds (mean score breaks a tie)."""
    record = read_search(path)
    natives = [c for c in record["result"]["candidates"] if c["kind"] == "parent_native"]
    best = max(natives, key=lambda c: (c["success"], c["mean_score"]))
    return CandidateSpec((search_parents(path, record)[best["weights"].index(1.0)],))


def fresh_seeds(record: dict[str, Any], count: int) -> list[int]:
    """`count` seeds right after the last one a search ran on."""
    seeds = record["seeds"]
    last = max(seeds["list"]) if "list" in seeds else seeds["start"] + seeds["count"] - 1
    return list(range(last + 1, last + 1 + count))


@dataclass(frozen=True, repr=False)
class Comparison:
    """Two policies' results on the same seeds, paired seed by seed; printed, a summary."""

    labels: tuple[str, str]
    results: tuple[EvalResult, EvalResult]
    paired: PairedOutcomes

    def summary(self) -> str:
        """One line: each one's success and the paired difference."""
        (a, b), (ra, rb) = self.labels, self.results
        return f"{a} {ra.success} vs {b} {rb.success}: {a} - {b} {self.paired}"

    def __repr__(self) -> str:
        return f"Comparison({self.summary()})"

    __str__ = summary

    @property
    def oracle(self) -> float:
        """The rate of a policy that always picked the parent that succeeds on each seed: what a
        composition of the two could reach if it did no more than choose well."""
        p = self.paired
        return (p.both + p.only_a + p.only_b) / p.episodes

    def table(self) -> str:
        (a, b), p = self.labels, self.paired
        rows = [
            "| policy | success [95% CI] | episodes |",
            "|---|---|---|",
            *(
                f"| {label} | {r.success.format(episodes=False)} | {r.episodes} |"
                for label, r in zip(self.labels, self.results, strict=True)
            ),
            "",
            f"| only {a} | only {b} | both | neither |",
            "|---|---|---|---|",
            f"| {p.only_a} | {p.only_b} | {p.both} | {p.neither} |",
            "",
            f"{a} - {b}: {p}",
            f"either succeeds (a per-seed oracle picking the right one): {100 * self.oracle:.1f}%",
        ]
        return "\n".join(rows)

    def to_dict(self) -> dict[str, Any]:
        p = self.paired
        return {
            "labels": list(self.labels),
            "rows": [r.row() for r in self.results],
            "only_a": p.only_a,
            "only_b": p.only_b,
            "both": p.both,
            "neither": p.neither,
            "difference": p.difference,
            "ci_low": p.ci_low,
            "ci_high": p.ci_high,
            "oracle": self.oracle,
        }


def compare(
    a: PolicyLike | PolicyRecipe,
    b: PolicyLike | PolicyRecipe,
    seeds: Iterable[int],
    *,
    out_dir: str | os.PathLike[str] | None = None,
    labels: tuple[str, str] | None = None,
    launcher: LauncherConfig | None = None,
    **evaluate_kwargs: Any,
) -> Comparison:
    """Evaluate `a` and `b` on the same `seeds` (into out_dir/<label>.jsonl, resumable) and pair
    their outcomes seed by seed; `evaluate_kwargs` go to `robocompose.evaluation.evaluate`.
    `launcher`: who runs the episodes (`robocompose.launch.episodes.evaluate_runs`; on Ray `a`
    and `b` are checkpoint folders or recipes, such as a `CandidateSpec`)."""
    from robocompose.launch.episodes import Run, evaluate_runs

    if _same_policy(a, b):
        raise ValueError(
            f"compare runs two different policies; both are {a if _is_path(a) else 'one object'} "
            "(a policy against itself differs nowhere)."
        )
    seeds = list(seeds)
    labels = labels or tuple(_label(p, i) for i, p in enumerate((a, b)))  # type: ignore[assignment]
    if labels[0] == labels[1]:
        labels = (f"{labels[0]} (A)", f"{labels[1]} (B)")
    runs = [
        Run(policy, seeds, Path(out_dir) / f"{label}.jsonl" if out_dir is not None else None, label)
        for policy, label in zip((a, b), labels, strict=True)
    ]
    results = evaluate_runs(runs, launcher, **evaluate_kwargs)
    outcomes = [[is_success(r["success"]) for r in result.records] for result in results]
    return Comparison(labels, results, paired_outcomes(*outcomes))  # type: ignore[arg-type]


def confirm_search(
    record_path: str | os.PathLike[str],
    episodes: int,
    *,
    out_dir: str | os.PathLike[str],
    launcher: LauncherConfig | None = None,
) -> Comparison | None:
    """A finished search's choice against its better parent on `episodes` fresh seeds (the
    ones after the search's), paired, as the search ran (envs, device, batching; `launcher`
    runs the episodes). None when the choice is that parent alone: the two differ nowhere. The
    search's own seeds flatter its choice (it won there); fresh ones say whether it holds."""
    path = Path(record_path)
    record = read_search(path)
    chosen, parent = CandidateSpec.chosen_by(path), better_parent(path)
    if chosen == parent:
        return None
    return compare(
        chosen,
        parent,
        fresh_seeds(record, episodes),
        out_dir=out_dir,
        labels=(chosen.label(), parent.label()),
        launcher=launcher,
        num_envs=record.get("num_envs"),
        device=record.get("device", "auto"),
        batch_invariant=record.get("batch_invariant", True),
    )


def _label(policy: PolicyLike | PolicyRecipe, index: int) -> str:
    if isinstance(policy, str | os.PathLike):
        return Path(policy).name
    folder = getattr(policy, "checkpoint_dir", None)
    return Path(folder).name if folder else "AB"[index]


def _is_path(policy: PolicyLike | PolicyRecipe) -> bool:
    return isinstance(policy, str | os.PathLike)


def _same_policy(a: PolicyLike | PolicyRecipe, b: PolicyLike | PolicyRecipe) -> bool:
    """One checkpoint folder named twice (however spelt), or one object passed twice."""
    if _is_path(a) and _is_path(b):
        return checkpoint_folder(a).resolve() == checkpoint_folder(b).resolve()  # type: ignore[arg-type]
    return a is b

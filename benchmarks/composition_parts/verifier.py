"""Verifier (`--parts verifier`, per task `selector`): the selector driven by a chunk verifier
learned from the search's own rollouts, refined by rounds of its own episodes, measured on fresh
seeds against the better parent and the per-seed oracle.

Three disjoint seed ranges per task:
1. search seeds (SEED_START...): the search P1 measures (`search_folder`, shared with
   `--parts quality`) races every searchable operator and each parent alone,
   logging every executed chunk; those episodes train the first verifier. The search's choice
   (P1 with the whole pool) is measured on the fresh seeds below.
2. round seeds (ROUND_SEED_START...): each round the selector, by the newest verifier, plays new
   seeds with chunk logs, and a verifier is trained again on every log so far (the selector
   visits states the search's candidates did not).
3. fresh seeds (HELDOUT_SEED_START...): the parents, the searched choice and the selector by the
   last verifier, each paired seed by seed against the better parent there;
   oracle_gap_closed = (selector - better) / (oracle - better).

The selector's composed candidate is the search's best composition (its operator and weights).
Everything resumes: the search's and each round's episodes and chunk logs are on disk, a
verifier file already written is kept.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path

import numpy as np
from common import ROOT, ResultsFile, cpu_model

from robocompose.chunk_log import COMPOSITION, episode_files, read_episode
from robocompose.compare import compare
from robocompose.composition.api import candidate_label, compose
from robocompose.composition.verifier import Verifier, load_verifier
from robocompose.composition.verifier_training import train_verifier
from robocompose.evaluation import evaluate

from .quality import _candidate_fresh, _candidate_of, _composition_entry
from .selector import selector_headlines
from .shared import (
    HELDOUT_SEED_START,
    OUT,
    SEED_START,
    paired_entry,
    parents_of,
    pick_best,
    search_folder,
    task_search,
)

ROUND_SEED_START = 200_000  # the verifier's rounds: neither search nor fresh seeds
HALF = 0.5  # `oracle_gap_half_tasks`: tasks whose selector closes at least this share
COUNTERFACTUAL = ResultsFile("counterfactual.json")  # read only: its labels' AUCs


def _verifier(logs: list[Path], out: Path) -> Verifier:
    """Train on `logs` into `out` unless that file is there; the verifier as saved (its
    training report in `header["report"]`)."""
    if not out.is_file():
        report = train_verifier(logs, out)
        print(f"verifier {out.name}: {report.summary()}", flush=True)
    return load_verifier(out)


def verifier_selector(
    task: str,
    search_episodes: int,
    rounds: int,
    round_episodes: int,
    fresh_episodes: int,
    first_slice: int,
    std_weight: float,
    margin: float = 0.0,
) -> dict:
    """The pipeline above for one task; its stored entry. With `margin` > 0 the selector keeps
    the composed candidate unless the verifier rates another more than `margin` above it (its
    rounds play, and its verifiers train, in a folder of their own)."""
    parents, names = parents_of(task)
    folder = OUT / task / ("verifier" if margin == 0 else f"verifier_margin{margin:g}")
    found = task_search(task, parents, search_episodes, first_slice)
    print(f"{task} search over every operator:\n{found.table()}", flush=True)
    composed = found.best_composed
    settings = {
        "selector_composition": composed.operator,
        "selector_score": "verifier",
        "verifier_std_weight": std_weight,
        "selector_margin": margin,
    }
    logs = [search_folder(task) / "chunks"]
    trained = [_verifier(logs, folder / "round0.safetensors")]
    round_rows = []
    for r in range(1, rounds + 1):
        start = ROUND_SEED_START + (r - 1) * round_episodes
        seeds = list(range(start, start + round_episodes))
        policy = compose(
            parents,
            "selector",
            composed.weights,
            verifier=str(folder / f"round{r - 1}.safetensors"),
            **settings,
        )
        played = folder / f"round{r}"
        result = evaluate(
            policy,
            seeds,
            out=played / "episodes.jsonl",
            chunk_log=played / "chunks",
            progress=False,
        )
        print(f"{task} round {r} selector: {result.summary()}", flush=True)
        round_rows.append({"round": r, "seeds": {"start": start, "episodes": len(seeds)}})
        round_rows[-1] |= result.row() | {"composed_share": composed_share(played / "chunks")}
        logs.append(played / "chunks")
        trained.append(_verifier(logs, folder / f"round{r}.safetensors"))

    fresh_seeds = list(range(HELDOUT_SEED_START, HELDOUT_SEED_START + fresh_episodes))
    fresh_dir = OUT / task / "fresh"
    on_fresh = compare(*parents, fresh_seeds, out_dir=fresh_dir, labels=tuple(names))
    rows = {n: r.row() for n, r in zip(names, on_fresh.results, strict=True)}
    better = pick_best(rows)
    final = folder / f"round{rounds}.safetensors"
    selector = compose(parents, "selector", composed.weights, verifier=str(final), **settings)
    label = f"{candidate_label('selector', composed.weights)}_verifier_r{rounds}"
    label += f"_margin{margin:g}" if margin else ""
    pair = compare(
        selector,
        parents[names.index(better)],
        fresh_seeds,
        out_dir=fresh_dir,
        labels=(label, better),
    )
    print(f"{task} fresh selector - {better}: {pair.paired.format()}", flush=True)
    candidate = _candidate_of(found, names)
    chosen_fresh = _candidate_fresh(candidate, parents, names, better, on_fresh, fresh_dir)
    print(f"{task} fresh search choice - {better}: {chosen_fresh['formatted']}", flush=True)
    against_composed = compare(
        selector,
        compose(parents, composed.operator, composed.weights),
        fresh_seeds,
        out_dir=fresh_dir,
        labels=(label, composed.label),
    )
    print(f"{task} fresh selector - {composed}: {against_composed.paired.format()}", flush=True)
    success, oracle = pair.results[0].row()["success"], on_fresh.oracle
    base = rows[better]["success"]
    return {
        "method": (
            f"selector (verifier after {rounds} rounds, lower bound k={std_weight}, margin "
            f"{margin:g}; "
            f"{selector.config.selector_samples} native samples per parent + {composed.operator} "
            f"{list(composed.weights)})"
        ),
        "seeds": {"start": fresh_seeds[0], "episodes": len(fresh_seeds)},
        "better_parent": better,
        "composed_candidate": _composition_entry(composed),
        "cpu": cpu_model(),  # episodes follow the CPU's float path: Intel and AMD runs differ
        **pair.results[0].row(),
        "minus_better_parent": paired_entry(pair),
        # what the verifier adds to the composition it draws from: the selector against that
        # composition alone, paired on the same fresh seeds
        "minus_composed_candidate": paired_entry(against_composed),
        "selector_margin": margin,
        "oracle": oracle,
        "oracle_gap_closed": (success - base) / (oracle - base) if oracle > base else None,
        "verifier": {
            "file": os.path.relpath(final, ROOT),
            "digest": trained[-1].digest,
            "search_seeds": {"start": SEED_START, "episodes": search_episodes},
            "rounds": round_rows,
            "training": [v.header["report"] for v in trained],
        },
        "search_all_operators": {
            "operators": found.provenance["search"]["operators"],
            "chosen": candidate,
            "episodes_spent": found.episodes_spent,
            "fresh_minus_better_parent": chosen_fresh,
        },
    }


def composed_share(chunks: Path) -> float:
    """The share of a selector's executed chunks that were its composed candidate's."""
    sources = [read_episode(path).source for path in episode_files([chunks])]
    return float(np.mean(np.concatenate(sources) == COMPOSITION))


def store_verifier_selector(results: dict, task: str, entry: dict) -> None:
    """The learned selector becomes the task's `selector` (the training-free run it replaces
    moves to `selector_by_score.agreement`, a learned one at another margin to
    `selector_by_margin.<margin>`); then the headlines."""
    row = results.setdefault("quality", {}).setdefault(task, {})
    previous = row.get("selector")
    if previous is not None and "verifier" not in previous:
        row.setdefault("selector_by_score", {})["agreement"] = previous
    elif previous is not None:
        margin = previous.get("selector_margin", 0.0)
        if margin != entry["selector_margin"]:
            row.setdefault("selector_by_margin", {})[f"{margin:g}"] = previous
    row["selector"] = entry
    verifier_headlines(results)


def counterfactual_auc(labelled: dict, verifier: dict) -> float | None:
    """The AUC of `verifier` on a task's counterfactual labels (`labelled`: its entry of
    counterfactual.json, from benchmarks/counterfactual.py --verifier), when those labels were
    scored by that very verifier: the same file with the same contents (a rerun retrains into
    the same path). An entry stored before digests were kept is matched by its path."""
    scored_by = labelled.get("verifier", {})
    digests = {scored_by.get("digest"), verifier.get("digest")} - {None}
    same = scored_by.get("file") == verifier["file"] and len(digests) <= 1
    return labelled.get("verifier_auc_counterfactual") if same else None


def verifier_headlines(results: dict) -> None:
    """Every task's learned selector with its verifier's counterfactual AUC, then the
    headlines over the tasks: the shares of the oracle gap and the mean gain."""
    labelled = COUNTERFACTUAL.read().get("tasks", {})
    for task, row in results.get("quality", {}).items():
        for selector in [row.get("selector", {}), *row.get("selector_by_margin", {}).values()]:
            if "verifier" in selector:
                auc = counterfactual_auc(labelled.get(task, {}), selector["verifier"])
                selector["verifier_auc_counterfactual"] = auc
    selector_headlines(results)
    shares = {
        t: r["selector"].get("oracle_gap_closed")
        for t, r in results["quality"].items()
        if "selector" in r
    }
    results["oracle_gap_half_tasks"] = sorted(
        t for t, s in shares.items() if s is not None and s >= HALF
    )
    selectors = [r.get("selector", {}) for r in results["quality"].values()]
    learned = [s for s in selectors if "verifier" in s]
    if learned:
        results["selector_verifier_mean_delta_pts"] = 100 * statistics.mean(
            r["minus_better_parent"]["difference"] for r in learned
        )

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
verifier file already written is kept. A rounds folder notes what it was made for (its
`made_for.json`: the search's seeds and episodes, the composed candidate), so a rerun after
another search stops with a clear error instead of reusing rounds and verifiers of the old one.
"""

from __future__ import annotations

import argparse
import os
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from common import ROOT, ResultsFile, cpu_model

from robocompose.chunk_log import COMPOSITION, episode_files, read_episode
from robocompose.compare import compare
from robocompose.composition.api import candidate_label, compose
from robocompose.composition.verifier import Verifier, load_verifier
from robocompose.composition.verifier_training import train_verifier
from robocompose.composition.weight_search import SearchResult
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


def _claim(folder: Path, made_for: dict) -> None:
    """Mark `folder` as holding the rounds of `made_for`'s search and composed candidate, or stop
    if it holds another's: its verifiers were trained on that search's chunks, and its round
    episodes were played with that candidate."""
    stamp = ResultsFile("made_for.json", writer="verifier.py", folder=folder)
    held = stamp.read()
    if held and held != made_for:
        raise SystemExit(
            f"{folder} holds the rounds of another search ({held}), not of this one "
            f"({made_for}): move that folder aside to train this search's verifier"
        )
    if not held:
        stamp.write(made_for)


@dataclass(frozen=True)
class SelectorPair:
    """Where one parent pair's learned selector reads and writes: its search (run with chunk
    logs, which train the first verifier), the folder of its rounds and verifiers, and the fresh
    seeds it is measured on. `tag` prefixes its compositions' episode files where several pairs
    share one fresh folder; `name` heads its log lines."""

    name: str
    parents: list
    names: list[str]
    found: SearchResult
    search_chunks: Path
    search_seeds: list[int]
    folder: Path
    fresh_seeds: list[int]
    fresh_dir: Path
    tag: str = ""


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
    """The pipeline above for one of our tasks; its stored entry. A run at `margin` > 0 plays
    its rounds, and trains its verifiers, in a folder of its own."""
    parents, names = parents_of(task)
    found = task_search(task, parents, search_episodes, first_slice)
    print(f"{task} search over every operator:\n{found.table()}", flush=True)
    pair = SelectorPair(
        name=task,
        parents=parents,
        names=names,
        found=found,
        search_chunks=search_folder(task) / "chunks",
        search_seeds=list(range(SEED_START, SEED_START + search_episodes)),
        folder=OUT / task / ("verifier" if margin == 0 else f"verifier_margin{margin:g}"),
        fresh_seeds=list(range(HELDOUT_SEED_START, HELDOUT_SEED_START + fresh_episodes)),
        fresh_dir=OUT / task / "fresh",
    )
    return learned_selector(pair, rounds, round_episodes, std_weight, margin)


def learned_selector(
    pair: SelectorPair, rounds: int, round_episodes: int, std_weight: float, margin: float
) -> dict:
    """Train on the search's chunks, refine by `rounds` rounds of the selector's own episodes
    (ROUND_SEED_START...), then measure the last verifier's selector on the fresh seeds against
    the better parent, the search's choice and its composed candidate alone. With `margin` > 0
    the composed candidate runs unless the verifier rates another more than `margin` above it."""
    parents, names, found, folder = pair.parents, pair.names, pair.found, pair.folder
    composed = found.best_composed
    settings = {
        "selector_composition": composed.operator,
        "selector_score": "verifier",
        "verifier_std_weight": std_weight,
        "selector_margin": margin,
    }
    made_for = {
        "search_seeds": {"start": pair.search_seeds[0], "episodes": len(pair.search_seeds)},
        "search_episodes": found.episodes_spent,
        "composed_candidate": composed.label,
    }
    _claim(folder, made_for)
    logs = [pair.search_chunks]
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
        print(f"{pair.name} round {r} selector: {result.summary()}", flush=True)
        round_rows.append({"round": r, "seeds": {"start": start, "episodes": len(seeds)}})
        round_rows[-1] |= result.row() | {"composed_share": composed_share(played / "chunks")}
        logs.append(played / "chunks")
        trained.append(_verifier(logs, folder / f"round{r}.safetensors"))

    fresh_seeds, fresh_dir = pair.fresh_seeds, pair.fresh_dir
    on_fresh = compare(*parents, fresh_seeds, out_dir=fresh_dir, labels=tuple(names))
    rows = {n: r.row() for n, r in zip(names, on_fresh.results, strict=True)}
    better = pick_best(rows)
    final = folder / f"round{rounds}.safetensors"
    selector = compose(parents, "selector", composed.weights, verifier=str(final), **settings)
    label = f"{pair.tag}{candidate_label('selector', composed.weights)}_verifier_r{rounds}"
    label += f"_margin{margin:g}" if margin else ""
    versus_better = compare(
        selector,
        parents[names.index(better)],
        fresh_seeds,
        out_dir=fresh_dir,
        labels=(label, better),
    )
    print(f"{pair.name} fresh selector - {better}: {versus_better.paired.format()}", flush=True)
    candidate = _candidate_of(found, names)
    chosen_fresh = _candidate_fresh(
        candidate, parents, names, better, on_fresh, fresh_dir, pair.tag
    )
    print(f"{pair.name} fresh search choice - {better}: {chosen_fresh['formatted']}", flush=True)
    against_composed = compare(
        selector,
        compose(parents, composed.operator, composed.weights),
        fresh_seeds,
        out_dir=fresh_dir,
        labels=(label, pair.tag + composed.label),
    )
    print(
        f"{pair.name} fresh selector - {composed}: {against_composed.paired.format()}", flush=True
    )
    success, oracle = versus_better.results[0].row()["success"], on_fresh.oracle
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
        **versus_better.results[0].row(),
        "minus_better_parent": paired_entry(versus_better),
        # what the verifier adds to the composition it draws from: the selector against that
        # composition alone, paired on the same fresh seeds
        "minus_composed_candidate": paired_entry(against_composed),
        "selector_margin": margin,
        "oracle": oracle,
        "oracle_gap_closed": (success - base) / (oracle - base) if oracle > base else None,
        "verifier": {
            "file": os.path.relpath(final, ROOT),
            "digest": trained[-1].digest,
            "search_seeds": {"start": pair.search_seeds[0], "episodes": len(pair.search_seeds)},
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
    """The learned selector becomes the task's `selector` (see `place_learned_selector`); then
    the headlines."""
    place_learned_selector(results.setdefault("quality", {}).setdefault(task, {}), entry)
    verifier_headlines(results)


def place_learned_selector(row: dict, entry: dict) -> None:
    """`entry` becomes the pair's `selector`; the training-free run it replaces moves to
    `selector_by_score.agreement`, a learned one at another margin to
    `selector_by_margin.<margin>`."""
    previous = row.get("selector")
    if previous is not None and "verifier" not in previous:
        row.setdefault("selector_by_score", {})["agreement"] = previous
    elif previous is not None:
        margin = previous.get("selector_margin", 0.0)
        if margin != entry["selector_margin"]:
            row.setdefault("selector_by_margin", {})[f"{margin:g}"] = previous
    row["selector"] = entry


def add_verifier_args(parser: argparse.ArgumentParser) -> None:
    """The learned selector's rounds, lower bound and margin, as every script that runs it
    spells them."""
    parser.add_argument("--verifier-rounds", type=int, default=2, help="selector rounds")
    parser.add_argument("--round-episodes", type=int, default=100, help="seeds per round")
    parser.add_argument(
        "--verifier-std-weight", type=float, default=1.0, help="lower bound: mean - k * std"
    )
    parser.add_argument(
        "--selector-margin",
        type=float,
        default=0.1,
        help="the composed candidate runs unless the verifier rates another this much higher",
    )


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

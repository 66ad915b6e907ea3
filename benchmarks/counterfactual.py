"""Counterfactual labels: what each selector score knows about chunks, from one state at a time.

Per task (the shipped pair; the selector at 0.5/0.5 with its shipped score plays the episodes),
at `--boundaries` random chunk boundaries of each of `--episodes` episodes, every candidate the
selector drew there runs from the restored MuJoCo state and the better parent finishes the
episode, on the boundary's one noise (robocompose.composition.counterfactual). Stored per task:
the boundaries, the informative ones (candidates disagree in outcome), each score's
within-boundary AUC and mean per-boundary ranking accuracy with 95% bootstrap intervals
(`counterfactual_scores.Ranking`), the candidates' success by source, how often the
selector's own pick succeeded, the seconds per boundary (its candidates and branches) and per
episode (those and the selector's own episode); with `--verifier TASK=FILE`, the
verifier's too (`verifier_auc_counterfactual`); with `--contrast TASK=WEAK0,WEAK1` (a weaker
checkpoint of each parent), Bidirectional Decoding's forward contrast, the untrained baseline.

The finisher: `--finisher TASK=CHECKPOINT`, else composition.json's better parent for the
task, else the better of the pair on `--finisher-episodes` seeds (measured, resumable). Each
episode goes to runs/benchmarks/counterfactual/<task>/seed_<seed>.npz as it ends (a rerun
skips those; a file labelled by other policies or settings is refused); the task's entry in
results/counterfactual.json is written from all its episodes once they are there. With
`--training` the episodes are labels for training a chunk ranker: seeds of their own (neither
the search's, the verifier rounds' nor the fresh ones), folder <task>/training, no entry. With
`--finisher-seed K` the same boundaries are labelled again under another finisher noise (into
<task>/finisher<K>); `--repeatability 1,2,3` then stores, under `repeatability.<task>`, how far a
boundary's chunk decides its outcome at all: the AUC a score that knew each candidate's chance
would reach (`counterfactual_scores.repeatability`), the ceiling for every score above.

    python benchmarks/counterfactual.py [--tasks Stack,...] [--episodes 50] [--boundaries 4]
        [--training] [--finisher Stack=Stack_flow_mlp]
        [--verifier Stack=runs/verifier/stack.safetensors]
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np
from common import RUNS_DIR, ResultsFile, cpu_model
from composition_parts.shared import HELDOUT_SEED_START, pick_best

from robocompose.compare import compare
from robocompose.composition.api import compose
from robocompose.composition.composed_policy import ComposedPolicy
from robocompose.composition.counterfactual import (
    CounterfactualEpisode,
    counterfactual_episode,
    labelling,
)
from robocompose.composition.counterfactual_file import episode_path, read_episode, save_episode
from robocompose.composition.counterfactual_scores import (
    boundary_scores,
    ranking,
    repeatability,
    verifier_policy,
)
from robocompose.composition.selector import SCORES
from robocompose.policies.checkpoint import load_policy
from robocompose.shipped import PARENT_PAIRS, parent_pair

OUT = RUNS_DIR / "counterfactual"
RESULTS = ResultsFile("counterfactual.json", writer="counterfactual.py")
COMPOSITION = ResultsFile("composition.json")  # read only: its measured better parents
WEIGHTS = (0.5, 0.5)
# a verifier's counterfactual training labels (`--training`): neither the search's seeds, the
# verifier rounds' (200000...) nor the fresh ones
TRAINING_SEED_START = 250_000


def _per_task(items: list[str], flag: str) -> dict[str, str]:
    """["Stack=FILE", ...] -> {"Stack": "FILE"}."""
    pairs = [item.partition("=") for item in items]
    bad = [item for item, (task, eq, value) in zip(items, pairs, strict=True) if not (eq and value)]
    if bad:
        raise SystemExit(f"{flag} takes TASK=VALUE. Got {bad[0]!r}.")
    return {task: value for task, _, value in pairs}


def finisher_of(
    task: str, parents: list, names: list[str], given: str | None, episodes: int
) -> tuple[str, str]:
    """The finisher's checkpoint and where it came from: given, composition.json's better
    parent, or measured here (the better of the pair on `episodes` fresh seeds)."""
    if given:
        return given, "given"
    stored = COMPOSITION.read().get("quality", {}).get(task, {}).get("better_parent")
    if stored in names:
        return stored, "composition.json"
    seeds = range(HELDOUT_SEED_START, HELDOUT_SEED_START + episodes)
    measured = compare(*parents, seeds, out_dir=OUT / task / "parents", labels=tuple(names))
    rows = {n: r.row() for n, r in zip(names, measured.results, strict=True)}
    return pick_best(rows), f"measured on {episodes} seeds"


def label(
    task: str,
    policy,
    finisher,
    seeds: list[int],
    boundaries: int,
    folder: Path,
    finisher_seed: int = 0,
) -> list:
    """Every seed's counterfactual episode: read back from `folder` when its file is there
    (labelled as this run would), else run and written there as it ends."""
    expected = labelling(policy, finisher, per_episode=boundaries, finisher_seed=finisher_seed)
    episodes = []
    for seed in seeds:
        path = episode_path(folder, seed)
        if path.is_file():
            episode = read_episode(path)
            if episode.settings != expected:
                raise SystemExit(
                    f"{path} was labelled with {episode.settings}, this run labels with "
                    f"{expected}: move that folder away to label afresh."
                )
        else:
            episode = counterfactual_episode(
                policy, finisher, seed, per_episode=boundaries, finisher_seed=finisher_seed
            )
            save_episode(path, episode)
            per = np.mean([b.seconds for b in episode.boundaries])
            print(
                f"{task} seed {seed}: {episode.steps} steps, {len(episode.boundaries)} "
                f"boundaries, {per:.1f} s per boundary, {episode.seconds:.1f} s in all",
                flush=True,
            )
        episodes.append(episode)
    return episodes


def _sources(episodes: list[CounterfactualEpisode], names: list[str]) -> dict[str, float]:
    """Each source's share of candidates that led to success ("parent<i>" by its name)."""
    outcomes: dict[str, list[bool]] = defaultdict(list)
    for boundary in (b for e in episodes for b in e.boundaries):
        for source, success in zip(boundary.sources, boundary.success, strict=True):
            name = names[int(source.removeprefix("parent"))] if source != "composition" else source
            outcomes[name].append(bool(success))
    return {name: float(np.mean(v)) for name, v in outcomes.items()}


def summarise(
    policy,
    episodes: list[CounterfactualEpisode],
    names: list[str],
    verifier: str | None,
    contrast: list[str] | None = None,
) -> dict:
    """The task's labels and every score's ranking of them."""
    boundaries = [b for e in episodes for b in e.boundaries]
    labels = [b.success for b in boundaries]
    scores = {
        name: ranking(boundary_scores(policy, boundaries, name), labels).to_dict()
        for name in SCORES
    }
    entry = {
        "episodes": len(episodes),
        "episodes_success": float(np.mean([e.success for e in episodes])),
        "boundaries": len(boundaries),
        "informative_boundaries": sum(b.informative for b in boundaries),
        "boundaries_any_success": float(np.mean([b.success.any() for b in boundaries])),
        "candidates_success": _sources(episodes, names),
        "chosen_success": float(np.mean([b.success[b.chosen] for b in boundaries])),
        "scores": scores,
        # a boundary's candidates and branches; the selector's own episode besides
        "seconds_per_boundary": float(np.mean([b.seconds for b in boundaries])),
        "seconds_per_episode": float(np.mean([e.seconds for e in episodes])),
    }
    if contrast is not None:  # BID's forward contrast: the untrained baseline
        config = replace(policy.config, selector_score="contrast", selector_contrast=contrast)
        judge = ComposedPolicy(policy.parents, config)
        scores["contrast"] = ranking(
            boundary_scores(judge, boundaries, "contrast"), labels
        ).to_dict()
        entry["contrast"] = {"checkpoints": contrast}
    if verifier is not None:
        judge = verifier_policy(policy, verifier)
        found = ranking(boundary_scores(judge, boundaries, "verifier"), labels).to_dict()
        scores["verifier"] = found
        entry["verifier"] = {"file": verifier, "digest": judge.verifier.digest}
        entry["verifier_auc_counterfactual"] = found["auc"]
    return entry


def folder_of(task: str, training: bool = False, noise: int = 0) -> Path:
    """Where a task's episodes go: the fresh ones under finisher noise 0, those under noise K
    (`--finisher-seed K`), or a ranker's training seeds (`--training`)."""
    if noise:
        return OUT / task / f"finisher{noise}"
    return OUT / task / "training" if training else OUT / task


def repeatability_entry(
    task: str, policy, finisher, seeds: list[int], boundaries: int, noises: list[int]
) -> dict:
    """The same boundaries under finisher noises `noises` (each labelled before: a missing
    episode is labelled here), and how far their chunk decides their outcome. Labels made by
    another release or CPU path (float rounding) play other episodes: compare noises labelled
    by one."""
    runs = []
    for k in noises:
        episodes = label(task, policy, finisher, seeds, boundaries, folder_of(task, noise=k), k)
        runs.append([b for e in episodes for b in e.boundaries])
    found = repeatability(runs)
    return {
        "seeds": {"start": seeds[0], "episodes": len(seeds)},
        "finisher_noises": noises,
        **found.to_dict(),
        "selector_chosen_success": float(
            np.mean([b.success[b.chosen] for run in runs for b in run])
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", default=",".join(PARENT_PAIRS))
    parser.add_argument("--episodes", type=int, default=50, help="selector episodes per task")
    parser.add_argument("--boundaries", type=int, default=4, help="boundaries per episode")
    parser.add_argument("--seed-start", type=int, default=None, help="default: fresh seeds")
    parser.add_argument(
        "--training",
        action="store_true",
        help=f"label a verifier's training seeds ({TRAINING_SEED_START}...) into "
        "<task>/training, and store no result",
    )
    parser.add_argument("--finisher", action="append", default=[], help="TASK=CHECKPOINT")
    parser.add_argument("--verifier", action="append", default=[], help="TASK=FILE")
    parser.add_argument(
        "--contrast",
        action="append",
        default=[],
        help="TASK=WEAK0,WEAK1: a weaker checkpoint of each parent, for the contrast score",
    )
    parser.add_argument(
        "--finisher-episodes", type=int, default=100, help="seeds to measure the better parent"
    )
    parser.add_argument(
        "--finisher-seed",
        type=int,
        default=0,
        help="K > 0: label the same boundaries again under finisher noise K, into "
        "<task>/finisher<K> (for --repeatability), and store no result",
    )
    parser.add_argument(
        "--repeatability",
        default="",
        help="NOISES, e.g. 1,2,3: store how far the chunk decides the outcome, from these "
        "finisher noises' labels of the first --episodes seeds (labelled by one code path)",
    )
    args = parser.parse_args()
    finishers = _per_task(args.finisher, "--finisher")
    verifiers = _per_task(args.verifier, "--verifier")
    contrasts = {t: v.split(",") for t, v in _per_task(args.contrast, "--contrast").items()}
    start = args.seed_start
    if start is None:
        start = TRAINING_SEED_START if args.training else HELDOUT_SEED_START
    seeds = list(range(start, start + args.episodes))
    for task in args.tasks.split(","):
        paths = parent_pair(task)
        names = [p.name for p in paths]
        parents = [load_policy(p) for p in paths]
        policy = compose(parents, "selector", WEIGHTS)
        name, source = finisher_of(
            task, parents, names, finishers.get(task), args.finisher_episodes
        )
        finisher = parents[names.index(name)] if name in names else load_policy(name)
        started = time.perf_counter()
        if args.repeatability:
            noises = [int(k) for k in args.repeatability.split(",")]
            entry = repeatability_entry(task, policy, finisher, seeds, args.boundaries, noises)
            RESULTS.set(["repeatability", task], entry)
            print(f"{task} repeatability: {entry}", flush=True)
            continue
        folder = folder_of(task, args.training, args.finisher_seed)
        episodes = label(task, policy, finisher, seeds, args.boundaries, folder, args.finisher_seed)
        if args.finisher_seed:
            print(
                f"{task}: {len(episodes)} episodes under finisher noise {args.finisher_seed} "
                f"in {folder}",
                flush=True,
            )
            continue
        if args.training:
            informative = sum(b.informative for e in episodes for b in e.boundaries)
            print(
                f"{task}: {len(episodes)} training episodes in {folder}, {informative} "
                "informative boundaries",
                flush=True,
            )
            continue
        entry = {
            "parents": names,
            "selector_score": policy.config.selector_score,
            "weights": list(WEIGHTS),
            "finisher": name,
            "finisher_from": source,
            "seeds": {"start": seeds[0], "episodes": len(seeds)},
            "boundaries_per_episode": args.boundaries,
            **summarise(policy, episodes, names, verifiers.get(task), contrasts.get(task)),
            "wall_seconds_this_run": round(time.perf_counter() - started, 1),
            "cpu": cpu_model(),
            "load_average": list(os.getloadavg()),
        }
        RESULTS.set(["tasks", task], entry)
        print(f"{task}: {entry}", flush=True)


if __name__ == "__main__":
    main()

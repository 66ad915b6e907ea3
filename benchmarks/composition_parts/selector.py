"""Selector (`--parts selector`): how each selector score ranks a parent's own chunks, then the
selector on fresh seeds against the better parent and the per-seed oracle."""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from common import resume_records

from robocompose.compare import Comparison, compare
from robocompose.composition.api import candidate_label, compose
from robocompose.composition.builtin_methods import SelectorMethod
from robocompose.composition.config import CompositionConfig
from robocompose.composition.selector import SCORES, candidates
from robocompose.evaluation import EvalResult, evaluate
from robocompose.stats import auc, paired_outcomes

from .shared import HELDOUT_SEED_START, OUT, paired_entry, parents_of, pick_best


class _LoggedCandidates(SelectorMethod):
    """A study's method: executes candidate `executed` (parent i alone on the chunk's own noise,
    so the episode is that parent's) and logs every score's rank of it among the candidates.
    One instance runs one episode, so it keeps the executed whole chunk for `coherence`."""

    def __init__(self, executed: int) -> None:
        self.executed, self.log, self.previous = executed, [], None

    def predict_actions(self, policy, obs, noise):
        found = candidates(policy, obs, noise, policy.config.selector_samples)
        row = {}
        for name, score in SCORES.items():
            values = score(policy, obs, found, self.previous)  # (C, B)
            mine = values[self.executed]
            # the fraction of the other candidates it beats (ties count half)
            beats = (mine > values).double().sum(0) + 0.5 * (mine == values).double().sum(0)
            row[name] = ((beats - 0.5) / (values.shape[0] - 1)).tolist()
        if self.previous is None:  # no plan to keep to yet: coherence ranks nothing
            del row["coherence"], row["bidirectional"]
        self.log.append(row)
        self.previous = found.full[self.executed]
        chosen = found.executed[self.executed]
        return policy.parents[0].action_normalizer.unnormalize(chosen)


def _auc(positive: list[float], negative: list[float]) -> float | None:
    """P(a positive's value > a negative's), ties half: 0.5 is chance."""
    return auc([*positive, *negative], [True] * len(positive) + [False] * len(negative))


def selector_scores(task: str, episodes: int) -> dict:
    """How well each selector score ranks: on `episodes` fresh seeds per parent, parent i alone
    executes its own chunks (the episode is its native one) while every chunk's candidates
    (`selector_samples` native samples per parent, one convex 0.5/0.5 composition) are scored;
    the executed chunk's rank among them is logged with the episode's outcome. AUC of the mean
    rank per episode (and of every chunk's rank) between successful and failed episodes: 0.5
    ranks like chance. Pooled over the parents and per parent: pooled, a score that merely
    tells the parents apart ranks well when one parent fails more often."""
    parents, names = parents_of(task)
    seeds = list(range(HELDOUT_SEED_START, HELDOUT_SEED_START + episodes))
    folder = OUT / task / "selector_scores"
    folder.mkdir(parents=True, exist_ok=True)
    out: dict = {"seeds": {"start": seeds[0], "episodes": len(seeds)}, "per_parent": {}}
    pooled: dict[str, dict[bool, list]] = {n: {True: [], False: []} for n in SCORES}
    chunk_pooled: dict[str, dict[bool, list]] = {n: {True: [], False: []} for n in SCORES}
    for i, name in enumerate(names):

        def run(seed: int, offset: int = i * CompositionConfig.selector_samples) -> dict:
            policy = compose(parents, "selector", (0.5, 0.5))
            policy.method = _LoggedCandidates(offset)
            result = evaluate(policy, [seed], num_envs=1, progress=False)
            return {"success": bool(result.records[0]["success"]), "ranks": policy.method.log}

        rows = resume_records(folder / f"{name}.jsonl", seeds, run, key_field="seed")
        own: dict[str, dict[bool, list]] = {n: {True: [], False: []} for n in SCORES}
        for record in rows:
            for score in SCORES:
                ranks = [r for chunk in record["ranks"] for r in chunk.get(score, ())]
                if not ranks:
                    continue
                own[score][record["success"]].append(statistics.mean(ranks))
                pooled[score][record["success"]].append(statistics.mean(ranks))
                chunk_pooled[score][record["success"]].extend(ranks)
        out["per_parent"][name] = {
            "success": statistics.mean(r["success"] for r in rows),
            "episodes": len(rows),
            "auc_episode_mean_rank": {n: _auc(v[True], v[False]) for n, v in own.items()},
        }
    out["auc_episode_mean_rank"] = {n: _auc(v[True], v[False]) for n, v in pooled.items()}
    out["auc_chunk_rank"] = {n: _auc(v[True], v[False]) for n, v in chunk_pooled.items()}
    out["episodes_success_failure"] = {n: [len(v[True]), len(v[False])] for n, v in pooled.items()}
    print(f"{task} selector scores: {json.dumps(out)}", flush=True)
    return out


class _EpisodeSelector(SelectorMethod):
    """The selector by a score that needs the previously executed chunk (`coherence`,
    `bidirectional`): one instance runs one episode (num_envs=1), so it keeps that chunk itself.
    A study's method: the shipped one keeps no state across chunks."""

    def __init__(self, score: str) -> None:
        self.score, self.previous = score, None

    def predict_actions(self, policy, obs, noise):
        chosen, self.previous = self.choose(policy, obs, noise, self.previous, self.score)
        return policy.parents[0].action_normalizer.unnormalize(chosen)


def _per_episode(parents: list, score: str, seeds: list[int], out: Path) -> EvalResult:
    """The selector by `score` on `seeds`, a fresh policy per episode (resumable in `out`)."""

    def policy():
        composed = compose(parents, "selector", (0.5, 0.5))
        composed.method = _EpisodeSelector(score)
        return composed

    for seed in seeds:
        evaluate(policy(), [seed], out=out, num_envs=1, progress=False)
    return evaluate(policy(), seeds, out=out, num_envs=1, progress=False)  # read back, in order


def selector_run(task: str, episodes: int, score: str = "agreement") -> dict:
    """The selector on `episodes` fresh seeds of one of our tasks (see `selector_versus`)."""
    parents, names = parents_of(task)
    seeds = list(range(HELDOUT_SEED_START, HELDOUT_SEED_START + episodes))
    return selector_versus(parents, names, seeds, OUT / task / "fresh", score)


def selector_versus(
    parents: list, names: list[str], seeds: list[int], fresh_dir: Path, score: str, tag: str = ""
) -> dict:
    """The selector (by `score`) on `seeds` against the better parent there (paired) and the
    per-seed oracle of the parents: success, the share of the oracle gap it closes. `tag`
    prefixes the selector's episode file (for a folder that several pairs share); external.py
    and external_pusht.py run it on their pairs too."""
    on_fresh = compare(*parents, seeds, out_dir=fresh_dir, labels=tuple(names))
    rows = {n: r.row() for n, r in zip(names, on_fresh.results, strict=True)}
    better = pick_best(rows)
    label = tag + candidate_label("selector", (0.5, 0.5))
    if score == "agreement":  # the shipped method
        pair = compare(
            compose(parents, "selector", (0.5, 0.5)),
            parents[names.index(better)],
            seeds,
            out_dir=fresh_dir,
            labels=(label, better),
        )
        mine = pair.results[0]
        entry = paired_entry(pair)
    else:
        mine = _per_episode(parents, score, seeds, fresh_dir / f"{label}_{score}.jsonl")
        base = on_fresh.results[names.index(better)]
        paired = paired_outcomes(_outcomes(mine), _outcomes(base))
        entry = paired_entry(Comparison((f"{label}_{score}", better), (mine, base), paired))
    success, base_rate, oracle = mine.row()["success"], rows[better]["success"], on_fresh.oracle
    return {
        "method": f"selector ({score}, 2 native samples per parent + convex 0.5/0.5)",
        "seeds": {"start": seeds[0], "episodes": len(seeds)},
        "better_parent": better,
        **mine.row(),
        "minus_better_parent": entry,
        "oracle": oracle,
        "oracle_gap_closed": (success - base_rate) / (oracle - base_rate)
        if oracle > base_rate
        else None,
    }


def _outcomes(result: EvalResult) -> list[bool]:
    return [bool(r["success"]) for r in sorted(result.records, key=lambda r: r["seed"])]


def store_selector(results: dict, task: str, selector: dict, score: str = "agreement") -> None:
    """`selector` (the shipped score) beside the task's P1 row, another score's run under
    `selector_by_score` (every training-free run there once the learned selector holds
    `selector`: `--parts verifier`); then the headlines."""
    row = results.setdefault("quality", {}).setdefault(task, {})
    if "verifier" in row.get("selector", {}):
        row.setdefault("selector_by_score", {})[score] = selector
    elif score != "agreement":
        ranking = selector.pop("score_ranking", None)
        row.setdefault("selector_by_score", {})[score] = selector
        if ranking is not None and "selector" in row:  # the study is the same whatever the score
            row["selector"]["score_ranking"] = ranking
    else:
        row["selector"] = selector
    selector_headlines(results)


def selector_headlines(results: dict) -> None:
    """The shipped selector's share of the oracle gap over the tasks: the mean of the shares,
    and the summed gain over the summed gap (which one task's tiny gap cannot swing)."""
    runs = {t: r["selector"] for t, r in results.get("quality", {}).items() if "selector" in r}
    shares = [r["oracle_gap_closed"] for r in runs.values() if r["oracle_gap_closed"] is not None]
    if not shares:
        return
    results["oracle_gap_closed"] = statistics.mean(shares)
    results["oracle_gap_closed_tasks"] = sorted(runs)
    gains = [r["minus_better_parent"]["difference"] for r in runs.values()]
    # oracle - better parent, the better parent's rate read off the paired difference
    gap = sum(r["oracle"] - r["success"] + g for r, g in zip(runs.values(), gains, strict=True))
    gain = sum(gains)
    results["oracle_gap_closed_pooled"] = gain / gap if gap > 0 else None


def add_selector_args(parser: argparse.ArgumentParser, episodes: bool = True) -> None:
    """`--selector-score` (and `--selector-episodes`, the fresh seeds it runs on), as every
    script that runs the selector spells them."""
    if episodes:
        parser.add_argument("--selector-episodes", type=int, default=100, help="selector seeds")
    parser.add_argument(
        "--selector-score",
        default="agreement",
        choices=tuple(SCORES),
        help="the selector's score (agreement: the shipped one, key `selector`; the others: "
        "key `selector_by_score`)",
    )

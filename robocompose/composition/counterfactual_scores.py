"""What the selector's scores know about chunks: each score's ranking of one boundary's
candidates against their counterfactual labels (`counterfactual`), never across boundaries,
where a score would be credited for telling easy states from hard ones.

    values = boundary_scores(selector, boundaries, "agreement")   # (C,) per boundary
    ranking(values, [b.success for b in boundaries]).auc

A score is computed by the selector's own function (`selector.score_of`) on the boundary's
saved candidates and observation; "verifier" by a policy that loads its file as the selector
does (`verifier_policy`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np
import torch

from robocompose.composition.composed_policy import ComposedPolicy
from robocompose.composition.counterfactual import Boundary
from robocompose.composition.selector import Candidates, score_of
from robocompose.devices import torch_threads_set
from robocompose.stats import auc, bootstrap_interval

__all__ = [
    "NEEDS_PREVIOUS",
    "Ranking",
    "Repeatability",
    "boundary_scores",
    "ranking",
    "repeatability",
    "verifier_policy",
]

# scores that keep to the previously executed chunk: at an episode's first chunk they are all
# zero (coherence) or agreement's (bidirectional), so they rank nothing of their own there
NEEDS_PREVIOUS = ("coherence", "bidirectional")
# env units: one boundary's candidates under two finisher noises may differ by float rounding
ACTIONS_ATOL = 1e-4


def verifier_policy(policy: ComposedPolicy, verifier: str | os.PathLike[str]) -> ComposedPolicy:
    """`policy` scoring by the verifier file `verifier`, loaded and checked to fit its parents
    as the selector's `composition.verifier` is."""
    config = replace(policy.config, selector_score="verifier", verifier=str(verifier))
    return ComposedPolicy(policy.parents, config)


def boundary_scores(
    policy: ComposedPolicy, boundaries: Sequence[Boundary], name: str
) -> list[np.ndarray | None]:
    """The score `name` of each boundary's C candidates (C,), as the selector of `policy`
    computes it there; None where it ranks nothing (`NEEDS_PREVIOUS` at a first chunk)."""
    score = score_of(name)
    device = policy.device
    values: list[np.ndarray | None] = []
    with torch_threads_set(1), torch.no_grad():
        for b in boundaries:
            if b.previous is None and name in NEEDS_PREVIOUS:
                values.append(None)
                continue
            obs = {k: torch.as_tensor(v, device=device)[None] for k, v in b.obs.items()}
            full = None if b.full is None else torch.as_tensor(b.full, device=device)[:, None]
            executed = torch.as_tensor(b.executed, device=device)[:, None]
            noise = torch.as_tensor(b.noise, device=device)[None]
            found = Candidates(executed, full, b.sources, noise)
            previous = None if b.previous is None else torch.as_tensor(b.previous, device=device)
            rated = score(policy, obs, found, None if previous is None else previous[None])
            values.append(rated[:, 0].double().cpu().numpy())
    return values


@dataclass(frozen=True)
class Ranking:
    """How one score ranks candidates against their labels, within boundaries.

    auc: P(a candidate that led to success scores above one that did not, of the same
    boundary), ties half, over all such pairs (a Mann-Whitney AUC stratified by boundary);
    ranking_accuracy: that probability per boundary, averaged over the informative ones (each
    counts once); ci95, auc_ci95: their 95% bootstrap intervals over informative boundaries;
    boundaries: those scored; informative: those whose candidates disagree in outcome."""

    auc: float | None
    ranking_accuracy: float | None
    ci95: tuple[float, float] | None
    auc_ci95: tuple[float, float] | None
    boundaries: int
    informative: int

    def to_dict(self) -> dict:
        return asdict(self)


def ranking(
    values: Sequence[np.ndarray | None],
    labels: Sequence[np.ndarray],
    *,
    resamples: int = 2000,
    seed: int = 0,
) -> Ranking:
    """`values[i]` (C_i,) a score's candidates at boundary i (None: not scored there),
    `labels[i]` (C_i,) their outcomes; 0.5 ranks like chance, 1 puts every success first."""
    if len(values) != len(labels):
        raise ValueError(
            f"`values` and `labels` must hold one entry per boundary. Got {len(values)} and "
            f"{len(labels)}."
        )
    scored = [
        (np.asarray(v, dtype=np.float64), np.asarray(y, dtype=bool))
        for v, y in zip(values, labels, strict=True)
        if v is not None
    ]
    informative = [(v, y) for v, y in scored if y.any() and not y.all()]
    if not informative:
        return Ranking(None, None, None, None, len(scored), 0)
    accuracy = np.array([auc(v, y) for v, y in informative])
    pairs = np.array([y.sum() * (~y).sum() for _, y in informative], dtype=np.float64)
    wins = accuracy * pairs
    units = len(informative)
    return Ranking(
        auc=float(wins.sum() / pairs.sum()),
        ranking_accuracy=float(accuracy.mean()),
        ci95=bootstrap_interval(
            lambda i: accuracy[i].mean(), units, resamples=resamples, seed=seed
        ),
        auc_ci95=bootstrap_interval(
            lambda i: wins[i].sum() / pairs[i].sum(), units, resamples=resamples, seed=seed
        ),
        boundaries=len(scored),
        informative=units,
    )


@dataclass(frozen=True)
class Repeatability:
    """How much of a boundary's outcome its chunk decides, from the same boundaries labelled
    under K finisher noises (the same candidates each time; only what follows them differs).

    ceiling_auc: the within-boundary AUC of each repeat's labels ranked by the candidates'
    success over the other K - 1 repeats, averaged over repeats: what a score that knew every
    candidate's chance of success (as well as K - 1 draws tell) would reach, so no learned or
    training-free score can be expected above it; choice_gain: the success a chooser by those
    K - 1 draws adds over a candidate at random, measured on the held-out repeat (cross-fitted,
    so chance picks count for nothing); flip_rate: the share of candidates whose outcome
    differs between repeats; informative: the share of boundaries with mixed outcomes, per
    repeat on average."""

    repeats: int
    boundaries: int
    ceiling_auc: float | None
    ceiling_auc_ci95: tuple[float, float] | None  # of the first repeat's ranking
    choice_gain: float
    flip_rate: float
    informative: float

    def to_dict(self) -> dict:
        return asdict(self)


def repeatability(runs: Sequence[Sequence[Boundary]]) -> Repeatability:
    """`runs[k][i]`: boundary i labelled under finisher noise k (K >= 2 runs of the same
    boundaries, their candidates equal up to `ACTIONS_ATOL`)."""
    if len(runs) < 2:
        raise ValueError(f"repeatability needs the boundaries under >= 2 noises. Got {len(runs)}.")
    first = runs[0]
    for k, run in enumerate(runs[1:], start=1):
        if len(run) != len(first):
            raise ValueError(
                f"run {k} holds {len(run)} boundaries, run 0 holds {len(first)}: label the same "
                "episodes under each noise."
            )
        for a, b in zip(first, run, strict=True):
            # equal up to float rounding: labels made on another CPU path (or release) count
            if a.step != b.step or not np.allclose(a.actions, b.actions, atol=ACTIONS_ATOL):
                raise ValueError(
                    f"run {k}: the boundary at step {b.step} has other candidates than run 0's "
                    f"at step {a.step}: the runs must label the same episodes with one policy."
                )
    outcomes = np.stack([[b.success for b in run] for run in runs]).astype(float)  # (K, N, C)
    repeats = len(runs)
    rankings, gains = [], []
    for k in range(repeats):
        others = np.delete(outcomes, k, axis=0).mean(0)  # (N, C)
        rankings.append(ranking(list(others), list(outcomes[k] > 0.5)))
        best = others == others.max(1, keepdims=True)  # ties: a pick among them at random
        picked = (outcomes[k] * best).sum(1) / best.sum(1)
        gains.append(float((picked - outcomes[k].mean(1)).mean()))
    aucs = [r.auc for r in rankings if r.auc is not None]
    mixed = (outcomes.min(0) != outcomes.max(0)).mean()
    return Repeatability(
        repeats=repeats,
        boundaries=len(first),
        ceiling_auc=float(np.mean(aucs)) if aucs else None,
        ceiling_auc_ci95=rankings[0].auc_ci95,
        choice_gain=float(np.mean(gains)),
        flip_rate=float(mixed),
        informative=float(np.mean([r.informative for r in rankings]) / len(first)),
    )

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

__all__ = ["NEEDS_PREVIOUS", "Ranking", "boundary_scores", "ranking", "verifier_policy"]

# scores that keep to the previously executed chunk: at an episode's first chunk they are all
# zero (coherence) or agreement's (bidirectional), so they rank nothing of their own there
NEEDS_PREVIOUS = ("coherence", "bidirectional")


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

"""Never worse, by construction: each parent alone on its own sampler is a search candidate
beside the compositions (first, so it wins ties), a composition replaces the better parent only
on a lead the search seeds can tell from luck, and a composition at a vertex of the simplex is
that parent on its own sampler, not the parent on another parent's grid."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robocompose.composition.composed_policy import ComposedPolicy, CompositionConfig
from robocompose.composition.weight_search import (
    NativeParent,
    SearchSettings,
    grid_search,
    racing,
    search_pool,
    simplex_grid,
    successive_halving,
)
from robocompose.policies.base import build_policy
from robocompose.policies.diffusion import DiffusionConfig
from tests.composition.test_composed_policy import _obs, tiny_policy

STEPS = 10


def _records(p: float, seeds) -> list[dict]:
    return [
        {"seed": s, "success": np.random.default_rng(s).uniform() < p, "score": p} for s in seeds
    ]


def _evaluator(native: dict[int, float], composed: float):
    """Parent i alone succeeds with native[i]; every composition with `composed` (paired: a
    seed's uniform draw decides all of them)."""

    def run(key, seeds):
        return _records(native[key.index] if isinstance(key, NativeParent) else composed, seeds)

    return run


@pytest.mark.parametrize(
    "search",
    [
        lambda ev, cands, seeds: grid_search(ev, cands, seeds, progress=False),
        lambda ev, cands, seeds: successive_halving(ev, cands, seeds, 10, progress=False),
        lambda ev, cands, seeds: racing(ev, cands, seeds, 10, progress=False),
    ],
    ids=["grid", "halving", "racing"],
)
def test_a_search_returns_the_better_parent_when_no_composition_beats_it(search) -> None:
    candidates = search_pool(2, 0.25, ["convex"])
    seeds = list(range(200))
    worse = search(_evaluator({0: 0.3, 1: 0.7}, composed=0.5), candidates, seeds)
    assert worse.choice == NativeParent(1, 2) and worse.chosen == (0.0, 1.0)
    assert worse.chosen_kind == "parent_native"
    assert "parent B alone (native sampler) = flow" in worse.chosen_text(["dp", "flow"])
    assert "**chosen**" in next(line for line in worse.table().splitlines() if "B alone" in line)
    better = search(_evaluator({0: 0.3, 1: 0.5}, composed=0.7), candidates, seeds)
    assert better.chosen_kind == "composition" and not isinstance(better.choice, NativeParent)
    rows = better.to_dict()
    assert rows["chosen_kind"] == "composition"
    assert sorted(r["kind"] for r in rows["candidates"])[-2:] == ["parent_native"] * 2


@pytest.mark.parametrize("method", ["halving", "racing"])
def test_a_parent_pruned_on_a_noisy_first_slice_still_wins_in_the_end(method: str) -> None:
    """Parent B fails its first 20 seeds and solves the rest (90% on all 200), the
    compositions solve 60%: halving and racing drop B early, and the final check against
    every parent alone on all the seeds brings it back."""

    def run(key, seeds):
        if key == NativeParent(1, 2):
            return [{"seed": s, "success": s >= 20, "score": float(s >= 20)} for s in seeds]
        p = 0.2 if isinstance(key, NativeParent) else 0.6
        return _records(p, seeds)

    candidates = search_pool(2, 0.25, ["convex"])
    seeds = list(range(200))
    if method == "halving":
        found = successive_halving(run, candidates, seeds, 10, progress=False)
        pruned = found.extra["rounds"][1]["alive"]
    else:
        found = racing(run, candidates, seeds, 20, progress=False)
        pruned = None
    assert pruned is None or "parent1_native" not in pruned
    assert found.choice == NativeParent(1, 2)
    assert found.best_composition in simplex_grid(2, 0.25)  # what won before the parents' check
    b = next(c for c in found.candidates if c.key == NativeParent(1, 2))
    assert b.episodes == 200 and b.rate == 0.9


def test_a_tie_goes_to_the_parent_alone() -> None:
    candidates = search_pool(2, 0.5, ["convex"])
    tie = grid_search(_evaluator({0: 0.6, 1: 0.2}, composed=0.6), candidates, range(50), False)
    assert tie.choice == NativeParent(0, 2)


def test_a_lead_of_one_seed_keeps_the_parent_unless_any_lead_is_asked_for() -> None:
    """The composition solves parent B's 11 of 40 seeds and one more: on a 40-seed search that
    lead is luck, so B stays; a lead the seeds can tell (11 more) wins; z = 0 takes any lead."""

    def evaluator(extra: int):
        def run(key, seeds):
            solved = 11 + (0 if isinstance(key, NativeParent) else extra)
            if key == NativeParent(0, 2):
                solved = 5
            return [{"seed": s, "success": s < solved, "score": float(s < solved)} for s in seeds]

        return run

    candidates = search_pool(2, 0.5, ["convex"])
    seeds = list(range(40))
    assert grid_search(evaluator(1), candidates, seeds, False).choice == NativeParent(1, 2)
    assert grid_search(evaluator(11), candidates, seeds, False).chosen_kind == "composition"
    any_lead = grid_search(evaluator(1), candidates, seeds, False, beat_parent_z=0)
    assert any_lead.chosen_kind == "composition"
    with pytest.raises(ValueError, match="beat_parent_z"):
        SearchSettings(beat_parent_z=-1)


def _vpred_policy(seed: int):
    eps = tiny_policy(seed, family="diffusion")
    config = DiffusionConfig(**{**eps.config.to_dict(), "prediction_type": "v_prediction"})
    return build_policy(config, eps.normalizers).eval()


@pytest.mark.parametrize("prediction", ["epsilon", "v_prediction"])
def test_a_vertex_is_the_parent_on_its_own_sampler(prediction: str) -> None:
    """Weights (1, 0) and (0, 1) give the parent's native chunks (DDIM for the DDPM, Euler in
    t for the flow) from the same noise: an epsilon DDPM makes the pair compose on its grid,
    a v-prediction one on the flow's, and either way the other parent used to run on it."""
    flow = tiny_policy(0)
    ddpm = tiny_policy(1, family="diffusion") if prediction == "epsilon" else _vpred_policy(1)
    for p in (*flow.parameters(), *ddpm.parameters()):  # off the init, so the grids matter
        p.data.add_(0.3 * torch.randn_like(p))
    obs = _obs(3)
    noise = torch.randn(3, 16, 2, generator=torch.Generator().manual_seed(4))
    for i, parent in enumerate((flow, ddpm)):
        weights = tuple(float(k == i) for k in range(2))
        composed = ComposedPolicy([flow, ddpm], CompositionConfig(weights=weights, steps=STEPS))
        assert composed.resolved_sigmas() == parent.denoiser_for(None).sigmas(STEPS)
        native = parent.sample(obs, STEPS, noise)[:, composed.executed]
        torch.testing.assert_close(composed.predict_actions(obs, noise), native)
    # inside the simplex the pair keeps the grid it composed on
    inside = ComposedPolicy([flow, ddpm], CompositionConfig(weights=(0.5, 0.5), steps=STEPS))
    reference = ddpm if prediction == "epsilon" else flow
    assert inside.resolved_sigmas() == reference.denoiser_for(None).sigmas(STEPS)

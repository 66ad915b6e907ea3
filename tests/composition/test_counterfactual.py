"""Counterfactual labels on the shipped Stack pair (MLPs: an episode of ~80 steps in about a
second): the selector's episode is the one `evaluate` runs, a branch from a restored state is
the branch replayed from the env's reset bit for bit, a boundary's candidates share the
finisher's noise, a file holds an episode whole, the selector's score on the saved candidates
picks what it ran, the ranking's figures on built labels are the known ones, and bad input is
refused by name."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from robocompose.composition.api import compose
from robocompose.composition.composed_policy import parent_names
from robocompose.composition.counterfactual import counterfactual_episode, replay
from robocompose.composition.counterfactual_file import episode_path, read_episode, save_episode
from robocompose.composition.counterfactual_scores import (
    boundary_scores,
    ranking,
    repeatability,
    verifier_policy,
)
from robocompose.composition.verifier import Verifier, target_of
from robocompose.evaluation import evaluate
from robocompose.policies.checkpoint import load_policy

SEED = 100_000  # the selector succeeds in 80 steps (10 chunks)
CHUNKS = (0, 3)


@pytest.fixture(scope="module")
def parents():
    return load_policy("Stack_diffusion_mlp"), load_policy("Stack_flow_mlp")


@pytest.fixture(scope="module")
def selector(parents):
    return compose(list(parents), "selector", (0.5, 0.5))


@pytest.fixture(scope="module")
def episode(selector, parents):
    return counterfactual_episode(selector, parents[1], SEED, chunks=CHUNKS)


def test_the_episode_is_evaluates_and_a_restored_branch_is_the_branch_replayed(
    selector, parents, episode
) -> None:
    record = evaluate(selector, [SEED], num_envs=1, progress=False).records[0]
    assert (episode.success, episode.steps) == (record["success"], record["length"])
    assert [b.chunk for b in episode.boundaries] == list(CHUNKS)
    last = episode.boundaries[-1]
    n = last.actions.shape[1]
    # the selector's own chunk is a candidate: what it ran from there
    np.testing.assert_array_equal(
        last.actions[last.chosen], episode.actions[last.step : last.step + n]
    )
    for candidate in (0, 4):  # restored after other branches ran: the state is set, not left
        again = replay(selector, parents[1], episode, 1, candidate)
        assert again.success == last.success[candidate]
        assert again.steps == last.length[candidate] and again.score == last.score[candidate]
        np.testing.assert_array_equal(again.state, last.final_state[candidate])


def test_a_boundarys_candidates_share_the_finishers_noise(parents) -> None:
    """One policy twice: each parent's first candidate runs on the chunk's own noise, so
    candidates 0 and 2 are one chunk, and from one state on one finisher noise they end
    alike (the finisher is stochastic: on other noise they would not)."""
    twice = compose([parents[1], parents[1]], "selector", (0.5, 0.5))
    labelled = counterfactual_episode(twice, parents[0], SEED, per_episode=2, sample_seed=3)
    keys = [b.finisher_key for b in labelled.boundaries]
    assert len(labelled.boundaries) == 2 and len(set(keys)) == 2
    for b in labelled.boundaries:
        np.testing.assert_array_equal(b.actions[0], b.actions[2])
        assert not np.array_equal(b.actions[0], b.actions[1])
        np.testing.assert_array_equal(b.final_state[0], b.final_state[2])
        assert b.length[0] == b.length[2] and b.success[0] == b.success[2]
    first = labelled.boundaries[0]
    unpaired = replace(labelled, boundaries=[replace(first, finisher_key=first.finisher_key + 1)])
    other_noise = replay(twice, parents[0], unpaired, 0, 2)
    assert not np.array_equal(other_noise.state, first.final_state[0])


def test_an_episode_is_deterministic_and_its_file_holds_it_whole(
    tmp_path, selector, parents, episode
) -> None:
    path = episode_path(tmp_path, SEED)
    save_episode(path, episode)
    back = read_episode(path)
    again = counterfactual_episode(selector, parents[1], SEED, chunks=CHUNKS)
    for other in (back, again):
        assert (other.seed, other.task, other.settings) == (
            episode.seed,
            episode.task,
            episode.settings,
        )
        np.testing.assert_array_equal(other.actions, episode.actions)
        for mine, theirs in zip(episode.boundaries, other.boundaries, strict=True):
            assert (mine.chunk, mine.step, mine.finisher_key, mine.chosen, mine.sources) == (
                theirs.chunk,
                theirs.step,
                theirs.finisher_key,
                theirs.chosen,
                theirs.sources,
            )
            for name in ("executed", "full", "actions", "success", "score", "final_state"):
                np.testing.assert_array_equal(getattr(theirs, name), getattr(mine, name))
            for key, value in mine.obs.items():
                np.testing.assert_array_equal(theirs.obs[key], value)
            assert (mine.previous is None) == (theirs.previous is None)
    with pytest.raises(ValueError, match="not a counterfactual episode file"):
        read_episode(tmp_path / "missing.npz")


def test_the_selectors_score_on_the_saved_candidates_picks_what_it_ran(
    tmp_path, selector, episode
) -> None:
    save_episode(tmp_path / "e.npz", episode)
    boundaries = read_episode(tmp_path / "e.npz").boundaries
    values = boundary_scores(selector, boundaries, "agreement")
    assert [int(np.argmax(v)) for v in values] == [b.chosen for b in boundaries]
    coherence = boundary_scores(selector, boundaries, "coherence")
    assert coherence[0] is None and coherence[1].shape == (5,)  # no previous chunk at chunk 0


def test_the_verifier_scores_the_saved_candidates_through_its_file(
    tmp_path, selector, episode
) -> None:
    n = selector.executed.stop - selector.executed.start
    made = Verifier(target_of(selector.parents, parent_names(selector.parents), n))
    made.save(tmp_path / "v.safetensors")
    judge = verifier_policy(selector, tmp_path / "v.safetensors")
    values = boundary_scores(judge, episode.boundaries, "verifier")
    for b, v in zip(episode.boundaries, values, strict=True):
        state = torch.as_tensor(b.obs["state"][-1:]).repeat(len(b.sources), 1)
        expected = made.score(state, torch.as_tensor(b.actions))
        np.testing.assert_allclose(v, expected.detach().double().numpy(), rtol=1e-6)


def test_the_ranking_of_built_labels_has_the_known_values() -> None:
    labels = [
        np.array([True, False, False]),
        np.array([True, True, False, False]),
        np.array([False, False, False]),  # all fail: ranks nothing
        np.array([True, False]),
    ]
    values = [np.array([0.2, 0.5, 0.1]), np.array([4.0, 3.0, 2.0, 1.0]), np.zeros(3), None]
    found = ranking(values, labels)
    assert found.auc == pytest.approx(5 / 6)  # 1 of 2 pairs, then 4 of 4
    assert found.ranking_accuracy == pytest.approx(0.75)
    assert (found.boundaries, found.informative) == (3, 2)
    assert found.ci95[0] <= 0.75 <= found.ci95[1] and found.ci95 == ranking(values, labels).ci95
    assert ranking([np.array([1.0, 1.0])], [np.array([True, False])]).auc == 0.5  # a tie
    assert ranking([np.array([0.0, 1.0])], [np.array([True, False])]).auc == 0.0
    assert ranking(values[2:3], labels[2:3]).auc is None
    with pytest.raises(ValueError, match="one entry per boundary"):
        ranking(values, labels[:2])


def test_the_same_boundaries_under_another_finisher_noise(selector, parents, episode) -> None:
    """Finisher noise 1 labels the same boundaries (same steps, same candidates); a chunk
    that decided everything would give the ceiling 1, outcomes one noise flips give none."""
    again = counterfactual_episode(selector, parents[1], SEED, chunks=CHUNKS, finisher_seed=1)
    runs = [episode.boundaries, again.boundaries]
    for a, b in zip(*runs, strict=True):
        assert a.step == b.step and a.finisher_key == b.finisher_key
        np.testing.assert_array_equal(a.actions, b.actions)
    found = repeatability(runs)
    assert (found.repeats, found.boundaries) == (2, len(CHUNKS))
    assert 0 <= found.flip_rate <= 1 and -1 <= found.choice_gain <= 1

    decided = [replace(b, success=np.array([True, False, True, False, False])) for b in runs[0]]
    built = repeatability([decided, decided, decided])
    assert built.ceiling_auc == 1.0 and built.flip_rate == 0.0 and built.informative == 1.0
    assert built.choice_gain == pytest.approx(1 - 2 / 5)  # a success picked, against 2 of 5
    luck = [[replace(b, success=np.full(5, k == 0)) for b in runs[0]] for k in range(3)]
    by_luck = repeatability(luck)
    assert by_luck.ceiling_auc is None and by_luck.choice_gain == 0.0
    assert by_luck.flip_rate == 1.0 and by_luck.informative == 0.0
    with pytest.raises(ValueError, match="other candidates"):
        repeatability([runs[0], runs[0][::-1]])
    with pytest.raises(ValueError, match=">= 2 noises"):
        repeatability([runs[0]])


def test_a_random_score_ranks_like_chance() -> None:
    rng = np.random.default_rng(0)
    labels = [rng.random(5) < 0.5 for _ in range(400)]
    found = ranking([rng.normal(size=5) for _ in labels], labels)
    assert found.ci95[0] < 0.5 < found.ci95[1]
    assert abs(found.ranking_accuracy - 0.5) < 0.05 and abs(found.auc - 0.5) < 0.05
    assert found.informative == sum(y.any() and not y.all() for y in labels)


def test_bad_input_is_refused_by_name(selector, parents) -> None:
    with pytest.raises(ValueError, match="PushT.*Stack"):
        counterfactual_episode(selector, load_policy("PushT_flow_mlp"), SEED)
    with pytest.raises(ValueError, match="chunk 40 is past the end of episode 100000: the "):
        counterfactual_episode(selector, parents[1], SEED, chunks=[3, 40])
    convex = compose(list(parents), "convex", (0.5, 0.5))
    with pytest.raises(ValueError, match="operator 'selector'"):
        counterfactual_episode(convex, parents[1], SEED)
    with pytest.raises(ValueError, match="per_episode"):
        counterfactual_episode(selector, parents[1], SEED, per_episode=0)

"""The chunk verifier: it learns what separates successful episodes' chunks on held-out seeds,
learns nothing from noise (an episode split, not a chunk split), round-trips through its file,
refuses compositions it does not fit, and the selector runs the candidate it rates best."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from robocompose.chunk_log import ChunkLog
from robocompose.cli import main
from robocompose.composition.composed_policy import ComposedPolicy, parent_names
from robocompose.composition.config import SELECTOR_SCORES, CompositionConfig
from robocompose.composition.methods import method_of
from robocompose.composition.selector import CONTRASTED, LEARNED, SCORES, candidates, score_of
from robocompose.composition.verifier import Target, Verifier, load_verifier, target_of
from robocompose.composition.verifier_config import VerifierTrainConfig
from robocompose.composition.verifier_training import train_verifier
from tests.composition.test_composed_policy import _obs, tiny_policy

FAST = VerifierTrainConfig(members=3, hidden=64, max_epochs=100, patience=10)


def write_logs(folder: Path, episodes: int, chunks: int, rule: str, seed: int = 0) -> None:
    """Synthetic chunk logs on task "toy", chunks (2, 2): "separable": an episode succeeds when
    its chunks push +x (they all carry its sign), observations (4,) are noise; "noise": each
    episode keeps one random context in its observations (16,), which a split by chunks would
    let it memorise (held-out AUC 1.0), and succeeds by a coin flip."""
    rng = np.random.default_rng(seed)
    log = ChunkLog(
        folder,
        task="toy",
        label="toy",
        policy_id="toy",
        batch="per-episode",
        parents=[("toy_parent", "f00d")],
        source="parent0",
    )
    for episode in range(episodes):
        success = bool(rng.random() < 0.5)
        context = rng.normal(size=16)
        for c in range(chunks):
            obs = context + 0.05 * rng.normal(size=16) if rule == "noise" else rng.normal(size=4)
            actions = rng.normal(size=(2, 2))
            if rule == "separable":
                actions[:, 0] += 1.0 if success else -1.0
            log.add(episode, 2 * c, {"state": obs.astype(np.float32)}, actions)
        record = {"seed": episode, "success": success, "score": float(success), "error": None}
        log.end(record, np.zeros(2 * chunks))


def test_it_learns_a_separable_problem_on_held_out_seeds(tmp_path) -> None:
    write_logs(tmp_path / "logs", episodes=200, chunks=5, rule="separable")
    report = train_verifier([tmp_path / "logs"], tmp_path / "v.safetensors", FAST)
    assert report.auc_held_out > 0.9 and report.auc_held_out_episodes > 0.9
    assert report.held_out_episodes == 40 and report.episodes == 200
    assert report.chunks == 1000 and report.skipped == 0


def test_it_learns_nothing_from_noise(tmp_path) -> None:
    """Labels independent of the chunks: held-out chunks rank like chance (over 60 held-out
    episodes the AUC's spread is about 0.07). The observations carry a context per episode
    that a split by chunks lets it memorise: held out by chunk, the AUC is 1.0."""
    write_logs(tmp_path / "logs", episodes=300, chunks=8, rule="noise", seed=1)
    report = train_verifier([tmp_path / "logs"], tmp_path / "v.safetensors", FAST)
    assert 0.3 < report.auc_held_out < 0.7, report.summary()
    assert report.auc_train > report.auc_held_out  # it could fit its own episodes


def test_the_file_holds_the_model_its_target_and_its_report(tmp_path) -> None:
    write_logs(tmp_path / "logs", episodes=40, chunks=3, rule="separable")
    report = train_verifier([tmp_path / "logs"], tmp_path / "v.safetensors", FAST)
    verifier = load_verifier(tmp_path / "v.safetensors")
    assert verifier.target == Target("toy", {"state": 4}, (2, 2), (("toy_parent", "f00d"),))
    assert verifier.header["report"]["auc_held_out"] == report.auc_held_out
    assert verifier.header["training"]["members"] == 3
    obs, chunks = torch.randn(6, 4), torch.randn(6, 2, 2)
    p = verifier.probabilities(obs, chunks)
    assert p.shape == (3, 6)
    torch.testing.assert_close(verifier.score(obs, chunks), p.mean(0))
    torch.testing.assert_close(
        verifier.score(obs, chunks, 2.0), p.mean(0) - 2 * p.std(0, correction=0)
    )


def test_too_few_outcomes_and_mixed_logs_are_refused(tmp_path) -> None:
    write_logs(tmp_path / "few", episodes=3, chunks=2, rule="separable")
    with pytest.raises(ValueError, match="needs successful and failed episodes in both"):
        train_verifier([tmp_path / "few"], tmp_path / "v.safetensors", FAST)
    write_logs(tmp_path / "a", episodes=10, chunks=2, rule="separable")
    other = ChunkLog(
        tmp_path / "b",
        task="toy",
        label="b",
        policy_id="b",
        batch="per-episode",
        parents=[],
        source="b",
    )
    other.add(99, 0, {"state": np.zeros(4, np.float32)}, np.zeros((3, 2)))
    other.end({"seed": 99, "success": True, "score": 1.0, "error": None}, np.zeros(3))
    with pytest.raises(ValueError, match=r"one chunk shape .* has \(2, 2\), .* has \(3, 2\)"):
        train_verifier([tmp_path / "a", tmp_path / "b"], tmp_path / "v.safetensors", FAST)


def _log(folder: Path, frames: dict[str, int], seeds: range, ordered_as: list[str] | None = None):
    """Episodes on task "toy" observing `frames` ({key: size}, each key's values its size
    times the key's index), succeeding on even seeds; logged in the key order `ordered_as`."""
    log = ChunkLog(
        folder,
        task="toy",
        label="toy",
        policy_id=folder.name,
        batch="per-episode",
        parents=[],
        source="toy",
    )
    names = list(frames)
    for seed in seeds:
        frame = {k: np.full(frames[k], names.index(k), np.float32) for k in ordered_as or names}
        actions = np.full((2, 2), 1.0 if seed % 2 == 0 else -1.0)
        log.add(seed, 0, frame, actions)
        log.end({"seed": seed, "success": seed % 2 == 0, "score": 0.0, "error": None}, np.zeros(2))


def test_logs_observing_different_keys_train_on_the_keys_they_all_could(tmp_path) -> None:
    """A parent alone logs its own keys, a composition both parents': the verifier reads every
    key, leaves out (and counts) the episodes lacking one, and lines each log's columns up by
    key, whatever order a log wrote them in."""
    _log(tmp_path / "state_only", {"state": 3}, range(0, 20))
    _log(tmp_path / "both", {"state": 3, "proprio": 2}, range(20, 40))
    _log(
        tmp_path / "both_reordered", {"state": 3, "proprio": 2}, range(40, 60), ["proprio", "state"]
    )
    report = train_verifier([tmp_path], tmp_path / "v.safetensors", FAST)
    assert (report.episodes, report.lacking_keys) == (40, 20)
    assert "20 lacking an observation key" in report.summary()
    verifier = load_verifier(tmp_path / "v.safetensors")
    assert verifier.target.obs_sizes == {"state": 3, "proprio": 2}
    # every state column holds 0 and every proprio column 1 in each log: lined up, their means too
    torch.testing.assert_close(verifier.mean[:5], torch.tensor([0.0, 0, 0, 1, 1]))
    _log(tmp_path / "other_size", {"state": 5}, range(60, 62))
    with pytest.raises(ValueError, match=r"share each observation key's size: .* has state \(size"):
        train_verifier([tmp_path], tmp_path / "w.safetensors", FAST)
    _log(tmp_path / "proprio_only", {"proprio": 2}, range(0, 4))
    with pytest.raises(ValueError, match=r"no episode's log holds every observation key"):
        train_verifier(
            [tmp_path / "state_only", tmp_path / "proprio_only"], tmp_path / "x.safetensors", FAST
        )


def _pair():
    return [tiny_policy(0), tiny_policy(1, family="diffusion")]


def preferring_larger_actions(parents, path: Path, obs_size: int = 3) -> Path:
    """A linear one-member verifier for `parents` whose success probability grows with the sum
    of the chunk's actions: its choice among candidates is known."""
    target = target_of(parents, parent_names(parents), executed=4)
    target = Target(target.task, {"state": obs_size}, target.chunk, target.parents)
    verifier = Verifier(target, members=1, layers=0)
    with torch.no_grad():
        weight = verifier.net.weights[0]
        weight.zero_()
        weight[0, obs_size:, 0] = 1.0  # the chunk's inputs
        verifier.net.biases[0].zero_()
    return verifier.save(path)


def test_the_selector_runs_the_candidate_the_verifier_rates_best(tmp_path) -> None:
    parents = _pair()
    file = preferring_larger_actions(parents, tmp_path / "v.safetensors")
    config = CompositionConfig(operator="selector", selector_score="verifier", verifier=str(file))
    policy = ComposedPolicy(parents, config)
    obs = _obs(3)
    noise = torch.randn(3, 16, 2, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        actions = policy.predict_actions(obs, noise)
        found = candidates(policy, obs, noise, per_parent=2)
    in_env_units = parents[0].action_normalizer.unnormalize(found.executed)
    best = in_env_units.sum((2, 3)).argmax(0)  # (B,): the largest actions
    torch.testing.assert_close(actions, in_env_units[best, torch.arange(3)])
    assert policy.chosen_sources == [found.sources[c] for c in best.tolist()]
    assert (
        policy.fingerprint() != ComposedPolicy(parents, CompositionConfig("selector")).fingerprint()
    )


def test_a_margin_keeps_the_composed_candidate_unless_another_clearly_beats_it(tmp_path) -> None:
    parents = _pair()
    file = preferring_larger_actions(parents, tmp_path / "v.safetensors")
    rows = 8
    obs = _obs(rows)
    noise = torch.randn(rows, 16, 2, generator=torch.Generator().manual_seed(1))
    config = CompositionConfig(operator="selector", selector_score="verifier", verifier=str(file))
    with torch.no_grad():
        plain = ComposedPolicy(parents, config)
        found = candidates(plain, obs, noise, per_parent=2)
        scores = score_of("verifier")(plain, obs, found)
    composed = found.sources.index("composition")
    gap = scores.max(0).values - scores[composed]  # (B,): how far the best beats it
    margin = float(gap.min() + gap.max()) / 2
    assert gap.min() < margin < gap.max()  # some rows switch, some keep the composed chunk
    expected = torch.where(gap <= margin, composed, scores.argmax(0))
    for m, rows_expected in ((margin, expected), (math.inf, torch.full_like(expected, composed))):
        policy = ComposedPolicy(parents, replace(config, selector_margin=m))
        with torch.no_grad():
            policy.predict_actions(obs, noise)
        assert policy.chosen_sources == [found.sources[c] for c in rows_expected.tolist()]
    assert ComposedPolicy(parents, replace(config, selector_margin=0.0)).fingerprint() == (
        plain.fingerprint()  # records written before still resume
    )
    with pytest.raises(ValueError, match="`selector_margin` must be >= 0. Got -0.1"):
        replace(config, selector_margin=-0.1)


def test_a_verifier_for_another_observation_size_is_refused_naming_the_sizes(tmp_path) -> None:
    parents = _pair()
    file = preferring_larger_actions(parents, tmp_path / "v.safetensors", obs_size=5)
    config = CompositionConfig(operator="selector", selector_score="verifier", verifier=str(file))
    with pytest.raises(
        ValueError,
        match=r"takes observation state \(size 5\); this composition observes state \(size 3\)",
    ):
        ComposedPolicy(parents, config)


def test_a_verifier_of_other_parents_or_no_verifier_file_is_refused(tmp_path) -> None:
    file = preferring_larger_actions(_pair(), tmp_path / "v.safetensors")
    others = [tiny_policy(2), tiny_policy(3, family="diffusion")]
    config = CompositionConfig(operator="selector", selector_score="verifier", verifier=str(file))
    with pytest.raises(ValueError, match=r"parent\(s\) .* are not among them"):
        ComposedPolicy(others, config)
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(ValueError, match="is not a verifier file"):
        load_verifier(text)


def test_the_config_names_the_missing_verifier_field() -> None:
    with pytest.raises(ValueError, match="`verifier` must name a verifier file"):
        method_of(CompositionConfig(operator="selector", selector_score="verifier"))
    with pytest.raises(ValueError, match="`verifier` is read by selector_score 'verifier' only"):
        method_of(CompositionConfig(operator="selector", verifier="v.safetensors"))
    with pytest.raises(ValueError, match="`verifier` missing.safetensors is not a file"):
        method_of(
            CompositionConfig(
                operator="selector", selector_score="verifier", verifier="missing.safetensors"
            )
        )
    with pytest.raises(ValueError, match="`selector_score` must be one of"):
        CompositionConfig(operator="selector", selector_score="coherence")
    assert set(SELECTOR_SCORES) <= set(SCORES) | set(CONTRASTED) | set(LEARNED)


def test_the_verb_trains_prints_the_auc_and_writes_the_file(tmp_path, capsys) -> None:
    write_logs(tmp_path / "logs" / "a", episodes=40, chunks=3, rule="separable")
    out = tmp_path / "v.safetensors"
    main(["verifier", str(tmp_path / "logs"), "--out", str(out), "members=2", "max_epochs=20"])
    printed = capsys.readouterr().out
    assert "held-out AUC" in printed and f"verifier: {out}" in printed
    assert load_verifier(out).model["members"] == 2

"""Chunk logs on a shipped checkpoint: logging changes no episode, each file holds exactly the
chunks the policy planned, a selector's chunks name the candidate it ran, and an episode's file
is complete or absent whatever interrupts it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from robocompose.chunk_log import ChunkLog, episode_files, read_episode
from robocompose.composition.api import compose
from robocompose.evaluation import evaluate
from robocompose.interrupt import ResumableInterrupt
from robocompose.policies.checkpoint import load_policy
from robocompose.policies.runner import PolicyPredictor
from tests.test_evaluation import outcomes

STACK = "Stack_flow_mlp"  # an MLP: its episodes of ~80 steps take about a second
SEEDS = [100_000, 100_001]


class Recording:
    """A real predictor that keeps every observation and chunk it was asked for and gave, and
    raises `stop` at inference number `stop_at` (as a crash or Ctrl-C would)."""

    def __init__(
        self, predictor: Any, stop_at: int | None = None, stop: type = RuntimeError
    ) -> None:
        self.inner, self.stop_at, self.stop = predictor, stop_at, stop
        self.states: list[np.ndarray] = []
        self.chunks: list[np.ndarray] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def predict_actions(self, obs: dict[str, torch.Tensor], noise: torch.Tensor) -> torch.Tensor:
        if self.stop_at is not None and len(self.chunks) == self.stop_at:
            raise self.stop("stopped inside an episode")
        chunk = self.inner.predict_actions(obs, noise)
        self.states.append(obs["state"][0, -1].numpy())
        self.chunks.append(chunk[0].numpy())
        return chunk


@pytest.fixture(scope="module")
def policy():
    return load_policy(STACK)


@pytest.fixture(scope="module")
def plain(policy):
    """SEEDS without a chunk log, one env at a time."""
    return evaluate(PolicyPredictor(policy), SEEDS, label=STACK, num_envs=1, progress=False)


def test_logging_changes_no_episode_and_logs_every_planned_chunk(tmp_path, policy, plain):
    recording = Recording(PolicyPredictor(policy))
    logged = evaluate(
        recording, SEEDS[:1], label=STACK, num_envs=1, progress=False, chunk_log=tmp_path
    )
    both = evaluate(
        PolicyPredictor(policy),
        SEEDS,
        label=STACK,
        num_envs=2,
        progress=False,
        chunk_log=tmp_path / "two",
    )
    assert outcomes(logged) == {s: v for s, v in outcomes(plain).items() if s == SEEDS[0]}
    assert outcomes(both) == outcomes(plain)
    episode = read_episode(tmp_path / f"seed_{SEEDS[0]}.npz")
    record = logged.records[0]
    n_exec = policy.config.n_action_steps
    assert len(episode.step) == len(recording.chunks) == -(-record["length"] // n_exec)
    np.testing.assert_array_equal(episode.step, np.arange(len(episode.step)) * n_exec)
    np.testing.assert_array_equal(episode.actions, np.stack(recording.chunks))
    np.testing.assert_array_equal(episode.obs, np.stack(recording.states).astype(np.float32))
    assert set(episode.source) == {STACK}
    assert episode.success == record["success"] and episode.score == record["score"]
    assert len(episode.rewards) == record["length"]
    assert episode.rewards.sum() == pytest.approx(record["return"])
    np.testing.assert_allclose(episode.return_to_go[0], record["return"])
    meta = episode.meta
    assert meta["obs_keys"] == ["state"] and meta["obs_sizes"] == {"state": 19}
    assert meta["parents"] == [{"name": STACK, "fingerprint": policy.fingerprint()}]
    assert meta["record"] == record
    # two envs at once: the same chunks, each under its own seed
    again = read_episode(tmp_path / "two" / f"seed_{SEEDS[0]}.npz")
    np.testing.assert_array_equal(again.actions, episode.actions)
    assert [p.name for p in episode_files([tmp_path / "two"])] == [f"seed_{s}.npz" for s in SEEDS]


def test_a_selectors_chunks_name_the_candidate_it_ran(tmp_path) -> None:
    parents = [load_policy("Stack_diffusion_mlp"), load_policy(STACK)]
    selector = compose(parents, "selector", (0.5, 0.5))
    chosen: list[str] = []
    predict = selector.predict_actions

    def recording(obs, noise):
        actions = predict(obs, noise)
        chosen.extend(selector.chosen_sources)
        return actions

    selector.predict_actions = recording
    evaluate(selector, SEEDS[:1], num_envs=1, progress=False, chunk_log=tmp_path)
    episode = read_episode(tmp_path / f"seed_{SEEDS[0]}.npz")
    names = {"parent0": "Stack_diffusion_mlp", "parent1": STACK, "composition": "composition"}
    assert list(episode.source) == [names[c] for c in chosen]
    assert len(chosen) == len(episode.step) > 1


@pytest.mark.parametrize("stop", [RuntimeError, KeyboardInterrupt])
def test_an_interrupted_episode_leaves_no_file_and_a_finished_one_a_whole_one(
    tmp_path, policy, plain, stop
) -> None:
    """Stopped inside the second episode: the first one's file is whole, the second has none
    (not even a temporary file); the resumed run writes it, the same as uninterrupted."""
    out, folder = tmp_path / "episodes.jsonl", tmp_path / "chunks"
    first = Recording(PolicyPredictor(policy))
    evaluate(first, SEEDS[:1], label=STACK, num_envs=1, progress=False)
    stopping = Recording(PolicyPredictor(policy), stop_at=len(first.chunks) + 2, stop=stop)
    expected = ResumableInterrupt if stop is KeyboardInterrupt else RuntimeError
    with pytest.raises(expected):
        evaluate(
            stopping, SEEDS, out=out, label=STACK, num_envs=1, progress=False, chunk_log=folder
        )
    assert sorted(p.name for p in folder.iterdir()) == [f"seed_{SEEDS[0]}.npz"]
    whole = read_episode(folder / f"seed_{SEEDS[0]}.npz")
    np.testing.assert_array_equal(whole.actions, np.stack(first.chunks))
    resumed = evaluate(policy, SEEDS, out=out, label=STACK, progress=False, chunk_log=folder)
    assert outcomes(resumed) == outcomes(plain)
    assert len(read_episode(folder / f"seed_{SEEDS[1]}.npz").step) > 1


def test_a_write_that_fails_leaves_no_file_at_all(tmp_path, monkeypatch) -> None:
    log = ChunkLog(
        tmp_path, task="t", label="p", policy_id="x", batch="per-episode", parents=[], source="p"
    )
    log.add(7, 0, {"state": np.zeros(3, np.float32)}, np.zeros((2, 2)))

    def torn(file, **arrays):
        file.write(b"PK\x03\x04 half a zip")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez_compressed", torn)
    with pytest.raises(OSError, match="disk full"):
        log.end({"seed": 7, "success": True, "score": 1.0}, np.zeros(2))
    assert not list(tmp_path.iterdir())


def test_a_folder_of_another_policy_is_refused_and_unlogged_reuse_is_counted(
    tmp_path, policy
) -> None:
    out = tmp_path / "episodes.jsonl"
    evaluate(policy, SEEDS[:1], out=out, label=STACK, progress=False)
    with pytest.warns(UserWarning, match=r"1 of 1 episodes \(the first: seed 100000\) were"):
        evaluate(policy, SEEDS[:1], out=out, label=STACK, progress=False, chunk_log=tmp_path)
    evaluate(policy, SEEDS[1:], label=STACK, progress=False, chunk_log=tmp_path)
    other = load_policy("Stack_diffusion_mlp")
    with pytest.raises(ValueError, match="one chunk log folder holds one policy's episodes"):
        evaluate(other, SEEDS[:1], progress=False, chunk_log=tmp_path)


def test_a_file_that_is_no_episode_log_names_itself(tmp_path: Path) -> None:
    bad = tmp_path / "seed_1.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="seed_1.npz is not a chunk log episode file"):
        read_episode(bad)
    with pytest.raises(FileNotFoundError, match="no chunk log episode file"):
        episode_files([tmp_path / "empty"])

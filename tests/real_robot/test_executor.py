"""ChunkExecutor on a deterministic ramp policy whose answers the test releases tick by tick, so
latency is counted in ticks and nothing depends on the machine's speed."""

from __future__ import annotations

import re
import threading
import time

import numpy as np
import pytest

from robocompose.real_robot.base import ObsKeySpec, PolicySpec
from robocompose.real_robot.executor import (
    Chunk,
    ChunkExecutor,
    ExecutorConfig,
    ObsHistory,
    ticks_per_step,
)

SPEC = PolicySpec(
    obs={"x": ObsKeySpec((1,), "float64")},
    n_obs_steps=2,
    action_dim=2,
    chunk_length=8,
    n_action_steps=4,
    control_hz=10.0,
)


class GatedRamp:
    """A policy on a line: from the observed position p (policy steps) it plans p, p+1, ...
    Each answer waits for the test's `release()`; every request is recorded."""

    def __init__(self, gated: bool = True, corrupt: str | None = None) -> None:
        self.gate = threading.Semaphore(0)
        self.gated = gated
        self.corrupt = corrupt
        self.requests: list[dict] = []

    def release(self) -> None:
        self.gate.release()

    def __call__(self, obs: dict) -> np.ndarray:
        self.requests.append(obs)
        if self.gated:
            assert self.gate.acquire(timeout=10), "the test never released the answer"
        p = float(obs["x"][-1, 0])
        actions = np.stack([p + np.arange(SPEC.chunk_length), np.zeros(SPEC.chunk_length)], 1)
        if self.corrupt == "nan":
            actions[3, 0] = np.nan
        if self.corrupt == "shape":
            actions = actions[:, :1]
        if self.corrupt == "raise":
            raise ConnectionError("server gone")
        return actions


def frame(tick: int, step_ticks: int = 1) -> dict[str, np.ndarray]:
    return {"x": np.array([tick / step_ticks])}


def run(executor: ChunkExecutor, ticks: range, policy: GatedRamp, answer_after: int, tps: int = 1):
    """Drive `ticks`; a request is answered `answer_after` ticks after it was sent."""
    actions, events, sent_at = {}, [], None
    for tick in ticks:
        if sent_at is not None and tick - sent_at >= answer_after:
            policy.release()
            assert executor.settle(10)
            sent_at = None
        decision = executor.act(tick, frame(tick, tps), deadline_s=time.monotonic())
        events += [e | {"tick": tick} for e in decision.events]
        if any(e["event"] == "request" for e in decision.events):
            sent_at = tick
        if decision.action is not None:
            actions[tick] = decision.action
    return actions, events


def make(mode: str, policy: GatedRamp, **kwargs) -> ChunkExecutor:
    return ChunkExecutor(policy, SPEC, ExecutorConfig(mode=mode, **kwargs))


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match=r"`rate_hz` must be in \[10, 50\]. Got 5."):
        ExecutorConfig(rate_hz=5)
    with pytest.raises(ValueError, match="`mode` must be one of"):
        ExecutorConfig(mode="fast")
    with pytest.raises(ValueError, match="integer multiple of the policy's control_hz"):
        ticks_per_step(15.0, 10.0)
    assert ticks_per_step(50.0, 10.0) == 5


def test_sync_waits_for_each_chunk_then_runs_n_action_steps():
    policy = GatedRamp()
    actions, events = run(make("sync", policy), range(20), policy, answer_after=2)
    waits = [e for e in events if e["event"] == "resume"]
    assert [e["waited_ticks"] for e in waits] == [2, 2, 2]
    # each chunk starts where its observation was taken: the arm paused, the plan restarts there
    assert [actions[t][0] for t in (2, 3, 4, 5)] == [0, 1, 2, 3]
    assert 6 not in actions and 7 not in actions
    assert [actions[t][0] for t in (8, 9, 10, 11)] == [6, 7, 8, 9]


def test_async_drops_stale_actions_and_follows_the_plan_in_time():
    policy = GatedRamp()
    actions, events = run(make("async", policy), range(40), policy, answer_after=3)
    # after the first chunk arrives the arm never waits, and every action is the one planned
    # for its own tick (latency compensated): the ramp's value at that tick
    assert sorted(actions) == list(range(3, 40))
    assert all(actions[t][0] == t for t in actions)
    chunks = [e for e in events if e["event"] == "chunk"]
    assert len(chunks) >= 8 and all(e["dropped_stale"] == 3 for e in chunks)


def test_async_sends_the_queued_actions_as_prefix():
    policy = GatedRamp()
    run(make("async", policy), range(12), policy, answer_after=2)
    first, second = policy.requests[0], policy.requests[1]
    assert "prefix_actions" not in first
    # requested at tick 4 (n_action_steps after the first request): the chunk planned at tick 0
    # still covers ticks 4..7, which are the new chunk's first four steps
    np.testing.assert_array_equal(second["prefix_actions"], [[4, 0], [5, 0], [6, 0], [7, 0]])
    # the first answer took 2 ticks: the first 2 prefix actions run before the next can arrive
    assert second["prefix_committed"] == 2
    assert second["chunk_index"] == 1 and second["seed"] == 0
    policy_no_rtc = GatedRamp()
    run(make("async", policy_no_rtc, rtc=False), range(12), policy_no_rtc, answer_after=2)
    assert all("prefix_actions" not in r for r in policy_no_rtc.requests)


def test_ensemble_blends_overlapping_chunks_oldest_weighted_most():
    policy = GatedRamp()
    m = 0.5
    executor = make("ensemble", policy, ensemble_decay=m)
    actions, _ = run(executor, range(6), policy, answer_after=1)
    # a ramp is consistent with itself, so blending changes nothing
    assert all(actions[t][0] == pytest.approx(t) for t in actions)
    chunks = [
        Chunk(np.full((8, 1), 1.0), 0, 1, 8, True),
        Chunk(np.full((8, 1), 3.0), 1, 1, 8, True),
    ]
    executor._chunks = chunks
    w = np.exp(-m * np.arange(2))
    assert executor._action(2)[0] == pytest.approx((w @ [1.0, 3.0]) / w.sum())


def test_linear_interpolation_between_policy_steps_at_50_hz():
    chunk = Chunk(np.array([[0.0], [1.0], [3.0]]), anchor=10, step_ticks=5, limit=3, linear=True)
    assert [chunk.value_at(t)[0] for t in range(10, 21)] == pytest.approx(
        [0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.4, 1.8, 2.2, 2.6, 3.0]
    )
    assert chunk.value_at(9) is None and chunk.value_at(25) is None
    held = Chunk(chunk.actions, 10, 5, 3, linear=False)
    assert [held.value_at(t)[0] for t in (10, 14, 15, 19)] == [0, 0, 1, 1]
    policy = GatedRamp()
    actions, _ = run(make("async", policy, rate_hz=50), range(60), policy, 7, tps=5)
    # the ramp is linear in time, so the interpolated actions follow it at every tick
    assert all(actions[t][0] == pytest.approx(t / 5) for t in actions)


@pytest.mark.parametrize(
    "corrupt,reason",
    [
        ("nan", "NaN or inf"),
        ("shape", r"actions must have shape \(chunk, 2\). Got \(8, 1\)"),
        ("raise", "ConnectionError: server gone"),
    ],
)
def test_bad_answers_are_refused_and_retried_with_backoff(corrupt, reason):
    policy = GatedRamp(gated=False, corrupt=corrupt)
    executor = make("async", policy, retry_s=(0.2, 0.4))
    events = []
    for tick in range(12):
        decision = executor.act(tick, frame(tick), deadline_s=time.monotonic() + 5)
        assert decision.action is None
        events += [e | {"tick": tick} for e in decision.events]
    failed = [e for e in events if e["event"] == "request_failed"]
    assert failed and all(re.search(reason, e["reason"]) for e in failed)
    # retries 2 ticks (0.2 s at 10 Hz), then 4, then 4 (the longest) apart
    assert [e["tick"] for e in events if e["event"] == "request"] == [0, 2, 6, 10]
    policy.corrupt = None
    for tick in range(12, 16):
        decision = executor.act(tick, frame(tick), deadline_s=time.monotonic() + 5)
    assert decision.action is not None and decision.action[0] == 15


def test_requests_past_the_servers_chunk_index_range_go_unseeded(monkeypatch):
    """A server refuses a chunk_index past MAX_CHUNK_INDEX: an episode that long asks on
    with fresh noise instead of failing every request (the range made 1 here)."""
    monkeypatch.setattr("robocompose.real_robot.executor.MAX_CHUNK_INDEX", 1)
    policy = GatedRamp()
    run(make("async", policy, rtc=False), range(14), policy, answer_after=1)
    indices = [r.get("chunk_index") for r in policy.requests]
    assert indices[:3] == [0, 1, None] and "seed" not in policy.requests[2]


def test_an_answer_to_a_previous_episode_is_discarded():
    policy = GatedRamp()
    executor = make("async", policy)
    executor.act(0, frame(0), deadline_s=time.monotonic())
    executor.reset(seed=7)
    policy.release()
    assert executor.settle(10)
    decision = executor.act(0, frame(100), deadline_s=time.monotonic())
    assert [e["event"] for e in decision.events][:1] == ["discard"]
    policy.release()
    assert executor.settle(10)
    decision = executor.act(1, frame(101), deadline_s=time.monotonic())
    assert decision.action[0] == 101 and policy.requests[-1]["seed"] == 7


def test_history_repeats_the_first_frame_and_keeps_one_frame_per_step():
    history = ObsHistory(3)
    assert history.push(0, {"x": np.array([0.0])}, step_ticks=5)
    np.testing.assert_array_equal(history.stacked()["x"][:, 0], [0, 0, 0])
    assert not history.push(3, {"x": np.array([3.0])}, step_ticks=5)
    assert history.push(5, {"x": np.array([5.0])}, step_ticks=5)
    np.testing.assert_array_equal(history.stacked()["x"][:, 0], [0, 0, 5])


def test_a_bad_observation_is_refused_and_the_queued_actions_keep_running():
    policy = GatedRamp(gated=False)
    executor = make("async", policy)
    executor.act(0, frame(0), deadline_s=time.monotonic() + 5)
    for bad, reason in [
        ({"y": np.zeros(1)}, "observation has no `x`"),
        ({"x": np.zeros(2)}, r"`x` must have shape \(1,\). Got \(2,\)."),
        ({"x": np.array([np.nan])}, "`x` holds NaN or inf"),
    ]:
        decision = executor.act(1, bad, deadline_s=time.monotonic())
        assert re.search(reason, decision.events[0]["reason"])
        assert decision.action[0] == 1  # the chunk planned at tick 0
    assert len(policy.requests) == 1
    np.testing.assert_array_equal(executor.history.stacked()["x"][:, 0], [0, 0])

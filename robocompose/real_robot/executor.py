"""Chunk execution on a fixed-rate loop: which action the arm gets at each control tick.

A policy answers an observation with a chunk of actions, one per policy step (1 / control_hz
apart); the robot loop ticks at `rate_hz`, an integer multiple of control_hz. Every chunk is pinned
to the tick its actions start at (its anchor): action i belongs to tick anchor + i * ticks_per_step,
and between those ticks the loop holds action i or moves linearly toward action i + 1.

Inference runs in one background thread in every mode, so the loop never blocks on the network;
the modes differ in when they ask and how a new chunk joins the old one:

- sync: ask when the chunk's `n_action_steps` are done and wait (the arm holds its target) until
  the answer arrives; the chunk starts at the tick it arrives. The waits are the cost measured.
- ensemble: ask every `ensemble_every_steps` policy steps; every chunk starts at the tick of the
  observation it came from, and the predictions of all chunks for one tick are blended with
  weights exp(-m * i), i = 0 the oldest (temporal ensembling, Zhao et al. 2023, ACT).
- async: ask `n_action_steps` after the last request while the current chunk still runs; the new
  chunk starts at its observation's tick, so on arrival the actions whose tick has passed are
  dropped (latency compensation). With `rtc`, the request carries the current chunk's actions
  for the new chunk's first steps as "prefix_actions", which the policy inpaints (real-time
  chunking), so the two chunks join without a jump; "prefix_committed" says how many of them run
  before the answer can arrive (the longest of the last few latencies, in policy steps).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robocompose.real_robot.base import PolicySpec
from robocompose.real_robot.obs_check import (
    CHUNK_INDEX_KEY,
    MAX_CHUNK_INDEX,
    PREFIX_COMMITTED_KEY,
    PREFIX_KEY,
    SEED_KEY,
)

MODES = ("sync", "ensemble", "async")
INTERPOLATIONS = ("linear", "hold")
MIN_RATE_HZ, MAX_RATE_HZ = 10.0, 50.0

LATENCY_MEMORY = 5  # answers whose latency sets the committed prefix of the next request
ChunkSource = Callable[[dict[str, Any]], np.ndarray]  # observation -> actions (chunk, A)


@dataclass(kw_only=True)
class ExecutorConfig:
    """How chunks become per-tick actions (see the module docstring for the modes)."""

    mode: str = "async"
    rate_hz: float = 10.0  # control loop rate; an integer multiple of the policy's control_hz
    interpolation: str = "linear"  # between policy steps: "linear" or "hold" (zero-order)
    n_action_steps: int | None = None  # sync: steps run per chunk; async: steps between requests
    # ensemble: a new chunk every this many policy steps. Not every step, as ACT does: a chunk
    # asked for at every step runs only its first actions, and our policies put a release late
    # in a chunk, so blended plans keep postponing it; success at 4 against direct evaluation is
    # `success.modes.ensemble` in benchmarks/results/real_robot.json.
    ensemble_every_steps: int = 4
    ensemble_decay: float = 0.01  # ensemble: m in the weights exp(-m * i)
    rtc: bool = True  # async: send the queued actions as "prefix_actions" (real-time chunking)
    retry_s: tuple[float, float] = (0.1, 2.0)  # after a failed request: first and longest wait

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"`mode` must be one of {MODES}. Got {self.mode!r}.")
        if not MIN_RATE_HZ <= self.rate_hz <= MAX_RATE_HZ:
            raise ValueError(
                f"`rate_hz` must be in [{MIN_RATE_HZ:g}, {MAX_RATE_HZ:g}]. Got {self.rate_hz:g}."
            )
        if self.interpolation not in INTERPOLATIONS:
            raise ValueError(
                f"`interpolation` must be one of {INTERPOLATIONS}. Got {self.interpolation!r}."
            )
        if self.n_action_steps is not None and self.n_action_steps < 1:
            raise ValueError(f"`n_action_steps` must be >= 1 or None. Got {self.n_action_steps}.")
        if self.ensemble_every_steps < 1:
            raise ValueError(
                f"`ensemble_every_steps` must be >= 1. Got {self.ensemble_every_steps}."
            )
        if self.ensemble_decay < 0:
            raise ValueError(f"`ensemble_decay` must be >= 0. Got {self.ensemble_decay}.")
        first, longest = self.retry_s
        if not 0 < first <= longest:
            raise ValueError(
                f"`retry_s` must be (first, longest) with 0 < first <= longest. Got {self.retry_s}."
            )


def ticks_per_step(rate_hz: float, control_hz: float) -> int:
    """Loop ticks per policy step; the loop rate must be an integer multiple of the policy's."""
    ratio = rate_hz / control_hz
    if ratio < 1 - 1e-6 or abs(ratio - round(ratio)) > 1e-6:
        raise ValueError(
            f"`rate_hz` must be an integer multiple of the policy's control_hz "
            f"({control_hz:g} Hz). Got {rate_hz:g}."
        )
    return round(ratio)


@dataclass(frozen=True)
class Chunk:
    """A chunk pinned to the loop's ticks: actions[i] belongs to tick anchor + i * step_ticks."""

    actions: np.ndarray  # (chunk, A)
    anchor: int
    step_ticks: int
    limit: int  # how many of the actions may run (sync: n_action_steps)
    linear: bool

    @property
    def end(self) -> int:
        """The first tick past the chunk's last runnable action."""
        return self.anchor + self.limit * self.step_ticks

    def value_at(self, tick: int) -> np.ndarray | None:
        """The action for `tick` (held or interpolated), or None outside the chunk."""
        if not self.anchor <= tick < self.end:
            return None
        i, rest = divmod(tick - self.anchor, self.step_ticks)
        if not self.linear or rest == 0 or i + 1 >= len(self.actions):
            return self.actions[i]
        frac = rest / self.step_ticks
        return (1 - frac) * self.actions[i] + frac * self.actions[i + 1]


@dataclass
class Decision:
    """What one tick yields: the action to send (None: keep the arm's target) and mode events."""

    action: np.ndarray | None
    events: list[dict[str, Any]] = field(default_factory=list)
    waiting: bool = False  # no action because the loop waits for a chunk
    latency_s: float | None = None  # inference latency of a chunk that arrived this tick


@dataclass
class _Request:
    future: Future
    obs_tick: int
    sent_s: float
    generation: int
    prefix_steps: int


class ObsHistory:
    """The last `n_obs_steps` frames, one per policy step, stacked as the policy expects:
    key -> (n_obs_steps, *shape); after a reset the first frame fills the history."""

    def __init__(self, n_obs_steps: int) -> None:
        self.frames: deque[dict[str, np.ndarray]] = deque(maxlen=n_obs_steps)
        self.last_tick: int | None = None

    def reset(self) -> None:
        self.frames.clear()
        self.last_tick = None

    def push(self, tick: int, frame: dict[str, np.ndarray], step_ticks: int) -> bool:
        """Keep `frame` if a policy step has passed since the last kept one; True if kept."""
        if self.last_tick is not None and tick - self.last_tick < step_ticks:
            return False
        if not self.frames:
            self.frames.extend([frame] * self.frames.maxlen)
        else:
            self.frames.append(frame)
        self.last_tick = tick
        return True

    def refresh(self, tick: int, frame: dict[str, np.ndarray]) -> None:
        """Replace the newest frame by `frame`: a request between policy steps sees the present."""
        self.frames[-1] = frame
        self.last_tick = tick

    def stacked(self) -> dict[str, np.ndarray]:
        return {k: np.stack([f[k] for f in self.frames]) for k in self.frames[-1]}


class ChunkExecutor:
    """Turns a chunk source (a policy client, or a policy in-process) into one action per tick.

    The caller runs the fixed-rate loop: `reset(seed)` at an episode's start, then `act(tick,
    frame, deadline_s)` once per tick with the current observation frame, and sends the decision's
    action through the safety layer. Requests carry the episode seed and the chunk's index in the
    episode, so an episode's sampling noise does not depend on timing (the first
    MAX_CHUNK_INDEX + 1 requests of an episode; a server refuses larger indices)."""

    def __init__(self, source: ChunkSource, spec: PolicySpec, config: ExecutorConfig) -> None:
        self.source = source
        self.spec = spec
        self.config = config
        self.step_ticks = ticks_per_step(config.rate_hz, spec.control_hz)
        self.n_action_steps = config.n_action_steps or spec.n_action_steps
        self.history = ObsHistory(spec.n_obs_steps)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chunk-request")
        self._request: _Request | None = None
        self._generation = 0
        self.reset()

    def reset(self, seed: int = 0) -> None:
        """Forget chunks and history; a request still in flight is discarded when it lands."""
        if seed < 0:
            raise ValueError(f"`seed` must be >= 0. Got {seed}.")
        self._generation += 1
        self._seed = seed
        self._requests_sent = 0
        self._chunks: list[Chunk] = []
        self._last_request_tick: int | None = None
        self._retry_tick: int | None = None
        self._retry_wait_s = self.config.retry_s[0]
        self._waiting_since_tick: int | None = None
        self._latency_steps: deque[int] = deque(maxlen=LATENCY_MEMORY)
        self.history.reset()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def settle(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the request in flight to be answered; True if none is left
        unanswered (its answer is taken at the next `act`)."""
        if self._request is None:
            return True
        done, _ = wait([self._request.future], timeout=timeout_s)
        return bool(done)

    # ---- per tick ---------------------------------------------------------------------------

    def act(self, tick: int, frame: dict[str, np.ndarray], deadline_s: float) -> Decision:
        """The action for `tick`; `frame` is the observation read at this tick, `deadline_s`
        (time.monotonic) when the tick's time is up: with nothing to run, wait for an answer in
        flight until then."""
        events: list[dict[str, Any]] = []
        problem = self._check_frame(frame)
        if problem:  # a bad reading: keep the history and the queued actions, ask nothing
            events.append({"event": "observation_refused", "reason": problem})
            new_frame = False
        else:
            frame = {k: np.asarray(frame[k], dtype=ks.dtype) for k, ks in self.spec.obs.items()}
            new_frame = self.history.push(tick, frame, self.step_ticks)
        latency = self._collect(tick, events)
        self._chunks = [c for c in self._chunks if c.end > tick]
        if not problem and self.history.frames and self._should_request(tick):
            if not new_frame:
                self.history.refresh(tick, frame)
            self._submit(tick, events)
        action = self._action(tick)
        if action is None and self._request is not None:
            remaining = deadline_s - time.monotonic()
            if remaining > 0:
                wait([self._request.future], timeout=remaining)
                latency = self._collect(tick, events) or latency
                action = self._action(tick)
        waiting = action is None
        if waiting and self._waiting_since_tick is None:
            self._waiting_since_tick = tick
            events.append({"event": "wait", "reason": self._wait_reason()})
        elif not waiting and self._waiting_since_tick is not None:
            events.append({"event": "resume", "waited_ticks": tick - self._waiting_since_tick})
            self._waiting_since_tick = None
        return Decision(action, events, waiting, latency)

    def _check_frame(self, frame: dict[str, Any]) -> str | None:
        """Why an observation frame cannot go to the policy (key, shape, NaN), or None."""
        for key, spec in self.spec.obs.items():
            if key not in frame:
                return f"observation has no `{key}` (has {sorted(frame)})"
            value = np.asarray(frame[key])
            if value.shape != spec.shape:
                return f"`{key}` must have shape {spec.shape}. Got {value.shape}."
            if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
                return f"`{key}` holds NaN or inf"
        return None

    def _wait_reason(self) -> str:
        if self._request is not None:
            return "request in flight"
        if self._retry_tick is not None:
            return "retrying after a failed request"
        return "no chunk"

    def _should_request(self, tick: int) -> bool:
        if self._request is not None or (self._retry_tick is not None and tick < self._retry_tick):
            return False
        if not self._chunks or self._last_request_tick is None:
            return True
        since_steps = (tick - self._last_request_tick) // self.step_ticks
        if self.config.mode == "sync":
            return False  # the chunk is still running (exhausted chunks are already gone)
        if self.config.mode == "ensemble":
            return since_steps >= self.config.ensemble_every_steps
        return since_steps >= self.n_action_steps

    def _submit(self, tick: int, events: list[dict[str, Any]]) -> None:
        obs: dict[str, Any] = self.history.stacked()
        if self._requests_sent <= MAX_CHUNK_INDEX:  # past it (hours of one episode): fresh noise
            obs[SEED_KEY], obs[CHUNK_INDEX_KEY] = self._seed, self._requests_sent
        prefix = self._prefix(tick) if self.config.mode == "async" and self.config.rtc else None
        if prefix is not None:
            obs[PREFIX_KEY] = prefix
            expected = max(self._latency_steps, default=1)
            obs[PREFIX_COMMITTED_KEY] = min(len(prefix), expected)
        self._requests_sent += 1
        self._last_request_tick = tick
        self._request = _Request(
            self._pool.submit(self.source, obs),
            tick,
            time.monotonic(),
            self._generation,
            0 if prefix is None else len(prefix),
        )
        events.append(
            {"event": "request", "obs_tick": tick, "prefix_steps": self._request.prefix_steps}
        )

    def _prefix(self, tick: int) -> np.ndarray | None:
        """The current chunk's actions at the new chunk's first policy steps (ticks from `tick`)."""
        if not self._chunks:
            return None
        chunk, values = self._chunks[-1], []
        for i in range(self.spec.chunk_length):
            value = chunk.value_at(tick + i * self.step_ticks)
            if value is None:
                break
            values.append(value)
        return np.stack(values).astype(np.float32) if values else None

    def _collect(self, tick: int, events: list[dict[str, Any]]) -> float | None:
        """Take a finished request's chunk (or its failure); its latency if one arrived."""
        request = self._request
        if request is None or not request.future.done():
            return None
        self._request = None
        latency = time.monotonic() - request.sent_s
        if request.generation != self._generation:
            events.append({"event": "discard", "reason": "answer to a previous episode"})
            return None
        error = request.future.exception()
        if error is not None:
            self._fail(tick, f"inference failed: {type(error).__name__}: {error}", events)
            return None
        actions = np.asarray(request.future.result())
        problem = self._check(actions)
        if problem:
            self._fail(tick, f"chunk refused: {problem}", events)
            return None
        self._retry_tick, self._retry_wait_s = None, self.config.retry_s[0]
        self._adopt(tick, request, actions, latency, events)
        return latency

    def _fail(self, tick: int, reason: str, events: list[dict[str, Any]]) -> None:
        wait_s = self._retry_wait_s
        self._retry_tick = tick + max(1, math.ceil(wait_s * self.config.rate_hz))
        self._retry_wait_s = min(2 * wait_s, self.config.retry_s[1])
        events.append({"event": "request_failed", "reason": reason, "retry_in_s": wait_s})

    def _check(self, actions: np.ndarray) -> str | None:
        if actions.ndim != 2 or actions.shape[1] != self.spec.action_dim or len(actions) == 0:
            return (
                f"actions must have shape (chunk, {self.spec.action_dim}). "
                f"Got {tuple(actions.shape)}."
            )
        if not np.issubdtype(actions.dtype, np.number) or not np.all(np.isfinite(actions)):
            return "actions hold NaN or inf values"
        return None

    def _adopt(
        self,
        tick: int,
        request: _Request,
        actions: np.ndarray,
        latency_s: float,
        events: list[dict[str, Any]],
    ) -> None:
        actions = actions.astype(np.float64)
        self._latency_steps.append(math.ceil((tick - request.obs_tick) / self.step_ticks))
        linear = self.config.interpolation == "linear"
        event = {"event": "chunk", "latency_s": round(latency_s, 4), "obs_tick": request.obs_tick}
        if self.config.mode == "sync":
            limit = min(self.n_action_steps, len(actions))
            self._chunks = [Chunk(actions, tick, self.step_ticks, limit, linear)]
            events.append(event | {"start_tick": tick})
            return
        chunk = Chunk(actions, request.obs_tick, self.step_ticks, len(actions), linear)
        dropped = max(0, math.ceil((tick - chunk.anchor) / self.step_ticks))
        event |= {"dropped_stale": min(dropped, len(actions))}
        if chunk.end <= tick:
            events.append(event | {"event": "chunk_stale"})
            return
        if self.config.mode == "async":
            self._chunks = [chunk]
        else:
            self._chunks.append(chunk)
        events.append(event)

    def plan(self, tick: int, max_ticks: int) -> np.ndarray | None:
        """The actions the current chunks give for ticks `tick`, `tick` + 1, ... (at most
        `max_ticks`, up to the first tick they give none): what a control process is sent."""
        values = []
        for future_tick in range(tick, tick + max_ticks):
            value = self._action(future_tick)
            if value is None:
                break
            values.append(value)
        return np.stack(values) if values else None

    def _action(self, tick: int) -> np.ndarray | None:
        values = [v for c in self._chunks if (v := c.value_at(tick)) is not None]
        if not values:
            return None
        if self.config.mode != "ensemble" or len(values) == 1:
            return values[-1]
        weights = np.exp(-self.config.ensemble_decay * np.arange(len(values)))
        return np.tensordot(weights / weights.sum(), np.stack(values), axes=1)

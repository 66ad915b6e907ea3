"""Run a chunk-predicting policy in vector envs: observation history and action queues per env.

The evaluation harness calls `runner(obs)` with batched observations (num_envs, ...) and
`runner.reset(mask)` when envs start new episodes. Each env keeps its last `n_obs_steps`
observations (the first one repeated after a reset, as Diffusion Policy pads) and a queue of
executed actions. Envs whose queue is empty are re-planned each as its own batch of one (the
default): batched inference rounds differently per batch size, and contact dynamics amplify
that into other outcomes, so only per-episode inference gives an episode the same actions
whatever `num_envs`, the launcher or a resume. `batch_invariant=False` re-plans them together in
one batched call instead: faster, but an episode then depends on which episodes shared its batch.
A `ChunkRecorder` given to the runner sees every planned chunk (`robocompose.chunk_log`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np
import torch


class ChunkPredictor(Protocol):
    """Anything that maps observation history (and unit noise) to the actions to execute next."""

    obs_keys: tuple[str, ...]
    n_obs_steps: int
    noise_shape: tuple[int, ...]  # per env, e.g. (H, A)
    device: torch.device  # where observations and noise are sent
    dtype: torch.dtype  # what floating-point type the noise is sent in

    def predict_actions(self, obs: dict[str, torch.Tensor], noise: torch.Tensor) -> torch.Tensor:
        """{key: (B, n_obs_steps, ...)}, noise (B, *noise_shape) -> (B, n_action_steps, A)."""
        ...

    def fingerprint(self) -> str:
        """Changes whenever the actions could: weights, config, sampler settings."""
        ...


class ChunkRecorder(Protocol):
    """What sees each planned chunk (`robocompose.chunk_log.ChunkLog`)."""

    def add(
        self,
        seed: int,
        step: int,
        frame: Mapping[str, np.ndarray],
        actions: np.ndarray,
        source: str | None = None,
    ) -> None:
        """Episode `seed`'s chunk `actions` (n, A), planned at episode step `step` from the
        current observation `frame`; `source`: which candidate a predictor that picks per row
        chose ("parent<i>" or "composition"), None for one that does not."""
        ...


def _noise_seed(runner_seed: int, episode_seed: int) -> int:
    return (runner_seed * 1_000_003 + episode_seed) % (2**63)


class PolicyRunner:
    """The harness-facing callable around a `ChunkPredictor`; `recorder` sees every chunk it
    plans (None: nothing is recorded). A predictor that picks each row's chunk among candidates
    says which in its `chosen_sources` after each call."""

    def __init__(
        self,
        predictor: ChunkPredictor,
        seed: int = 0,
        batch_invariant: bool = True,
        recorder: ChunkRecorder | None = None,
    ) -> None:
        self.predictor = predictor
        self.seed = seed
        self.batch_invariant = batch_invariant
        self.recorder = recorder
        self._history: list[deque[dict[str, np.ndarray]]] = []
        self._queue: list[deque[np.ndarray]] = []
        self._noise: list[torch.Generator] = []
        self._episode: list[int] = []  # each env's episode seed (-1: none), for the recorder
        self._steps: list[int] = []  # actions each env has run in its episode

    def reset(self, mask: np.ndarray | None = None, seeds: np.ndarray | None = None) -> None:
        """Forget the masked envs' history; their sampling noise restarts from their episode seed,
        so an episode's actions do not depend on which slot or batch it ran in."""
        if mask is None:
            self._history, self._queue, self._noise, self._episode, self._steps = [], [], [], [], []
            return
        self._grow(len(mask))
        for i in np.flatnonzero(mask):
            self._history[i].clear()
            self._queue[i].clear()
            episode_seed = int(seeds[i]) if seeds is not None else i
            self._noise[i].manual_seed(_noise_seed(self.seed, episode_seed))
            self._episode[i], self._steps[i] = episode_seed, 0

    def _grow(self, num_envs: int) -> None:
        while len(self._history) < num_envs:
            self._history.append(deque(maxlen=self.predictor.n_obs_steps))
            self._queue.append(deque())
            generator = torch.Generator()
            generator.manual_seed(_noise_seed(self.seed, len(self._noise)))
            self._noise.append(generator)
            self._episode.append(-1)
            self._steps.append(0)

    def observe(self, frames: Sequence[Mapping[str, np.ndarray]], i: int = 0) -> None:
        """Add `frames` (oldest first) to env i's history without acting on them, the first
        padded as an episode's first is: a policy taking over an episode midway (the finisher
        of `robocompose.composition.counterfactual`) plans from what the episode saw."""
        self._grow(i + 1)
        for frame in frames:
            self._observe(i, frame)

    def _observe(self, i: int, frame: Mapping[str, np.ndarray]) -> None:
        frame = {k: np.array(frame[k]) for k in self.predictor.obs_keys}
        history = self._history[i]
        if not history:
            history.extend([frame] * self.predictor.n_obs_steps)
        else:
            history.append(frame)

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        num_envs = len(next(iter(obs.values())))
        self._grow(num_envs)
        for i in range(num_envs):
            self._observe(i, {k: obs[k][i] for k in self.predictor.obs_keys})
        replan = [i for i in range(num_envs) if not self._queue[i]]
        for rows in [[i] for i in replan] if self.batch_invariant else [replan]:
            self._plan(rows)
        for i in range(num_envs):
            self._steps[i] += 1
        return np.stack([self._queue[i].popleft() for i in range(num_envs)])

    def _plan(self, replan: list[int]) -> None:
        """One inference call for the envs `replan` (none: nothing to do); their queues get the
        predicted actions."""
        keys = self.predictor.obs_keys
        if replan:
            device, dtype = self.predictor.device, self.predictor.dtype
            batch = {  # as the envs give them (float32 states, uint8 images); the policy casts
                k: torch.as_tensor(
                    np.stack([[f[k] for f in self._history[i]] for i in replan]), device=device
                )
                for k in keys
            }
            # drawn on the CPU in float32 whatever the policy's device and dtype: an episode's
            # noise is then the same on every device, and a float64 run starts each chunk from
            # the float32 run's noise, so the two differ by rounding only
            shape = self.predictor.noise_shape
            noise = torch.stack([torch.randn(shape, generator=self._noise[i]) for i in replan])
            with torch.no_grad():
                chunk = self.predictor.predict_actions(batch, noise.to(device, dtype)).cpu()
            # at least float32 (numpy has no bfloat16), float64 stays float64
            actions = chunk.to(torch.promote_types(chunk.dtype, torch.float32)).numpy()
            for row, i in enumerate(replan):
                self._queue[i].extend(actions[row])
            if self.recorder is not None:
                self._record(replan, actions)

    def _record(self, replan: list[int], actions: np.ndarray) -> None:
        """Hand the recorder each planned env's chunk, its observation and its source."""
        assert self.recorder is not None
        sources = getattr(self.predictor, "chosen_sources", None)
        for row, i in enumerate(replan):
            source = sources[row] if sources is not None else None
            frame = self._history[i][-1]
            self.recorder.add(self._episode[i], self._steps[i], frame, actions[row], source)


class PolicyPredictor:
    """A single policy as a `ChunkPredictor`, through its native sampler; `n_action_steps`
    (None: the trained value) of each chunk are executed."""

    def __init__(self, policy, steps: int | None = None, n_action_steps: int | None = None) -> None:
        self.policy = policy
        self.obs_keys = policy.config.obs_keys
        self.n_obs_steps = policy.config.n_obs_steps
        self.noise_shape = policy.chunk_shape(1)[1:]
        self.steps = steps
        self.executed = policy.executed_slice(n_action_steps)
        trained = policy.config.n_action_steps
        self.n_action_steps = None if n_action_steps == trained else n_action_steps

    @property
    def device(self) -> torch.device:
        return self.policy.device

    @property
    def dtype(self) -> torch.dtype:
        return self.policy.dtype

    def predict_actions(self, obs: dict[str, torch.Tensor], noise: torch.Tensor) -> torch.Tensor:
        chunk = self.policy.sample(obs, self.steps, noise)
        return chunk[:, self.executed]

    def fingerprint(self) -> str:
        """The trained n_action_steps keeps the fingerprint earlier records hold."""
        executed = f"-act{self.n_action_steps}" if self.n_action_steps is not None else ""
        return f"{self.policy.fingerprint()}-steps{self.steps}{executed}"

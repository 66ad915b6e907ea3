"""Any robocompose policy as a `ServedPolicy`: a checkpoint, a composition, a parameter merge.

    served = load_served_policy(checkpoint="PickPlace_flow_mlp")
    served = load_served_policy(parents=[a, b], operator="convex", weights=(0.5, 0.5))
    served.infer({"state": (n_obs_steps, 11) float64}) -> {"actions": (chunk_length, 4) float32}

The chunk runs from the current (last observed) step to the end of the policy's horizon, in env
units. Sampling is the harness's own: a checkpoint through its native sampler (`PolicyPredictor`'s
path), a composition through `ComposedPolicy`. The noise of a request carrying `seed` (an episode
seed) is the noise `PolicyRunner` draws for that episode in the harness: its `chunk_index`-th
draw (without `chunk_index`: the draw after the previous request's, restarting when the seed
changes or on `reset()`), so a served policy and direct evaluation can be compared seed by seed.
A request carrying `prefix_actions` is sampled with real-time-chunking guidance (`rtc.py`) in the
sigma-space sampler: Euler on the policy's own grid for a checkpoint (the same chunks as its native
sampler, to float error), the composition's configured sampler for a composition.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from robocompose.composition.api import AnyPolicy, compose, task_of
from robocompose.composition.composed_policy import ComposedPolicy
from robocompose.composition.methods import get_method, method_names
from robocompose.composition.samplers import sample_euler
from robocompose.devices import resolve_device
from robocompose.policies.base import GenerativePolicy, is_image_shape
from robocompose.policies.checkpoint import load_policy
from robocompose.policies.runner import ChunkPredictor, PolicyPredictor, _noise_seed
from robocompose.real_robot.base import ObsKeySpec, PolicySpec
from robocompose.real_robot.obs_check import (
    CHUNK_INDEX_KEY,
    PREFIX_COMMITTED_KEY,
    PREFIX_KEY,
    SEED_KEY,
)
from robocompose.real_robot.rtc import PrefixGuidance, PrefixGuidedDenoiser
from robocompose.sim.tasks import register_tasks

DEFAULT_CONTROL_HZ = 10.0  # the suite's control rate, for a policy whose task is unknown
# the least half-range a range check allows a training dimension, in its own units: one that
# barely varied (a resting cube's height, 0.02 m +- 0.1 mm) must not refuse a millimetre of noise
MIN_HALF_RANGE = 0.05
MAX_STREAMS = 256  # episodes whose noise streams are kept (a fleet's robots, ~5 KB each)


@dataclass
class _Stream:
    """One episode's noise stream and the index of its next draw."""

    generator: torch.Generator
    next: int = 0


class EpisodeNoise:
    """`PolicyRunner`'s per-episode noise streams, addressed by (episode seed, chunk index). The
    streams of the last MAX_STREAMS seeds stay where they are, so each robot of a fleet, asking
    for its own episode's next chunk, costs one draw, not a replay of its episode so far."""

    def __init__(self, shape: tuple[int, ...], runner_seed: int = 0) -> None:
        self.shape, self.runner_seed = shape, runner_seed
        self._streams: OrderedDict[int, _Stream] = OrderedDict()  # the latest used last
        self._seed: int | None = None  # of the previous request
        self._free = torch.Generator()
        self._free.seed()

    def draw(self, seed: int | None, index: int | None = None) -> torch.Tensor:
        """Unit noise `shape`; unseeded requests get fresh noise from the server's own stream."""
        if seed is None:
            return torch.randn(self.shape, generator=self._free)
        stream = self._stream(seed)
        if index is None:
            index = stream.next if seed == self._seed else 0
        self._seed = seed
        if index < stream.next:
            stream.generator.manual_seed(_noise_seed(self.runner_seed, seed))
            stream.next = 0
        while stream.next < index:  # skip the draws of the chunks before this one
            torch.randn(self.shape, generator=stream.generator)
            stream.next += 1
        stream.next += 1
        return torch.randn(self.shape, generator=stream.generator)

    def _stream(self, seed: int) -> _Stream:
        stream = self._streams.pop(seed, None)
        if stream is None:
            generator = torch.Generator().manual_seed(_noise_seed(self.runner_seed, seed))
            stream = _Stream(generator)
            if len(self._streams) >= MAX_STREAMS:
                self._streams.popitem(last=False)
        self._streams[seed] = stream
        return stream

    def reset(self) -> None:
        self._seed = None


def _parents(policy: AnyPolicy) -> list[GenerativePolicy]:
    return policy.parents if isinstance(policy, ComposedPolicy) else [policy]


def _task_observations(policy: AnyPolicy) -> tuple[str | None, dict[str, gym.Space], float]:
    """(env id, observation spaces, control rate) of the policy's task; (None, {}, default)
    when its checkpoints name no task."""
    try:
        env_id, env_kwargs = task_of(policy)
    except ValueError:
        return None, {}, DEFAULT_CONTROL_HZ
    register_tasks()
    env = gym.make(env_id, **env_kwargs)
    try:
        spaces = dict(env.observation_space.spaces)
        control_hz = float(getattr(env.unwrapped, "control_hz", env.metadata.get("render_fps")))
    finally:
        env.close()
    return env_id, spaces, control_hz


def _widened(scale: np.ndarray, offset: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(scale, offset) mapping [centre - h, centre + h] to [-1, 1], h at least MIN_HALF_RANGE."""
    centre = -np.float64(offset) / np.float64(scale)
    half = np.maximum(1.0 / np.float64(scale), MIN_HALF_RANGE)
    return 1.0 / half, -centre / half


def training_bounds(policy: AnyPolicy) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """key -> (scale, offset) mapping the policy's training data to [-1, 1] (its normaliser's,
    widened to MIN_HALF_RANGE): each low-dim observation key (of the first parent that has it)
    and "action" (the first parent's: the space a composition samples in), for the server's
    range checks."""
    bounds: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for parent in _parents(policy):
        for key, norm in parent.normalizers.items():
            bounds.setdefault(key, _widened(norm.scale, norm.offset))
    return bounds


def policy_spec(
    policy: AnyPolicy, description: str = "", control_hz: float | None = None
) -> PolicySpec:
    """The spec of a single, merged or composed policy: keys and shapes from the checkpoints'
    configs, dtypes and control rate from their task's env (uint8 images, float64 otherwise,
    10 Hz when no task is recorded)."""
    parents = _parents(policy)
    ref = parents[0].config
    shapes: dict[str, tuple[int, ...]] = {}
    for i, parent in enumerate(parents):
        for key in parent.config.obs_keys:
            shape = tuple(parent.config.obs_shapes[key])
            if shapes.setdefault(key, shape) != shape:
                raise ValueError(
                    f"parents disagree on observation `{key}`: {shapes[key]} vs {shape} "
                    f"(parent {i})."
                )
    env_id, spaces, task_hz = _task_observations(policy)
    obs = {}
    for key, shape in shapes.items():
        space = spaces.get(key)
        if space is not None and tuple(space.shape) != shape:
            raise ValueError(
                f"observation `{key}`: the policy takes {shape}, its task {env_id} gives "
                f"{tuple(space.shape)}."
            )
        if space is not None:
            dtype = space.dtype
        else:
            dtype = "uint8" if is_image_shape(shape) else "float64"
        obs[key] = ObsKeySpec(shape, np.dtype(dtype).name)
    composed = isinstance(policy, ComposedPolicy)
    executed_only = composed and not policy.method.samples_full_chunk
    executed = policy.executed if composed else policy.executed_slice()
    start = ref.n_obs_steps - 1
    extra: dict[str, Any] = {"server": "robocompose", "policy": description}
    if env_id is not None:
        extra["task"] = env_id
    return PolicySpec(
        obs=obs,
        n_obs_steps=max(p.config.n_obs_steps for p in parents),
        action_dim=ref.action_dim,
        chunk_length=executed.stop - start if executed_only else ref.horizon - start,
        n_action_steps=executed.stop - start,
        control_hz=control_hz or task_hz,
        extra=extra,
    )


class DenoiserServedPolicy:
    """A diffusion/flow policy, composed or not, behind openpi's `infer(obs)` / `reset()`."""

    def __init__(
        self,
        policy: AnyPolicy,
        *,
        steps: int | None = None,
        guidance: PrefixGuidance | None = None,
        description: str = "",
        control_hz: float | None = None,
        runner_seed: int = 0,
    ) -> None:
        self.policy = policy
        self.composed = isinstance(policy, ComposedPolicy)
        self.predictor: ChunkPredictor = policy if self.composed else PolicyPredictor(policy, steps)
        self.reference = _parents(policy)[0]
        self.steps = steps or self.reference.config.num_inference_steps
        self.guidance = guidance or PrefixGuidance()
        self.start = self.reference.config.n_obs_steps - 1  # the current step in the chunk
        self.spec = policy_spec(policy, description, control_hz)
        self.spec.extra["fingerprint"] = self.predictor.fingerprint()
        self.training_bounds = training_bounds(policy)
        self.noise = EpisodeNoise(tuple(self.predictor.noise_shape), runner_seed)

    def reset(self) -> None:
        self.noise.reset()

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        """`obs` as `check_observation` returns it -> {"actions": (chunk_length, A) float32}."""
        return self.infer_batch([obs])[0]

    @torch.no_grad()
    def infer_batch(self, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The replies to several requests, in order, each with the noise it draws alone: those
        without `prefix_actions` sampled as one batch (B, chunk, A), those with one by one (each
        has its own guidance). A batch of B > 1 matches serving each alone to float error."""
        device, dtype = self.predictor.device, self.predictor.dtype
        noises = [self.noise.draw(o.get(SEED_KEY), o.get(CHUNK_INDEX_KEY)) for o in requests]
        noise = torch.stack(noises).to(device, dtype)
        batch = {
            k: torch.stack([torch.as_tensor(o[k]) for o in requests]).to(device)
            for k in self.spec.obs
        }
        guided = [i for i, o in enumerate(requests) if len(o.get(PREFIX_KEY, ())) > 0]
        plain = [i for i in range(len(requests)) if i not in guided]
        chunks: dict[int, torch.Tensor] = {}
        if plain:
            sampled = self._sample({k: v[plain] for k, v in batch.items()}, noise[plain])
            chunks.update(zip(plain, sampled, strict=True))
        for i in guided:
            prefix = torch.as_tensor(requests[i][PREFIX_KEY], device=device)
            committed = requests[i].get(PREFIX_COMMITTED_KEY, len(prefix))
            rows = {k: v[i : i + 1] for k, v in batch.items()}
            chunks[i] = self._guided(rows, noise[i : i + 1], prefix, committed)[0]
        return [{"actions": chunks[i].float().cpu().numpy()} for i in range(len(requests))]

    def _sample(self, batch: dict[str, torch.Tensor], noise: torch.Tensor) -> torch.Tensor:
        """Chunks (B, chunk, A) in env units from the current step on, without guidance."""
        if not self.composed:
            return self.policy.sample(batch, self.steps, noise)[:, self.start :]
        if not self.policy.method.samples_full_chunk:  # e.g. the mixture: executed steps only
            return self.policy.predict_actions(batch, noise)
        normalized = self.policy.sample_normalized(batch, noise)
        return self.reference.action_normalizer.unnormalize(normalized)[:, self.start :]

    def _guided(
        self, batch: dict[str, torch.Tensor], noise: torch.Tensor, prefix: torch.Tensor, k: int
    ) -> torch.Tensor:
        """A chunk sampled in sigma space with its first positions pulled toward `prefix`."""
        normalizer = self.reference.action_normalizer
        target = normalizer.normalize(prefix.double().unsqueeze(0)).to(noise.dtype)
        weights = self.guidance.weights(k, len(prefix))
        if not self.composed:
            denoiser = self.policy.denoiser(batch)
            guided = PrefixGuidedDenoiser(denoiser, target, weights, self.start)
            sample = sample_euler(guided, noise, denoiser.sigmas(self.steps))
        else:
            if not self.policy.method.single_denoiser:
                guidable = [n for n in method_names() if get_method(n).single_denoiser]
                raise ValueError(
                    f"`{PREFIX_KEY}`: operator {self.policy.config.operator!r} has no single "
                    f"denoiser to guide; send no prefix, or serve one of {guidable}."
                )
            denoiser = self.policy.denoiser(batch)
            guided = PrefixGuidedDenoiser(denoiser, target, weights, self.start)
            sample = self.policy.run_sampler(guided, noise, self.policy.sigmas(denoiser))
        return normalizer.unnormalize(sample)[:, self.start :]


def load_served_policy(
    checkpoint: str | os.PathLike[str] | None = None,
    parents: Sequence[str | os.PathLike[str]] = (),
    operator: str = "convex",
    weights: Sequence[float] | None = None,
    *,
    steps: int | None = None,
    n_action_steps: int | None = None,
    guidance: PrefixGuidance | None = None,
    control_hz: float | None = None,
    device: str = "auto",
    **composition: Any,
) -> DenoiserServedPolicy:
    """A checkpoint, or >= 2 parents composed by the method `operator` (e.g. "merge": a
    parameter merge, which samples in `steps` with its own sampler) with
    `weights` and the other `CompositionConfig` fields in `composition`. `steps`: denoising
    steps (None: the checkpoint's own, or the composition's default); `n_action_steps`: actions
    of each chunk a client executes (None: as trained); `device`: where it runs (see
    `robocompose.devices.resolve_device`)."""
    target = resolve_device(device)
    if (checkpoint is None) == (not parents):
        raise ValueError(
            "give either `checkpoint` or >= 2 `parents` to compose. "
            f"Got checkpoint={checkpoint!r}, parents={list(parents)}."
        )
    if checkpoint is not None:
        if composition:
            raise ValueError(
                f"composition settings {sorted(composition)} apply to `parents` only, not to "
                f"a single checkpoint."
            )
        policy: AnyPolicy = load_policy(checkpoint).to(target).set_n_action_steps(n_action_steps)
        description = f"checkpoint {os.path.basename(os.fspath(checkpoint).rstrip('/'))}"
    else:
        if len(parents) < 2:
            raise ValueError(f"`parents` must name >= 2 checkpoints. Got {list(parents)}.")
        loaded = [load_policy(p).to(target) for p in parents]
        if n_action_steps is not None:
            composition["n_action_steps"] = n_action_steps
        policy = compose(loaded, operator, weights, steps=steps, **composition)
        names = ", ".join(os.path.basename(os.fspath(p).rstrip("/")) for p in parents)
        shown = list(weights) if weights is not None else "equal"
        description = f"{operator} {shown} of {names}"
    return DenoiserServedPolicy(
        policy, steps=steps, guidance=guidance, description=description, control_hz=control_hz
    )

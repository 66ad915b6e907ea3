"""Counterfactual labels: which of the selector's candidate chunks lead to success from one state.

A score's AUC over whole episodes mixes what it knows about chunks with how hard each episode's
states were. Here the selector first plays an episode as it would anyway (a MuJoCo snapshot,
`sim.snapshot`, taken at each of its chunk boundaries); then, at chosen boundaries, every
candidate it drew there (each parent's native samples and the composition's:
`selector.candidates`) runs from that boundary's restored state, and one finisher policy (the
better parent) plays the episode out, its noise the same for every candidate of the boundary.
Candidates of one boundary then differ in their chunk alone, and so do their outcomes;
`counterfactual_scores` ranks the selector's scores against them. Deterministic given the seeds.

    episode = counterfactual_episode(selector, finisher, seed=7, per_episode=3)
    episode.boundaries[0].success   # (C,) each candidate's outcome from boundary 0's state

`replay` runs one candidate's branch again from the env's reset, without a snapshot: restoring
must give the same outcome and final state, bit for bit.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np
import torch

from robocompose.composition.builtin_methods import SelectorMethod
from robocompose.composition.composed_policy import ComposedPolicy
from robocompose.composition.methods import Composition
from robocompose.composition.selector import candidates
from robocompose.devices import torch_threads_set
from robocompose.evaluation import check_observations, parent_name, parents_of, task_of
from robocompose.policies.base import GenerativePolicy
from robocompose.policies.runner import ChunkPredictor, PolicyPredictor, PolicyRunner
from robocompose.sim.rollout import SUCCESS_KEYS
from robocompose.sim.snapshot import SimSnapshot

__all__ = [
    "Boundary",
    "CounterfactualEpisode",
    "Outcome",
    "counterfactual_episode",
    "labelling",
    "replay",
]

# a boundary's finisher noise is PolicyRunner episode seed `seed * KEY_STEPS + step`: one per
# boundary, shared by its candidates; no episode reaches this many steps
KEY_STEPS = 1_000_000


@dataclass
class Boundary:
    """One chunk boundary of a selector episode and each of its C candidates' outcome from the
    boundary's state (their chunk, then the finisher to the episode's end)."""

    chunk: int  # which of the episode's chunks (0: the first)
    step: int  # the episode step its first action runs at
    finisher_key: int  # the finisher's noise (its PolicyRunner episode seed), every candidate's
    chosen: int  # the candidate the selector ran there
    obs: dict[str, np.ndarray]  # the selector's observation history {key: (T, ...)}
    noise: np.ndarray  # the chunk's noise, from which the candidates were drawn
    previous: np.ndarray | None  # the whole chunk (H, A) run before, normalised; None at chunk 0
    sources: list[str]  # per candidate: "parent<i>" or "composition"
    executed: np.ndarray  # (C, n, A) the steps each candidate runs, parent 0's normalised space
    full: np.ndarray | None  # (C, H, A) whole chunks; None: the parents' chunks do not align
    actions: np.ndarray  # (C, n, A) the executed steps in env units, as run
    success: np.ndarray  # (C,) bool: the episode succeeded after this candidate
    score: np.ndarray  # (C,) the episode's best env score after it
    length: np.ndarray  # (C,) the episode's steps after it
    final_state: np.ndarray  # (C, S) the MuJoCo state it ended in (mj_getState)
    seconds: float  # wall time of its candidates and their branches

    @property
    def informative(self) -> bool:
        """Whether its candidates disagree in outcome: only then can a score rank them."""
        return bool(self.success.any() and not self.success.all())


@dataclass
class CounterfactualEpisode:
    """A selector episode and its boundaries' counterfactual labels."""

    seed: int
    task: str  # env id
    settings: dict[str, Any]  # what made it: the policy's and finisher's ids, boundaries, seeds
    success: bool  # the selector's own episode
    steps: int
    chunks: int  # the chunks the selector planned
    actions: np.ndarray  # (steps, A) the selector's actions, as run
    boundaries: list[Boundary]
    seconds: float  # wall time of it all: the episode, the candidates and their branches


@dataclass
class Outcome:
    """How an episode ended: success, best env score, steps, the final MuJoCo state."""

    success: bool
    score: float
    steps: int
    state: np.ndarray


@dataclass
class _Plan:
    """What the selector planned from at one chunk (placed as it ran) and what it ran."""

    obs: dict[str, torch.Tensor]  # (1, T, ...)
    noise: torch.Tensor
    chosen: torch.Tensor  # (1, n, A) executed steps, normalised
    full: torch.Tensor | None  # (1, H, A)


class _Recorded(SelectorMethod):
    """The selector by its configured score, keeping what each chunk was planned from."""

    def __init__(self) -> None:
        self.plans: list[_Plan] = []

    def predict_actions(
        self, policy: Composition, obs: dict[str, torch.Tensor], noise: torch.Tensor
    ) -> torch.Tensor:
        chosen, full = self.choose(policy, obs, noise)
        self.plans.append(_Plan(obs, noise, chosen, full))
        return policy.parents[0].action_normalizer.unnormalize(chosen)


@dataclass
class _Run:
    """One episode as it goes on the bare MuJoCo env: the observation before each step (the
    last: the current one) and each step's score; the time limit is kept here, not by a
    wrapper, so a restored state carries no stale step count."""

    sim: Any
    limit: int
    frames: list[dict[str, np.ndarray]]
    actions: list[np.ndarray] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    success: bool = False

    @property
    def steps(self) -> int:
        return len(self.scores)

    @property
    def over(self) -> bool:
        return self.success or self.steps >= self.limit

    def step(self, action: np.ndarray) -> None:
        obs, reward, _, _, info = self.sim.step(action)
        self.actions.append(action)
        self.frames.append(obs)
        self.scores.append(float(info.get("score", reward)))
        self.success = self.success or any(bool(info.get(k)) for k in SUCCESS_KEYS)

    def play(self, runner: PolicyRunner, after: Callable[[], None] | None = None) -> None:
        """`runner` acts until the episode is over; `after()` runs after each of its calls,
        before the step (the env still in the state the call saw)."""
        while not self.over:
            action = runner({k: v[None] for k, v in self.frames[-1].items()})[0]
            if after is not None:
                after()
            self.step(action)

    def at(self, step: int) -> _Run:
        """This episode as it stood before `step` (the env's state is the caller's to set)."""
        return _Run(
            self.sim, self.limit, self.frames[: step + 1], self.actions[:step], self.scores[:step]
        )

    def outcome(self) -> Outcome:
        """How the episode stands, with the env's state as it is now."""
        state = SimSnapshot(self.sim.model, self.sim.data)
        state.take(self.sim.data)
        return Outcome(self.success, max(self.scores, default=0.0), self.steps, state.state)


@dataclass
class _Setup:
    """The env and the finisher as a chunk predictor."""

    env: gym.Env
    env_id: str
    finisher: ChunkPredictor

    @property
    def sim(self) -> Any:
        return self.env.unwrapped

    def start(self, seed: int) -> _Run:
        obs, _ = self.sim.reset(seed=seed)
        return _Run(self.sim, self.env.spec.max_episode_steps, [obs])


def counterfactual_episode(
    policy: ComposedPolicy,
    finisher: GenerativePolicy | ChunkPredictor,
    seed: int,
    *,
    chunks: Sequence[int] | None = None,
    per_episode: int = 4,
    sample_seed: int = 0,
    finisher_seed: int = 0,
) -> CounterfactualEpisode:
    """The selector `policy` plays episode `seed` (as `evaluate` would: runner seed 0, one
    episode a batch); at its chunks `chunks` (None: `per_episode` of them drawn without
    replacement, seeded by `sample_seed` and `seed`) each candidate runs from the restored
    state and `finisher` plays on, on noise `finisher_seed` and the boundary."""
    if not isinstance(getattr(policy, "method", None), SelectorMethod):
        raise ValueError(
            "counterfactual labels rank the selector's candidates: `policy` must be a "
            "ComposedPolicy with operator 'selector'."
        )
    if chunks is None and per_episode < 1:
        raise ValueError(f"`per_episode` must be >= 1. Got {per_episode}.")
    started = time.perf_counter()
    setup = _setup(policy, finisher)
    settings = labelling(
        policy,
        setup.finisher,
        chunks=chunks,
        per_episode=per_episode,
        sample_seed=sample_seed,
        finisher_seed=finisher_seed,
    )
    try:
        with torch_threads_set(1), torch.no_grad():
            recorded = copy.copy(policy)
            recorded.method = method = _Recorded()
            runner = PolicyRunner(recorded)
            runner.reset(np.ones(1, dtype=bool), seeds=np.array([seed]))
            run = setup.start(seed)
            starts: list[tuple[int, SimSnapshot]] = []  # each chunk's step and state

            def snapshot() -> None:
                if len(method.plans) > len(starts):  # the call planned: remember its state
                    starts.append((run.steps, SimSnapshot(setup.sim.model, setup.sim.data)))
                    starts[-1][1].take(setup.sim.data)

            run.play(runner, after=snapshot)
            picked = _boundaries(chunks, per_episode, sample_seed, seed, run, len(starts))
            boundaries = [
                _boundary(policy, setup, run, method.plans, starts, b, seed, finisher_seed)
                for b in picked
            ]
    finally:
        setup.env.close()
    return CounterfactualEpisode(
        seed=seed,
        task=setup.env_id,
        settings=settings,
        success=run.success,
        steps=run.steps,
        chunks=len(starts),
        actions=np.stack(run.actions),
        boundaries=boundaries,
        seconds=time.perf_counter() - started,
    )


def labelling(
    policy: ComposedPolicy,
    finisher: GenerativePolicy | ChunkPredictor,
    *,
    chunks: Sequence[int] | None = None,
    per_episode: int = 4,
    sample_seed: int = 0,
    finisher_seed: int = 0,
) -> dict[str, Any]:
    """What labels an episode (`CounterfactualEpisode.settings`): the two policies'
    fingerprints and the boundary and noise choices. A run that resumes from episodes labelled
    before must find these in them."""
    return {
        "policy_id": policy.fingerprint(),
        "finisher_id": _predictor(finisher).fingerprint(),
        "chunks": None if chunks is None else sorted({int(c) for c in chunks}),
        "per_episode": None if chunks is not None else per_episode,
        "sample_seed": sample_seed,
        "finisher_seed": finisher_seed,
        "candidates_per_parent": policy.config.selector_samples,
    }


def _predictor(policy: GenerativePolicy | ChunkPredictor) -> ChunkPredictor:
    return PolicyPredictor(policy) if isinstance(policy, GenerativePolicy) else policy


def _setup(policy: ComposedPolicy, finisher: GenerativePolicy | ChunkPredictor) -> _Setup:
    """The selector's env, checked to be MuJoCo's, time-limited and to give what both policies
    observe; a finisher of another task is refused, naming both tasks."""
    predictor = _predictor(finisher)
    env_id, env_kwargs = task_of(policy)
    own, _ = task_of(predictor)
    if own != env_id:
        name = parent_name(parents_of(predictor)[0], 0) if parents_of(predictor) else "finisher"
        raise ValueError(
            f"the finisher {name} is a policy of {own}; the selector's parents are of {env_id}: "
            "a finisher plays out episodes of the selector's own task."
        )
    check_observations(policy, env_id, env_kwargs)
    check_observations(predictor, env_id, env_kwargs)
    env = gym.make(env_id, **env_kwargs)
    sim = env.unwrapped
    problem = None
    if not isinstance(getattr(sim, "model", None), mujoco.MjModel) or not isinstance(
        getattr(sim, "data", None), mujoco.MjData
    ):
        problem = "has no MjModel `model` and MjData `data`: its states cannot be restored"
    elif env.spec is None or env.spec.max_episode_steps is None:
        problem = "has no step limit: a finisher's episode would never end"
    if problem is not None:
        env.close()
        raise ValueError(f"counterfactual labels: {env_id} ({type(sim).__name__}) {problem}.")
    return _Setup(env, env_id, predictor)


def _boundaries(
    chunks: Sequence[int] | None, per_episode: int, sample_seed: int, seed: int, run: _Run, n: int
) -> list[int]:
    """The chunks to branch at: `chunks`, each checked to be one the episode ran, or a seeded
    sample of `per_episode` of its `n` (all of them when it ran fewer)."""
    if chunks is None:
        rng = np.random.default_rng([sample_seed, seed])
        return sorted(int(c) for c in rng.choice(n, size=min(per_episode, n), replace=False))
    ended = "a success" if run.success else "the step limit"
    for chunk in chunks:
        if not 0 <= chunk < n:
            raise ValueError(
                f"boundary chunk {chunk} is past the end of episode {seed}: the selector ran "
                f"{n} chunks there ({run.steps} steps, ended by {ended}); a boundary must be "
                f"one of chunks 0..{n - 1}."
            )
    return sorted({int(c) for c in chunks})


def _env_units(policy: ComposedPolicy, executed: torch.Tensor) -> np.ndarray:
    """Normalised executed steps (B, n, A) -> actions as the runner hands them to the env (at
    least float32), as the selector's chosen chunk becomes its actions."""
    chunk = policy.parents[0].action_normalizer.unnormalize(executed).cpu()
    return chunk.to(torch.promote_types(chunk.dtype, torch.float32)).numpy()


def _boundary(
    policy: ComposedPolicy,
    setup: _Setup,
    run: _Run,
    plans: list[_Plan],
    starts: list[tuple[int, SimSnapshot]],
    b: int,
    seed: int,
    finisher_seed: int,
) -> Boundary:
    """Boundary `b`'s candidates drawn again from what the selector planned from there, each
    run from its restored state and finished on the boundary's one finisher noise."""
    started = time.perf_counter()
    plan, (step, snapshot) = plans[b], starts[b]
    found = candidates(policy, plan.obs, plan.noise, policy.config.selector_samples)
    same = [c for c in range(len(found.sources)) if torch.equal(found.executed[c], plan.chosen)]
    if not same:
        raise RuntimeError(
            f"episode {seed}, chunk {b}: no candidate drawn again is the chunk the selector ran; "
            "its inference is not deterministic (threads, device), so branches would not be "
            "the selector's."
        )
    actions = np.stack([_env_units(policy, e)[0] for e in found.executed])
    key = seed * KEY_STEPS + step
    outcomes = []
    for chunk in actions:
        snapshot.restore()
        outcomes.append(_branch(setup, run.at(step), chunk, finisher_seed, key))
    previous = plans[b - 1].full if b > 0 else None
    return Boundary(
        chunk=b,
        step=step,
        finisher_key=key,
        chosen=same[0],
        obs={k: v[0].cpu().numpy() for k, v in plan.obs.items()},
        noise=plan.noise[0].cpu().numpy(),
        previous=None if previous is None else previous[0].cpu().numpy(),
        sources=list(found.sources),
        executed=found.executed[:, 0].cpu().numpy(),
        full=None if found.full is None else found.full[:, 0].cpu().numpy(),
        actions=actions,
        success=np.array([o.success for o in outcomes]),
        score=np.array([o.score for o in outcomes]),
        length=np.array([o.steps for o in outcomes]),
        final_state=np.stack([o.state for o in outcomes]),
        seconds=time.perf_counter() - started,
    )


def _branch(setup: _Setup, run: _Run, chunk: np.ndarray, finisher_seed: int, key: int) -> Outcome:
    """`chunk` from where `run` stands (the env already in its state), then the finisher on its
    runner's noise `finisher_seed` and episode seed `key`, seeing the episode's frames so far."""
    for action in chunk:
        if run.over:
            break
        run.step(action)
    if not run.over:
        runner = PolicyRunner(setup.finisher, seed=finisher_seed)
        runner.reset(np.ones(1, dtype=bool), seeds=np.array([key]))
        runner.observe(run.frames[-1 - setup.finisher.n_obs_steps : -1])
        run.play(runner)
    return run.outcome()


def replay(
    policy: ComposedPolicy,
    finisher: GenerativePolicy | ChunkPredictor,
    episode: CounterfactualEpisode,
    boundary: int,
    candidate: int,
) -> Outcome:
    """Candidate `candidate` of `episode.boundaries[boundary]` run again with no snapshot: the
    env reset on the episode's seed, the selector's recorded actions up to the boundary, the
    candidate's chunk, then the finisher as the branch ran it. A branch's outcome and final
    state must equal this, bit for bit: a restored state is the state the episode was in."""
    settings = episode.settings
    ids = {"policy_id": policy.fingerprint(), "finisher_id": _predictor(finisher).fingerprint()}
    labelled = {k: settings[k] for k in ids}
    if ids != labelled:
        raise ValueError(
            f"episode {episode.seed} was labelled by other policies ({labelled}) than these "
            f"({ids})."
        )
    setup = _setup(policy, finisher)
    chosen = episode.boundaries[boundary]
    try:
        with torch_threads_set(1), torch.no_grad():
            run = setup.start(episode.seed)
            for action in episode.actions[: chosen.step]:
                run.step(action)
            chunk = chosen.actions[candidate]
            return _branch(setup, run, chunk, settings["finisher_seed"], chosen.finisher_key)
    finally:
        setup.env.close()

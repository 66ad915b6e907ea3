"""`robocompose view`: a Rerun recording of a policy's episodes, or of one chunk's denoising.

    robocompose view PushT_flow_mlp --episodes 2 --save runs/view/pusht.rrd
    robocompose view A B --weights 0.6,0.4 --save runs/view/ab.rrd     # a composition's episodes
    robocompose view --denoising A B --seed 100000 --save runs/view/denoise.rrd

RUN is a checkpoint folder, or two or more parents composed by `composition` (as `compose`
takes them). Episodes run on the policy's own task with eval's seeds and noise (seeds from
`seed_start`, default 100000 like eval), so a seed's recording is the episode eval scored.
Without `--save` a Rerun viewer opens and the recording streams to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robocompose.rollout_config import CompositionSpec, EpisodesConfig


@dataclass(kw_only=True)
class ViewConfig(EpisodesConfig):
    """`robocompose view RUN...`: RUN is one checkpoint folder or >= 2 parents to compose."""

    run: list[str]
    composition: CompositionSpec = field(default_factory=CompositionSpec)
    episodes: int = 2
    save: str | None = None  # an .rrd file; None: stream to a spawned viewer
    denoising: bool = False  # one chunk's denoising at episode seed_start's first state
    steps: int | None = None  # denoising steps of a single checkpoint (None: its own)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.run:
            raise ValueError("`run` must name a checkpoint folder (or >= 2 parents). Got none.")
        if self.save is not None and not self.save.endswith(".rrd"):
            raise ValueError(f"`save` must name an .rrd file. Got {self.save!r}.")
        if len(self.run) > 1:
            self.composition.check_parent_count(len(self.run))


def load_run(config: ViewConfig) -> Any:
    """The checkpoint's policy, or the composition of the parents."""
    from robocompose.composition.api import compose
    from robocompose.policies.checkpoint import load_policy

    parents = [load_policy(path) for path in config.run]
    if len(parents) == 1:
        return parents[0]
    spec = config.composition
    return compose(parents, spec.operator, spec.weights, **spec.settings())


def run(config: ViewConfig) -> str:
    """`robocompose view`: record, then print and return what was recorded where (one line
    per episode, or per path)."""
    from robocompose.evaluation import check_observations, task_of
    from robocompose.policies.base import GenerativePolicy
    from robocompose.policies.runner import PolicyPredictor
    from robocompose.viz.recording import close_recording, open_recording

    policy = load_run(config)
    env_id, env_kwargs = task_of(policy)
    predictor = (
        PolicyPredictor(policy, config.steps) if isinstance(policy, GenerativePolicy) else policy
    )
    check_observations(predictor, env_id, env_kwargs)
    name = "denoising" if config.denoising else "episodes"
    stream = open_recording(config.save, f"{Path(config.run[0]).name}-{name}")
    try:
        if config.denoising:
            lines = _denoising(stream, policy, predictor, env_id, env_kwargs, config)
        else:
            from robocompose.viz.episodes import record_episodes

            summaries = record_episodes(stream, predictor, env_id, env_kwargs, config.seeds())
            lines = [
                f"seed {s.seed}: {'success' if s.success else 'failure'}, score {s.score:.3f}, "
                f"{s.length} steps, {s.chunks} chunks"
                for s in summaries
            ]
    finally:
        close_recording(stream)
    where = f"recording: {config.save}" if config.save else "recording streamed to the viewer"
    text = "\n".join([*lines, where])
    print(text)
    return text


def _denoising(
    stream: Any,
    policy: Any,
    predictor: Any,
    env_id: str,
    env_kwargs: dict[str, Any],
    config: ViewConfig,
) -> list[str]:
    import torch

    from robocompose.composition.composed_policy import parent_names
    from robocompose.policies.base import GenerativePolicy
    from robocompose.viz.denoising import (
        composed_path,
        first_observation,
        policy_path,
        record_paths,
    )

    seed = config.seed_start
    obs = first_observation(env_id, env_kwargs, seed, predictor.obs_keys, predictor.n_obs_steps)
    noise = torch.randn(predictor.noise_shape, generator=torch.Generator().manual_seed(seed))[None]
    if isinstance(policy, GenerativePolicy):
        steps = config.steps or policy.config.num_inference_steps
        paths = {Path(config.run[0]).name: policy_path(policy, obs, noise, steps)}
    else:
        steps = policy.steps
        names = parent_names(policy.parents)
        paths = {
            name: policy_path(parent, obs, noise, steps)
            for name, parent in zip(names, policy.parents, strict=True)
        }
        paths["composed"] = composed_path(policy, obs, noise)
    record_paths(stream, paths)
    return [f"{name}: {len(path)} denoising steps at seed {seed}" for name, path in paths.items()]

"""A composition method defined outside the package, through the registry alone: a denoiser
operator (the heaviest parent's D) checked on exact Gaussians and against convex, and a method
that picks a parent per chunk, run through `compose` and `evaluate` on a shipped pair."""

from __future__ import annotations

import math

import pytest
import torch

from robocompose.composition.api import compose, evaluate, load
from robocompose.composition.composed_denoiser import ComposedDenoiser
from robocompose.composition.composed_policy import ComposedPolicy
from robocompose.composition.config import CompositionConfig
from robocompose.composition.methods import (
    CompositionMethod,
    DenoiserMethod,
    get_method,
    method_names,
    method_of,
    register_method,
)
from robocompose.composition.operators import Convex, Operator
from robocompose.composition.samplers import sample_euler
from robocompose.config import load as load_config
from robocompose.shipped import shipped_path
from robocompose.verbs.compose import ComposeConfig
from tests.composition.test_composed_policy import _obs, tiny_policy
from tests.composition.test_gaussian_composition import GaussianDenoiser

# two flow MLPs of one architecture (merge needs that), trained on halves of one file
TWO_CUBES_FLOWS = [shipped_path("PickPlaceTwoCubes", k) for k in ("flow_mlp", "flow_mlp_b")]


def _heaviest(weights: list[float]) -> int:
    return max(range(len(weights)), key=lambda i: weights[i])


@register_method("heaviest_denoiser")
class HeaviestDenoiser(DenoiserMethod):
    """D = D_k of the parent with the largest weight."""

    weights_nonnegative = True

    def operator(self, config: CompositionConfig) -> Operator:
        one_hot = [0.0] * len(config.weights)
        one_hot[_heaviest(config.weights)] = 1.0
        return Convex(one_hot)


@register_method("heaviest_parent")
class HeaviestParent(CompositionMethod):
    """The parent with the largest weight samples alone, with its own sampler."""

    samples_full_chunk = False

    def predict_actions(
        self, policy: ComposedPolicy, obs: dict[str, torch.Tensor], noise: torch.Tensor
    ) -> torch.Tensor:
        parent = policy.parents[_heaviest(policy.config.weights)]
        view = policy.parent_view(parent, obs)
        chunk = parent.sample(view, policy.steps, noise)
        return chunk[:, policy.executed]


def test_registered_methods_are_named_and_checked_by_the_config() -> None:
    assert {"heaviest_denoiser", "heaviest_parent"} <= set(method_names())
    assert isinstance(get_method("heaviest_parent"), HeaviestParent)
    with pytest.raises(ValueError, match=r"`weights` of heaviest_denoiser must be >= 0"):
        method_of(CompositionConfig(operator="heaviest_denoiser", weights=(-1.0, 2.0)))
    with pytest.raises(ValueError, match="already registered"):
        register_method("convex")(HeaviestParent)


def test_a_parameter_merge_is_built_by_its_method_not_by_composed_policy() -> None:
    parents = [tiny_policy(0), tiny_policy(1)]
    config = CompositionConfig(operator="merge", weights=(0.25, 0.75))
    merged = method_of(config).build(parents, config)
    assert not isinstance(merged, ComposedPolicy) and merged.config == parents[0].config
    with pytest.raises(ValueError, match="'merge' merges the parents into one policy"):
        ComposedPolicy(parents, CompositionConfig(operator="merge"))


def test_denoiser_method_samples_the_heaviest_gaussian_exactly() -> None:
    config = CompositionConfig(operator="heaviest_denoiser", weights=(0.3, 0.7))
    a, b = GaussianDenoiser(-1.0, 0.2), GaussianDenoiser(2.0, 0.5)
    composed = ComposedDenoiser([a, b], method_of(config).operator(config))
    noise = torch.randn(4000, 1, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    x = sample_euler(composed, noise, a.sigmas(400))
    assert x.mean().item() == pytest.approx(2.0, abs=0.04)
    assert x.var().item() == pytest.approx(0.5, rel=0.08)
    assert math.isfinite(x.abs().max().item())


def test_denoiser_method_runs_in_a_composed_policy_as_its_operator_does() -> None:
    parents = [tiny_policy(0), tiny_policy(1)]
    ours = ComposedPolicy(
        parents, CompositionConfig(operator="heaviest_denoiser", weights=(0.2, 0.8))
    )
    convex = ComposedPolicy(parents, CompositionConfig(operator="convex", weights=(0.0, 1.0)))
    noise = torch.randn(3, *ours.noise_shape, generator=torch.Generator().manual_seed(1))
    actions = ours.predict_actions(_obs(3), noise)
    assert torch.equal(actions, convex.predict_actions(_obs(3), noise))
    assert not torch.equal(actions, parents[0].sample(_obs(3), 10, noise)[:, ours.executed])


def test_per_chunk_method_composes_and_evaluates_on_a_shipped_pair(tmp_path) -> None:
    """Through `compose` and `evaluate` on 2 seeds: the heavier parent's episodes, as that
    parent evaluated alone in as many steps gives them (the same noise for the same seed)."""
    paths = TWO_CUBES_FLOWS
    parents = [load(p) for p in paths]
    policy = compose(parents, "heaviest_parent", (0.25, 0.75))
    assert isinstance(policy, ComposedPolicy) and policy.method.name == "heaviest_parent"
    seeds = [100_000, 100_001]
    composed = evaluate(policy, seeds, out=tmp_path / "ours.jsonl", progress=False)
    alone = evaluate(parents[1], seeds, steps=10, progress=False)
    keys = ("seed", "success", "score", "length")
    assert [{k: r[k] for k in keys} for r in composed.records] == [
        {k: r[k] for k in keys} for r in alone.records
    ]
    assert (tmp_path / "ours.jsonl").read_text().count("\n") == 2


def test_a_preset_file_makes_the_method_a_verb_option(tmp_path) -> None:
    """One YAML beside the module: `composition=<name>` builds it in the compose verb, labelled
    like any method."""
    (tmp_path / "composition").mkdir()
    (tmp_path / "composition" / "heaviest_parent.yaml").write_text(
        "operator: heaviest_parent\nweights: [0.25, 0.75]\n"
    )
    overrides = [
        f"hydra.searchpath=[file://{tmp_path}]",
        "composition=heaviest_parent",
        "task=PickPlaceTwoCubes",
    ]
    config = load_config("compose", ComposeConfig, overrides)
    assert config.label() == "heaviest_parent_0.250_0.750"
    assert config.policy().method.name == "heaviest_parent"

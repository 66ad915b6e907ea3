"""The light composition config names the same methods and samplers as the torch modules, and
each method's declarations are what it runs by."""

from __future__ import annotations

import pytest

from robocompose.composition.config import SAMPLER_NAMES, CompositionConfig
from robocompose.composition.methods import get_method, method_names, method_of
from robocompose.composition.operators import Convex, Guided, Schedule, WeightedSum
from robocompose.composition.samplers import SAMPLERS

SHIPPED = (
    "convex",
    "weighted_sum",
    "guided",
    "schedule",
    "superdiff_and",
    "superdiff_or",
    "mixture",
    "merge",
)


def test_names_match_the_registries() -> None:
    assert tuple(SAMPLERS) == SAMPLER_NAMES
    assert set(SHIPPED) <= set(method_names())


def test_every_linear_operator_is_a_method_with_one_denoiser() -> None:
    linear = {"convex": Convex, "weighted_sum": WeightedSum, "guided": Guided, "schedule": Schedule}
    for name, operator_class in linear.items():
        config = CompositionConfig(operator=name, low_weights=(0.5, 0.5))
        method = method_of(config)
        assert method.single_denoiser and type(method.operator(config)) is operator_class


def test_declarations_say_how_a_method_runs() -> None:
    assert get_method("mixture").extra_noise_rows == 1
    assert not get_method("mixture").samples_full_chunk
    assert get_method("merge").merges_parameters
    assert get_method("superdiff_or").denoising_steps(CompositionConfig()) == 40
    assert get_method("convex").denoising_steps(CompositionConfig()) == 10
    product = get_method("weighted_sum")
    assert product.needs_finite_sigma_max(CompositionConfig(weights=(1.0, 1.0)))
    assert not product.needs_finite_sigma_max(CompositionConfig())


def test_weight_constraints_are_checked_without_torch() -> None:
    with pytest.raises(ValueError, match=r"`weights` of mixture must be >= 0. Got \[-0.5, 1.5\]"):
        method_of(CompositionConfig(operator="mixture", weights=(-0.5, 1.5)))
    with pytest.raises(ValueError, match="`weights` of schedule must lie on the simplex"):
        method_of(CompositionConfig("schedule", weights=(1.0, 1.0), low_weights=(0.5, 0.5)))
    with pytest.raises(ValueError, match="`low_weights` must be set for operator 'schedule'"):
        method_of(CompositionConfig(operator="schedule"))
    assert method_of(CompositionConfig(operator="guided", weights=(1.0, -0.5))).name == "guided"


def test_unknown_sampler_lists_the_names() -> None:
    with pytest.raises(ValueError, match="`sampler` must be one of .*'mcmc'"):
        CompositionConfig(sampler="rk4")

"""The light composition config names the same operators and samplers as the torch modules."""

from __future__ import annotations

import pytest

from robocompose.composition.config import OPERATOR_NAMES, SAMPLER_NAMES, CompositionConfig
from robocompose.composition.operators import OPERATORS
from robocompose.composition.samplers import SAMPLERS


def test_names_match_the_registries() -> None:
    assert tuple(OPERATORS) == OPERATOR_NAMES
    assert tuple(SAMPLERS) == SAMPLER_NAMES


def test_every_named_operator_is_made() -> None:
    for name in OPERATOR_NAMES:
        config = CompositionConfig(operator=name, low_weights=(0.5, 0.5))
        assert type(config.make_operator()) is OPERATORS[name]


def test_unknown_sampler_lists_the_names() -> None:
    with pytest.raises(ValueError, match="`sampler` must be one of .*'mcmc'"):
        CompositionConfig(sampler="rk4")

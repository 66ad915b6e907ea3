"""Wilson 95% intervals: known values and exact ends; the AUC; the seeded bootstrap."""

import numpy as np
import pytest

from robocompose.stats import auc, bootstrap_interval, success_rate, wilson_interval


def test_known_value_and_exact_ends() -> None:
    assert wilson_interval(50, 100) == pytest.approx((0.40383, 0.59617), abs=1e-5)
    assert wilson_interval(0, 200)[0] == 0.0 and wilson_interval(200, 200)[1] == 1.0
    assert str(success_rate(88, 200)) == "44.0% [37.3, 50.9] (n=200)"
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(5, 3)


def test_auc_is_the_share_of_pairs_a_positive_wins_ties_counting_half() -> None:
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 5, 200).astype(float)  # many ties
    labels = rng.random(200) < 0.3
    pairwise = np.mean([(p > n) + 0.5 * (p == n) for p in scores[labels] for n in scores[~labels]])
    assert auc(scores, labels) == pytest.approx(pairwise)
    assert auc([0.1, 0.9, 0.4], [False, True, False]) == 1.0
    assert auc([0.1, 0.9, 0.4], [True, False, True]) == 0.0
    assert auc([0.5, 0.6], [True, True]) is None  # one class: undefined


def test_the_bootstrap_interval_of_a_mean_is_the_normal_one_and_seeded() -> None:
    values = np.random.default_rng(1).normal(size=400)
    low, high = bootstrap_interval(lambda i: values[i].mean(), len(values), seed=2)
    half = 1.96 * values.std() / np.sqrt(len(values))
    assert low == pytest.approx(values.mean() - half, abs=0.02)
    assert high == pytest.approx(values.mean() + half, abs=0.02)
    assert bootstrap_interval(lambda i: values[i].mean(), len(values), seed=2) == (low, high)
    with pytest.raises(ValueError, match="units"):
        bootstrap_interval(lambda i: 0.0, 0)

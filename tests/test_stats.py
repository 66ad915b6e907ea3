"""Wilson 95% intervals: known values and exact ends."""

import pytest

from robocompose.stats import success_rate, wilson_interval


def test_known_value_and_exact_ends() -> None:
    assert wilson_interval(50, 100) == pytest.approx((0.40383, 0.59617), abs=1e-5)
    assert wilson_interval(0, 200)[0] == 0.0 and wilson_interval(200, 200)[1] == 1.0
    assert str(success_rate(88, 200)) == "44.0% [37.3, 50.9] (n=200)"
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(5, 3)

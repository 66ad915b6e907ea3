"""Paired comparisons: the Newcombe interval's coverage, and two checkpoints compared for real."""

from __future__ import annotations

import json

import numpy as np
import pytest

from robocompose.cli import main
from robocompose.compare import compare
from robocompose.shipped import shipped_path
from robocompose.stats import paired_outcomes


def test_paired_counts_and_difference():
    a = [True, True, False, False, True]
    b = [True, False, True, False, False]
    p = paired_outcomes(a, b)
    assert (p.only_a, p.only_b, p.both, p.neither) == (2, 1, 1, 1)
    assert p.difference == pytest.approx(0.2)
    assert p.ci_low < 0.2 < p.ci_high
    swapped = paired_outcomes(b, a)
    assert swapped.ci_low == pytest.approx(-p.ci_high) and swapped.ci_high == pytest.approx(
        -p.ci_low
    )
    assert str(p) == f"+20.0 points [{100 * p.ci_low:+.1f}, {100 * p.ci_high:+.1f}] (n=5 paired)"


def test_pairing_narrows_the_interval_when_outcomes_agree():
    """Two policies that agree on most seeds: the paired interval is much narrower than the
    one a difference of two independent rates would get."""
    a = [True] * 60 + [False] * 30 + [True] * 10
    b = [True] * 60 + [False] * 30 + [False] * 10
    p = paired_outcomes(a, b)
    assert p.difference == pytest.approx(0.1)
    assert p.ci_low > 0.0  # A wins all 10 seeds where they differ: detectable when paired
    assert p.ci_high - p.ci_low < 0.15  # two independent Wilson intervals would span ~0.26
    close = paired_outcomes(a[:-2] + [False, False], b[:-2] + [True, True])
    assert close.ci_low < 0.0 < close.ci_high  # 8 against 2: not enough seeds to tell


@pytest.mark.parametrize(
    "probs", [(0.5, 0.2, 0.1, 0.2), (0.7, 0.05, 0.05, 0.2), (0.2, 0.3, 0.1, 0.4)]
)
def test_newcombe_interval_covers_the_true_difference_about_95_percent(probs):
    """Simulated paired data of known cell probabilities (both, only A, only B, neither): the
    interval holds the true difference in 93-98% of 2000 draws of 60 pairs."""
    rng = np.random.default_rng(0)
    truth = probs[1] - probs[2]
    covered = 0
    for _ in range(2000):
        cells = rng.choice(4, size=60, p=probs)
        a = [c in (0, 1) for c in cells]
        b = [c in (0, 2) for c in cells]
        p = paired_outcomes(a, b)
        covered += p.ci_low <= truth <= p.ci_high
    assert 0.93 <= covered / 2000 <= 0.98


def test_unequal_lists_are_refused():
    with pytest.raises(ValueError, match="two equal, non-empty lists"):
        paired_outcomes([True], [True, False])


def test_compare_two_checkpoints_api_and_cli(tmp_path, capsys):
    a, b = shipped_path("PickPlace", "flow_mlp"), shipped_path("PickPlace", "diffusion_unet")
    seeds = [100_000, 100_001]
    result = compare(a, b, seeds, out_dir=tmp_path, num_envs=2, progress=False)
    p = result.paired
    assert p.episodes == 2 and result.labels == (a.name, b.name)
    for label, r in zip(result.labels, result.results, strict=True):
        assert (tmp_path / f"{label}.jsonl").is_file() and r.episodes == 2
    assert p.both + p.only_a == result.results[0].success.successes
    assert (
        "| only PickPlace_flow_mlp | only PickPlace_diffusion_unet | both | neither |"
        in result.table()
    )

    main(["compare", str(a), str(b), "--episodes", "2", "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    assert result.table() in printed  # the CLI reused the episodes the API wrote
    assert json.loads((tmp_path / "compare.json").read_text())["only_a"] == p.only_a


def test_compare_needs_two_checkpoints(capsys):
    with pytest.raises(SystemExit, match="`checkpoints` must name 2 checkpoints"):
        main(["compare", "a", "b", "c"])

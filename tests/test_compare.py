"""Paired comparisons: the Newcombe interval's coverage, and two checkpoints compared for real."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from robocompose.cli import main
from robocompose.compare import compare, confirm_search
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


def test_compare_needs_two_candidates(capsys):
    with pytest.raises(SystemExit, match="`candidates` must name 2 candidates"):
        main(["compare", "a", "b", "c"])
    with pytest.raises(SystemExit, match=r"candidate 'nowhere' is neither a checkpoint"):
        main(["compare", "nowhere", str(shipped_path("Stack", "flow_mlp"))])


PARENTS = [str(shipped_path("Stack", kind)) for kind in ("diffusion_mlp", "flow_mlp")]
ONE_SEED = ["--method", "grid", "--step", "1.0", "--episodes", "1", "num_envs=1"]


def test_search_confirms_its_choice_on_fresh_seeds_and_compare_takes_any_candidate(
    tmp_path, capsys
):
    """`search confirm=1` runs its choice against the better parent on the seed after its
    own and stores the paired difference; `compare` then takes that search.json, a composition
    written OPERATOR:WEIGHTS:CKPT,CKPT, or a checkpoint."""
    out = tmp_path / "search"
    main(["search", *PARENTS, *ONE_SEED, "--operators", "convex", "--out", str(out), "confirm=1"])
    printed = capsys.readouterr().out
    record = json.loads((out / "search.json").read_text())
    confirm = record["result"]["confirm"]
    if confirm.get("chosen_is_better_parent"):
        assert "the choice is the better parent alone" in printed
    else:
        assert confirm["episodes"] == 1 and confirm["seeds"] == {"start": 100_001, "count": 1}
        assert confirm["ci_low"] <= confirm["difference"] <= confirm["ci_high"]
        assert "confirm on 1 fresh seeds from 100001: " in printed

    # the record as a search that chose a composition writes it: the chosen method at its
    # weights is confirmed
    record["result"] |= {
        "chosen": [2.0, 0.0],
        "chosen_kind": "composition",
        "chosen_operator": "weighted_sum",
    }
    (out / "search.json").write_text(json.dumps(record))
    versus = confirm_search(out / "search.json", 2, out_dir=tmp_path / "confirm")
    assert versus is not None and versus.paired.episodes == 2
    assert versus.labels[0] == "weighted_sum_2.000_0.000"
    assert versus.labels[1] in {Path(p).name for p in PARENTS}
    assert [r["seed"] for r in versus.results[0].records] == [100_001, 100_002]
    assert repr(versus) == f"Comparison({versus.summary()})" and "records" not in repr(versus)

    composition = f"convex:0.5,0.5:{PARENTS[0]},{PARENTS[1]}"
    main(["compare", str(out), composition, "--episodes", "1", "--out", str(tmp_path / "c")])
    printed = capsys.readouterr().out
    assert "| weighted_sum_2.000_0.000 |" in printed and "| convex_0.500_0.500 |" in printed

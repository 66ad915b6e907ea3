"""external.json's bookkeeping (benchmarks/external.py, external_pusht.py): a rerun keeps the
vertex gap and selector runs stored apart, and the headlines cover every pair measured, GymPushT's
included; the `--parts` flag, and the old flags that still choose the same runs."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import external  # noqa: E402
import external_pusht  # noqa: E402


def _gap(contains_zero: bool) -> dict:
    return {"all_contain_zero": contains_zero}


def _selector(difference: float, ci_low: float) -> dict:
    return {"minus_better_parent": {"difference": difference, "ci_low": ci_low}}


def test_a_tasks_rerun_keeps_its_vertex_gap_and_selector_and_drops_its_old_keys():
    kept = {"vertex_gap": _gap(True), "selector": _selector(0.1, -0.1)}
    doc = {"PickPlaceCan": kept | {"stale": 1}}
    external.store_task(doc, "PickPlaceCan", {"never_worse": True})
    assert doc["PickPlaceCan"] == {"never_worse": True} | kept


def test_a_gym_pusht_pairs_rerun_keeps_its_vertex_gap_and_selector():
    kept = {"vertex_gap": _gap(True), "selector_by_score": {"coherence": _selector(0.0, -0.2)}}
    doc = {"GymPushT": {"policies_unet": kept | {"stale": 1}, "expert": {"success": 1}}}
    external_pusht._store(doc, "policies_unet", {"never_worse": True})
    assert doc["GymPushT"]["policies_unet"] == {"never_worse": True} | kept
    assert doc["GymPushT"]["expert"] == {"success": 1}


def test_selector_runs_go_under_their_score():
    assert external.selector_key("Lift", "agreement") == ("Lift", "selector")
    pair = ("GymPushT", "policies_unet")
    assert external.selector_key(pair, "coherence") == (*pair, "selector_by_score", "coherence")


def test_headlines_cover_every_measured_pair_and_fail_on_one_bad_pair():
    doc = {
        "PickPlaceCan": {"never_worse": True, "vertex_gap": _gap(True)},
        "Lift": {"best_composition": "convex"},  # an old row: neither field, left out
        "GymPushT": {"policies_unet": {"never_worse": False, "vertex_gap": _gap(True)}},
    }
    external.headlines(doc)
    assert doc["never_worse"] is False
    assert doc["never_worse_pairs"] == ["GymPushT.policies_unet", "PickPlaceCan"]
    assert doc["vertex_gaps_contain_zero"] is True
    assert doc["vertex_gap_pairs"] == ["GymPushT.policies_unet", "PickPlaceCan"]
    doc["PickPlaceCan"]["vertex_gap"] = _gap(False)
    external.headlines(doc)
    assert doc["vertex_gaps_contain_zero"] is False


def test_selector_headlines_say_where_it_gains():
    doc = {
        "PickPlaceCan": {"selector": _selector(0.05, -0.02)},
        "Lift": {"selector": _selector(-0.01, -0.05)},
        "GymPushT": {"policies_unet": {"selector": _selector(0.12, 0.01)}},
    }
    external.headlines(doc)
    assert doc["selector_pairs"] == ["GymPushT.policies_unet", "Lift", "PickPlaceCan"]
    assert doc["selector_gain_pairs"] == ["GymPushT.policies_unet", "PickPlaceCan"]
    assert doc["selector_significant_gain_pairs"] == ["GymPushT.policies_unet"]


def test_parts_choose_the_runs_and_their_episodes():
    args = external.parse_args([])
    assert args.parts == ("main",)
    assert (args.grid_cost_episodes, args.vertex_episodes) == (40, 100)  # the recorded runs
    args = external.parse_args(["--parts", "main,grid_choice", "--vertex-episodes", "20"])
    assert args.parts == ("main", "grid_choice") and args.vertex_episodes == 20
    assert external.parse_args(["--parts", "headlines"]).parts == ("headlines",)  # no episodes

"""external.json's bookkeeping (benchmarks/external.py): a task's rerun keeps the vertex gap
stored apart, and the headlines cover every pair measured, GymPushT's included."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import external  # noqa: E402


def _gap(contains_zero: bool) -> dict:
    return {"all_contain_zero": contains_zero}


def test_a_tasks_rerun_keeps_its_vertex_gap_and_drops_its_old_keys():
    doc = {"PickPlaceCan": {"vertex_gap": _gap(True), "stale": 1}}
    external.store_task(doc, "PickPlaceCan", {"never_worse": True})
    assert doc["PickPlaceCan"] == {"never_worse": True, "vertex_gap": _gap(True)}


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

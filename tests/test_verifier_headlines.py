"""composition.json's learned selectors (benchmarks/composition_parts/verifier.py) take a
counterfactual AUC only from labels scored by that very verifier (a rerun retrains into the same
path, so the path alone would hand the new verifier the old one's AUC), and a run at another
margin keeps the previous selector apart; an external pair keeps why a learned selector was not
run on it; a rounds folder made for one search is not reused by another."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import composition_parts.verifier as verifier_part  # noqa: E402
from composition_parts.verifier import counterfactual_auc  # noqa: E402

FILE = "runs/benchmarks/composition/Stack/verifier/round2.safetensors"


def _labelled(file: str, digest: str | None) -> dict:
    scored_by = {"file": file} | ({"digest": digest} if digest else {})
    return {"verifier": scored_by, "verifier_auc_counterfactual": 0.61}


def test_the_same_file_and_contents_give_the_auc():
    assert counterfactual_auc(_labelled(FILE, "ab12"), {"file": FILE, "digest": "ab12"}) == 0.61


def test_a_retrained_verifier_at_the_same_path_gets_none():
    assert counterfactual_auc(_labelled(FILE, "ab12"), {"file": FILE, "digest": "cd34"}) is None


def test_another_file_gets_none():
    other = FILE.replace("Stack", "PushT")
    assert counterfactual_auc(_labelled(other, "ab12"), {"file": FILE, "digest": "ab12"}) is None
    assert counterfactual_auc({}, {"file": FILE, "digest": "ab12"}) is None


def test_an_entry_stored_before_digests_is_matched_by_its_path():
    assert counterfactual_auc(_labelled(FILE, "ab12"), {"file": FILE}) == 0.61
    assert counterfactual_auc(_labelled(FILE, None), {"file": FILE, "digest": "ab12"}) == 0.61


def test_a_run_at_another_margin_keeps_the_previous_one_apart(monkeypatch):
    monkeypatch.setattr(verifier_part, "verifier_headlines", lambda results: None)
    first = {"verifier": {"file": FILE}, "success": 0.6}  # stored before margins: margin 0
    results = {"quality": {"Stack": {"selector": first}}}
    second = {"verifier": {"file": FILE}, "selector_margin": 0.1, "success": 0.7}
    verifier_part.store_verifier_selector(results, "Stack", second)
    assert results["quality"]["Stack"] == {"selector": second, "selector_by_margin": {"0": first}}
    again = second | {"success": 0.72}  # the same margin rerun replaces it
    verifier_part.store_verifier_selector(results, "Stack", again)
    assert results["quality"]["Stack"]["selector"] == again
    assert results["quality"]["Stack"]["selector_by_margin"] == {"0": first}


def test_an_external_pair_keeps_why_it_was_not_run_until_a_learned_selector_lands():
    from external import headlines, store_learned

    agreement = {"minus_better_parent": {"difference": 0.01, "ci_low": -0.1}, "success": 0.55}
    row = {"chosen_candidate": {"minus_better_parent": {"ci95": [-0.1, 0.05]}}, "never_worse": True}
    row["selector"] = agreement
    store_learned(row, {"not_run": "the search's 100 episodes hold 2 failed", "failed": 2})
    assert row["selector"] == agreement and row["verifier_not_run"]["failed"] == 2
    learned = {
        "verifier": {"file": FILE},
        "selector_margin": 0.1,
        "minus_better_parent": {"difference": 0.12, "ci_low": 0.03},
    }
    store_learned(row, learned)
    assert row["selector"] == learned and "verifier_not_run" not in row
    assert row["selector_by_score"] == {"agreement": agreement}
    doc = {"Lift": row}
    headlines(doc)
    assert doc["selector_verifier_pairs"] == ["Lift"]
    assert doc["selector_significant_gain_pairs"] == ["Lift"]


def test_a_rounds_folder_made_for_another_search_stops_the_run(tmp_path):
    folder = tmp_path / "verifier_margin0.1"
    made_for = {"search_seeds": {"start": 0, "episodes": 40}, "composed_candidate": "convex_a"}
    verifier_part._claim(folder, made_for)
    verifier_part._claim(folder, dict(made_for))  # the same search resumes
    other = made_for | {"search_seeds": {"start": 0, "episodes": 100}}
    with pytest.raises(SystemExit, match="verifier_margin0.1 holds the rounds of another search"):
        verifier_part._claim(folder, other)

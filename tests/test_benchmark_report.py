"""benchmarks/report.py writes the docs pages' tables from the results JSON: every generated
region matches what the JSON renders now, and rows measured without every comparison still
render."""

from __future__ import annotations

import copy
import importlib
import json
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture
def report(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("report")


def test_every_page_region_matches_its_json(report):
    """Fails when a results JSON changed and its page was not rewritten (or a table is on no
    page): run `python benchmarks/report.py --write`."""
    assert report.stale() == []


def test_an_edited_region_is_named_and_an_unknown_one_refused(report, tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "<!-- report:demo -->\nhand-edited\n<!-- /report:demo -->\n"
    )
    (tmp_path / "docs" / "page.md").write_text("<!-- report:nosuch -->\n<!-- /report:nosuch -->\n")
    with pytest.raises(KeyError, match="docs/page.md: unknown region report:nosuch"):
        report.stale(tmp_path)
    (tmp_path / "docs" / "page.md").write_text("prose\n")
    problems = report.stale(tmp_path)
    assert "README.md: report:demo differs from its JSON" in problems
    assert "report:policies is on no page" in problems
    report.write(tmp_path)
    assert "README.md: report:demo differs from its JSON" not in report.stale(tmp_path)
    assert (tmp_path / "docs" / "page.md").read_text() == "prose\n"


def test_fresh_table_says_not_run_for_a_comparison_a_task_skipped(report, monkeypatch):
    from report_tables import composition, fmt

    stored = json.loads((BENCHMARKS / "results" / "composition.json").read_text())
    measured = [t for t, q in stored["quality"].items() if "fresh" in q]
    document = copy.deepcopy(stored)
    task = measured[0]
    row = document["quality"][task]  # as a run with --p1-no-controls stores it
    row["fresh"]["paired_vs_better_parent"].pop("sharpened_better_parent", None)
    row["product_vs_sharpened_control"] = {"skipped": "--p1-no-controls"}
    row["better_parent_karras_grid"] = {"skipped": "--p1-no-controls"}
    monkeypatch.setattr(fmt, "read", lambda name: document)
    lines = composition.composition_fresh().splitlines()
    rows = {line.split(" | ")[0].strip("| "): line for line in lines}
    assert rows[task].count("not run") == 3
    assert len(rows) == len(measured) + 2  # the header and its rule

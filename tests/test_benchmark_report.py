"""benchmarks/report.py prints the README's tables from the results JSON, rows measured without
every comparison included."""

from __future__ import annotations

import copy
import importlib
import json
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def test_fresh_table_says_not_run_for_a_comparison_a_task_skipped(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    report = importlib.import_module("report")
    stored = json.loads((BENCHMARKS / "results" / "composition.json").read_text())
    measured = [t for t, q in stored["quality"].items() if "fresh" in q]
    document = copy.deepcopy(stored)
    task = measured[0]
    row = document["quality"][task]  # as a run with --p1-no-controls stores it
    row["fresh"]["paired_vs_better_parent"].pop("sharpened_better_parent", None)
    row["product_vs_sharpened_control"] = {"skipped": "--p1-no-controls"}
    row["better_parent_karras_grid"] = {"skipped": "--p1-no-controls"}
    monkeypatch.setattr(report, "_read", lambda name: document)
    rows = {line.split(" | ")[0].strip("| "): line for line in report.fresh_table().splitlines()}
    assert rows[task].count("not run") == 3
    assert len(rows) == len(measured) + 2  # the header and its rule

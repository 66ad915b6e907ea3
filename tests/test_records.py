"""Episode records pooled and formatted in one place: JSON records and the sweep's CSV cells give
the same groups; a rate prints one way, with or without its episode count."""

from __future__ import annotations

import math

import pytest

from robocompose.records import EpisodeLog, EvalResult, batch_layout, group, rate_of
from robocompose.stats import success_rate


def _record(seed: int, success: bool, score: float, cell: str) -> dict:
    return {
        "env_id": "E",
        "seed": seed,
        "success": success,
        "score": score,
        "error": None,
        "cell": cell,
    }


def test_groups_pool_json_records_and_csv_cells_alike() -> None:
    records = [_record(0, True, 1.0, "a"), _record(1, False, 0.5, "a"), _record(2, True, 1.0, "b")]
    as_csv = [{k: str(v) for k, v in r.items()} for r in records]
    for rows in (records, as_csv):
        a, b = group(rows, ["cell"])
        assert (a.key, a.rate, a.mean_score) == (("a",), success_rate(1, 2), 0.75)
        assert (b.key, b.rate.successes, b.rate.episodes) == (("b",), 1, 1)
    assert a.cell() == "50.0% [9.5, 90.5]"


def test_result_summary_row_and_an_empty_result() -> None:
    result = EvalResult.from_records("E", [_record(0, True, 1.0, "a"), _record(1, False, 0.0, "a")])
    assert result.summary() == "E: 50.0% [9.5, 90.5] (n=2), mean score 0.50"
    assert rate_of(result.row()) == result.success  # a saved row prints as the result did
    assert math.isnan(EvalResult.from_records("E", []).mean_score)


def test_layout_names_and_append_outside_a_with_block() -> None:
    assert batch_layout(True, 8) == "per-episode" and batch_layout(False, 8) == "batched-8"
    with pytest.raises(RuntimeError, match="needs `with log:`"):
        EpisodeLog("unused.jsonl", "E").append({"seed": 0})

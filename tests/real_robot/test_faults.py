"""Faults end to end on loopback: a real policy server serving a shipped policy, the real client,
the twin in real time behind the safety layer, one short episode per fault (about 6 s each).

In every case: nothing outside the limits reached the arm (checked on what the arm received), the
arm was held after the fault began, commands resumed after it ended, and the step log says what
happened."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("websockets", reason="the hardware bridge extra `robot` is not installed")
pytest.importorskip("msgpack", reason="the hardware bridge extra `robot` is not installed")

from robocompose.real_robot.faults.loop import FAULTS, run_fault  # noqa: E402
from robocompose.real_robot.policy_adapter import load_served_policy  # noqa: E402
from robocompose.shipped import shipped_path  # noqa: E402

# against the wall clock: `make test` runs these on their own, after the parallel pass
pytestmark = pytest.mark.realtime


@pytest.fixture(scope="module")
def served():
    return load_served_policy(shipped_path("PickPlace", "flow_mlp"))


def _log(report) -> tuple[list[dict], list[dict]]:
    """(mode events, safety events) of the step log."""
    with open(report.log) as f:
        steps = [line for line in map(json.loads, f) if line["kind"] == "step"]
    return [e for s in steps for e in s["events"]], [e for s in steps for e in s["safety"]]


@pytest.mark.parametrize("fault", FAULTS)
def test_fault_is_survived_safely(fault, served, tmp_path):
    report = run_fault(fault, served, tmp_path)
    events, safety = _log(report)
    kinds = {e["kind"] for e in safety}
    names = {e["event"] for e in events}
    failures = [e["reason"] for e in events if e["event"] == "request_failed"]

    assert report.commands > 0
    assert report.outside_limits == []
    assert report.commands_after_fault > 0, "commands never resumed after the fault"
    if fault != "out_of_range_actions":  # the clamped commands keep flowing there
        assert report.hold_latency_ms, "the arm was not held during the fault"
        assert "watchdog" in kinds and "wait" in names

    if fault in ("server_killed", "connection_dropped"):
        assert report.reconnects >= 1 and "reconnect" in names
    if fault == "server_stalled":
        latencies = [e["latency_s"] for e in events if e["event"] in ("chunk", "chunk_stale")]
        assert max(latencies) > 1.0  # the stalled answer came late, and the loop went on
    if fault == "nan_actions":
        assert report.details["corrupted_chunks"] >= 1
        assert failures and all("NaN" in r for r in failures)
    if fault == "out_of_range_actions":
        assert report.details["corrupted_chunks"] >= 1
        assert {"workspace", "gripper"} <= kinds
    if fault == "malformed_observation":
        assert report.details["malformed_requests"] == report.details["server_errors"] >= 1
        assert failures and all("`state` must have shape (2, 11)" in r for r in failures)

"""The policy server on loopback with a real shipped checkpoint and a real composed pair; the
server faults (delay, stall, kill) through `faults.injectors.FaultyServer` around it."""

from __future__ import annotations

import os
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

websockets = pytest.importorskip("websockets", reason="the `robot` extra is not installed")

from websockets.exceptions import ConnectionClosedOK, InvalidStatus  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from robocompose.policies.runner import PolicyPredictor, PolicyRunner  # noqa: E402
from robocompose.real_robot.base import PolicySpec  # noqa: E402
from robocompose.real_robot.client import (  # noqa: E402
    AuthenticationError,
    PolicyClient,
    PolicyServerError,
)
from robocompose.real_robot.faults.injectors import FaultyServer  # noqa: E402
from robocompose.real_robot.obs_check import check_observation  # noqa: E402
from robocompose.real_robot.policy_adapter import load_served_policy  # noqa: E402
from robocompose.real_robot.websocket_server import PolicyServer  # noqa: E402
from robocompose.real_robot.wire import pack, unpack  # noqa: E402
from robocompose.shipped import shipped_path  # noqa: E402
from tests.real_robot.gated_policy import GatedPolicy  # noqa: E402

# two flow MLPs of one architecture (merge needs that), trained on halves of one file
TWO_CUBES_FLOWS = [shipped_path("PickPlaceTwoCubes", k) for k in ("flow_mlp", "flow_mlp_b")]


@pytest.fixture(scope="module")
def single():
    return load_served_policy(shipped_path("PickPlace", "flow_mlp"))


@pytest.fixture(scope="module")
def server(single):
    with PolicyServer(single) as running:
        yield running


def valid_obs(spec: PolicySpec, value: float = 0.1) -> dict[str, np.ndarray]:
    return {
        k: np.full((spec.n_obs_steps, *s.shape), value, dtype=s.dtype) for k, s in spec.obs.items()
    }


def test_metadata_is_the_spec_and_replies_carry_timing(server, single):
    with PolicyClient(server.address) as client:
        assert client.metadata == single.spec.to_metadata()
        spec = client.spec
        assert (spec.n_obs_steps, spec.action_dim, spec.chunk_length) == (2, 4, 15)
        assert spec.obs["state"].dtype == "float64" and spec.control_hz == 10.0
        assert spec.extra["task"] == "robocompose/PickPlace-v0"
        reply = client.infer(valid_obs(spec))
    assert reply["actions"].shape == (15, 4) and reply["actions"].dtype == np.float32
    assert np.all(np.isfinite(reply["actions"])) and reply["actions"].flags.writeable
    timing = reply["server_timing"]
    assert {"infer_ms", "queue_ms", "delay_ms", "stall_ms", "total_ms"} <= set(timing)
    assert timing["infer_ms"] > 0 and timing["total_ms"] >= timing["infer_ms"]
    assert reply["client_timing"]["round_trip_ms"] > 0


def test_seeded_requests_match_the_harness_runner(server, single):
    """Same episode seed -> the noise PolicyRunner draws, so the same actions as in evaluation."""
    runner = PolicyRunner(PolicyPredictor(single.policy))
    runner.reset(np.array([True]), seeds=np.array([1234]))
    obs = valid_obs(single.spec, 0.2)
    frame = {"state": obs["state"][-1:]}
    direct = [runner(frame) for _ in range(16)]  # two chunks of n_action_steps = 8
    with PolicyClient(server.address) as client:
        first = client.infer(obs | {"seed": np.int64(1234)})["actions"]
        second = client.infer(obs | {"seed": 1234})["actions"]  # the next draw of the stream
        again = client.infer(obs | {"seed": 1234, "chunk_index": 1})["actions"]
        other = client.infer(obs | {"seed": 99, "chunk_index": 0})["actions"]
    np.testing.assert_allclose(first[:8], np.concatenate(direct[:8]), atol=1e-5)
    np.testing.assert_allclose(second[:8], np.concatenate(direct[8:]), atol=1e-5)
    np.testing.assert_array_equal(again, second)
    assert np.abs(other - first).max() > 1e-3


def test_healthz_is_a_real_http_answer(server):
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=5) as r:
        assert r.status == 200 and r.read() == b"OK\n"
    with PolicyClient(server.address) as client:
        assert client.healthy()


MALFORMED = [  # (keys changed or added, None = key dropped; the error text that names it)
    ({"state": None}, "missing ['state']"),
    ({"extra": np.zeros(3)}, "unexpected ['extra']"),
    ({"state": np.zeros((2, 10))}, "`state` must have shape (2, 11) (history 2 x (11,))."),
    ({"state": np.zeros((2, 11), np.float32)}, "`state` must have dtype float64. Got float32"),
    ({"state": np.full((2, 11), np.nan)}, "`state` must be finite"),
    ({"state": [[0.0] * 11] * 2}, "`state` must be a numpy array"),
    ({"prefix_actions": np.zeros((3, 5))}, "`prefix_actions` must have shape (m, 4)"),
    ({"seed": -1}, "`seed` must be in [0, 9223372036854775807]. Got -1"),
    ({"chunk_index": 2**40}, "`chunk_index` must be in [0, 10000]. Got 1099511627776"),
    ({"prefix_actions": np.zeros((2, 4)), "prefix_committed": 3}, "`prefix_committed` must be <="),
]  # fmt: skip


def test_malformed_observations_are_named_and_the_connection_keeps_serving(server, single):
    good = valid_obs(single.spec)
    errors_before = server.stats["errors"]
    with connect(server.address) as ws:
        assert unpack(ws.recv(timeout=10)) == single.spec.to_metadata()
        for change, named in MALFORMED:
            obs = {k: v for k, v in (good | change).items() if v is not None}
            ws.send(pack(obs))
            reply = ws.recv(timeout=10)
            assert isinstance(reply, str) and reply.startswith("malformed observation")
            assert named in reply, reply
        for junk, named in ((b"\xc1\x00", "undecodable message"), ("hello", "text frame")):
            ws.send(junk)
            reply = ws.recv(timeout=10)
            assert isinstance(reply, str) and named in reply
        ws.send(pack(good))
        reply = unpack(ws.recv(timeout=10))
    assert reply["actions"].shape == (15, 4)
    assert server.stats["errors"] - errors_before == len(MALFORMED) + 2


def test_our_client_raises_the_error_reply_and_carries_on(server, single):
    with PolicyClient(server.address) as client:
        with pytest.raises(PolicyServerError, match="`state` must have dtype float64"):
            client.infer({"state": np.zeros((2, 11), np.float32)})
        assert client.infer(valid_obs(single.spec))["actions"].shape == (15, 4)


def test_api_key(single):
    with PolicyServer(single, api_key="s3cret") as server:
        for key in (None, "wrong"):
            with pytest.raises(AuthenticationError, match="HTTP 401"):
                PolicyClient(server.address, api_key=key, connect_timeout_s=2)
        with pytest.raises(InvalidStatus) as refused:
            connect(server.address, additional_headers={"Authorization": "Api-Key nope"})
        assert refused.value.response.status_code == 401
        with PolicyClient(server.address, api_key="s3cret") as client:
            assert client.infer(valid_obs(single.spec))["actions"].shape == (15, 4)
            assert client.healthy()  # health checks need no key


def test_inference_does_not_block_the_event_loop(single):
    gated = GatedPolicy(single)
    with PolicyServer(gated) as server:
        first, second = PolicyClient(server.address), PolicyClient(server.address)
        replies = {}
        worker = threading.Thread(
            target=lambda: replies.update(a=first.infer(valid_obs(single.spec)))
        )
        worker.start()
        assert gated.entered.wait(30)
        # inference is running: health checks and new connections are still answered
        assert first.healthy(timeout_s=5)
        assert PolicyClient(server.address).spec == single.spec
        queued = threading.Thread(
            target=lambda: replies.update(b=second.infer(valid_obs(single.spec)))
        )
        queued.start()
        assert worker.is_alive() and "a" not in replies
        gated.release.set()
        worker.join(30)
        queued.join(30)
    assert replies["a"]["actions"].shape == replies["b"]["actions"].shape == (15, 4)


def test_graceful_stop_lets_the_inference_under_way_reply(single):
    gated = GatedPolicy(single)
    server = PolicyServer(gated).start()
    replies = {}
    with PolicyClient(server.address) as client:
        worker = threading.Thread(
            target=lambda: replies.update(a=client.infer(valid_obs(single.spec)))
        )
        worker.start()
        assert gated.entered.wait(30)
        stopper = threading.Thread(target=server.stop)
        stopper.start()  # stops listening, then waits for the reply under way
        gated.release.set()
        worker.join(30)
        stopper.join(30)
    assert replies["a"]["actions"].shape == (15, 4) and not server.running


def test_kill_drops_the_inference_under_way(single):
    gated = GatedPolicy(single)
    server = FaultyServer(gated).start()
    errors = []

    def ask() -> None:
        try:
            client.infer(valid_obs(single.spec))
        except ConnectionError as e:
            errors.append(e)

    client = PolicyClient(server.address, connect_timeout_s=0.5)
    worker = threading.Thread(target=ask)
    worker.start()
    assert gated.entered.wait(30)
    server.kill()  # returns with the inference still held at the gate
    worker.join(30)
    gated.release.set()
    assert errors and "could not reach the policy server" in str(errors[0])
    client.close()
    server.stop()


def test_client_timeout_drops_the_late_reply(single):
    gated = GatedPolicy(single)
    with PolicyServer(gated) as server, PolicyClient(server.address, timeout_s=0.3) as client:
        with pytest.raises(TimeoutError, match="no reply from ws://127.0.0.1"):
            client.infer(valid_obs(single.spec, 0.1))
        gated.release.set()
        fresh = client.infer(valid_obs(single.spec, 0.3) | {"seed": 4, "chunk_index": 0})
        assert client.reconnects == 1
        direct = single.infer(
            check_observation(
                valid_obs(single.spec, 0.3) | {"seed": 4, "chunk_index": 0}, single.spec
            )
        )
    np.testing.assert_array_equal(fresh["actions"], direct["actions"])  # not the stale reply


def test_injected_delay_and_stall_are_reported(single):
    with FaultyServer(single, delay_s=0.05) as server, PolicyClient(server.address) as client:
        timing = client.infer(valid_obs(single.spec))["server_timing"]
        assert timing["delay_ms"] == pytest.approx(50.0) and timing["infer_ms"] >= 50.0
        server.stall(0.5)
        timing = client.infer(valid_obs(single.spec))["server_timing"]
        assert 0.0 < timing["stall_ms"] <= 500.0
        assert timing["total_ms"] >= timing["stall_ms"] + timing["infer_ms"]


def test_kill_restart_and_graceful_stop(single):
    server = FaultyServer(single).start()
    client = PolicyClient(server.address, connect_timeout_s=10)
    port = server.port
    server.kill()
    assert not client.healthy()
    server.start()
    assert server.port == port
    assert client.infer(valid_obs(single.spec))["actions"].shape == (15, 4)
    assert client.reconnects == 1
    with connect(server.address) as raw:
        raw.recv(timeout=10)
        server.stop()
        with pytest.raises(ConnectionClosedOK) as closed:
            raw.recv(timeout=10)
    assert closed.value.rcvd.code == 1001  # going away
    with pytest.raises(ConnectionError, match="could not reach the policy server"):
        client.connect_timeout_s = 0.3
        client.infer(valid_obs(single.spec))
    client.close()


def test_client_gives_up_on_an_absent_server_after_its_timeout(single):
    server = PolicyServer(single).start()  # a port that was free a moment ago
    free = server.port
    server.stop()
    with pytest.raises(ConnectionError, match=f"ws://127.0.0.1:{free} within 0.3 s"):
        PolicyClient("127.0.0.1", free, connect_timeout_s=0.3)
    with pytest.raises(ValueError, match="`backoff_s` must be in"):
        PolicyClient("127.0.0.1", free, backoff_s=2.0, max_backoff_s=1.0)


def test_busy_port_is_named(server, single):
    held = f"port {server.port} on 127.0.0.1 is held by pid {os.getpid()} "
    with pytest.raises(OSError, match=held):
        PolicyServer(single, port=server.port).start()


def test_port_and_delay_are_checked(single):
    with pytest.raises(ValueError, match="`port` must be in"):
        PolicyServer(single, port=70000)
    with pytest.raises(ValueError, match="`delay_s` must be >= 0"):
        FaultyServer(single, delay_s=-1)


def test_plain_http_without_upgrade_is_refused(server):
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"http://127.0.0.1:{server.port}/", timeout=5)
    assert refused.value.code == 426  # upgrade required: only /healthz speaks plain HTTP


@pytest.fixture(scope="module")
def composed():
    return load_served_policy(parents=TWO_CUBES_FLOWS, weights=(0.5, 0.5))


def test_composed_pair_served(composed):
    runner = PolicyRunner(composed.policy)
    runner.reset(np.array([True]), seeds=np.array([7]))
    obs = valid_obs(composed.spec, 0.05)
    direct = np.concatenate([runner({"state": obs["state"][-1:]}) for _ in range(8)])
    with PolicyServer(composed) as server, PolicyClient(server.address) as client:
        assert "convex [0.5, 0.5] of PickPlaceTwoCubes_flow_mlp" in client.spec.extra["policy"]
        reply = client.infer(obs | {"seed": 7})
        np.testing.assert_allclose(reply["actions"][:8], direct, atol=1e-5)
        prefix = reply["actions"][:5] + 0.01
        guided = client.infer(obs | {"seed": 8, "prefix_actions": prefix})["actions"]
        np.testing.assert_allclose(guided[:5], prefix, atol=1e-5)
        assert guided.shape == (15, 4)


class GatedBatches(GatedPolicy):
    """A gated policy that batches, recording the size of each batch."""

    def __init__(self, inner) -> None:
        super().__init__(inner)
        self.sizes: list[int] = []

    def infer_batch(self, requests):
        self.sizes.append(len(requests))
        return self.inner.infer_batch(requests)


def test_requests_queued_behind_a_call_run_as_one_batch(single):
    """A fleet: while one call holds the worker, the others queue and then run as one batch;
    each client gets its own chunk, as served alone to float error."""
    gated = GatedBatches(single)
    requests = [valid_obs(single.spec, 0.02 * i) | {"seed": i, "chunk_index": 0} for i in range(4)]
    replies = {}
    with PolicyServer(gated, max_batch=8) as server:
        clients = [PolicyClient(server.address) for _ in requests]

        def ask(i: int) -> None:
            replies[i] = clients[i].infer(requests[i])["actions"]

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
        threads[0].start()
        assert gated.entered.wait(30)
        for thread in threads[1:]:
            thread.start()
        while server.in_flight < 4:
            time.sleep(0.01)
        gated.release.set()
        for thread in threads:
            thread.join(30)
    assert gated.sizes == [3]  # the first ran alone (it held the worker), the rest together
    for i, request in enumerate(requests):
        alone = single.infer(check_observation(request, single.spec))["actions"]
        np.testing.assert_allclose(replies[i], alone, rtol=0, atol=1e-5)


class RefusingBatches(GatedBatches):
    """A gated batching policy that fails any call holding a request with seed 13."""

    def infer_batch(self, requests):
        self.sizes.append(len(requests))
        if any(r.get("seed") == 13 for r in requests):
            raise ValueError("seed 13 is refused")
        return self.inner.infer_batch(requests)

    def infer(self, obs):
        return self.infer_batch([obs])[0] if self.entered.is_set() else super().infer(obs)


def test_a_failing_batch_is_retried_request_by_request(single):
    """One bad request in a batch fails only its own client."""
    policy = RefusingBatches(single)
    seeds = [1, 2, 13, 4]
    replies: dict[int, object] = {}
    with PolicyServer(policy, max_batch=8) as server:
        clients = [PolicyClient(server.address) for _ in seeds]

        def ask(i: int) -> None:
            try:
                replies[i] = clients[i].infer(valid_obs(single.spec) | {"seed": seeds[i]})
            except PolicyServerError as e:
                replies[i] = e

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(seeds))]
        threads[0].start()
        assert policy.entered.wait(30)
        for thread in threads[1:]:
            thread.start()
        while server.in_flight < len(seeds):
            time.sleep(0.01)
        policy.release.set()
        for thread in threads:
            thread.join(30)
    assert policy.sizes == [3, 1, 1, 1]  # the three queued as one batch, failed, then alone
    assert "inference failed: ValueError: seed 13 is refused" in str(replies[2])
    assert all(replies[i]["actions"].shape == (15, 4) for i in (0, 1, 3))

"""The policy server against hostile or buggy clients, on loopback with a real shipped checkpoint:
no request may crash it, leave a traceback in its log, let a keyless client in, cost more than
a bounded amount of work, slip an unsafe chunk out, or slow a legitimate client past its
deadline; every refusal is a close code and a reason, and lands in the audit log."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time

import numpy as np
import pytest

pytest.importorskip("websockets", reason="the `robot` extra is not installed")

from websockets.exceptions import ConnectionClosed  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from robocompose.real_robot.audit import AuditLog  # noqa: E402
from robocompose.real_robot.client import PolicyClient, PolicyServerError  # noqa: E402
from robocompose.real_robot.faults.injectors import CorruptingPolicy  # noqa: E402
from robocompose.real_robot.limits import ServerLimits  # noqa: E402
from robocompose.real_robot.obs_check import MAX_CHUNK_INDEX, message_limit  # noqa: E402
from robocompose.real_robot.policy_adapter import load_served_policy  # noqa: E402
from robocompose.real_robot.websocket_server import PolicyServer  # noqa: E402
from robocompose.real_robot.wire import pack, unpack  # noqa: E402
from robocompose.shipped import shipped_path  # noqa: E402
from tests.real_robot.gated_policy import GatedPolicy  # noqa: E402

KEY = "s3cret-key-never-logged"
HANDSHAKE = (
    b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
)


@pytest.fixture(scope="module")
def single():
    return load_served_policy(shipped_path("PickPlace", "flow_mlp"))


def obs(value: float = 0.1, **extra) -> dict:
    return {"state": np.full((2, 11), value)} | extra


def serving(policy, tmp_path, **settings) -> PolicyServer:
    """A server of `policy` with its audit log in `tmp_path`, keyed unless told otherwise."""
    settings.setdefault("api_key", KEY)
    return PolicyServer(policy, audit=AuditLog(tmp_path / "audit.jsonl"), **settings)


def audit_lines(server: PolicyServer) -> list[dict]:
    return [json.loads(line) for line in server.audit.path.read_text().splitlines()]


def raw_request(port: int, request: bytes) -> int | None:
    """The HTTP status the server answers a hand-written request with (None: it hung up)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request)
        answer = b""
        while b"\r\n" not in answer and (chunk := s.recv(4096)):
            answer += chunk
    return int(answer.split()[1]) if answer else None


def no_tracebacks(caplog) -> None:
    assert "Traceback" not in caplog.text
    assert all(r.exc_info is None for r in caplog.records), caplog.text


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        (b"", 401),
        (f"Authorization: Api-Key {KEY}\r\nAuthorization: Api-Key {KEY}\r\n".encode(), 401),
        (b"Authorization: Api-Key wrong\r\n", 401),
        (b"Authorization: Basic czNjcmV0\r\n", 401),
        (b"Authorization: Api-Key\r\n", 401),
        (b"Authorization: Api-Key \xff\xfe\xc3(\r\n", 401),
        (b"Authorization Api-Key x\r\n", None),  # not a header line: no HTTP at all
    ],
)
def test_bad_auth_headers_get_401_without_a_traceback(single, tmp_path, caplog, headers, status):
    caplog.set_level(logging.INFO)
    with serving(single, tmp_path) as server:
        assert raw_request(server.port, HANDSHAKE + headers + b"\r\n") == status
        with PolicyClient(server.address, api_key=KEY) as client:
            assert client.infer(obs())["actions"].shape == (15, 4)
    no_tracebacks(caplog)
    refused = [e for e in audit_lines(server) if e.get("result") == "refused"]
    assert len(refused) == (status == 401) and KEY not in server.audit.path.read_text()


def test_garbage_and_tls_hellos_on_the_plain_port_leave_no_traceback(single, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    with serving(single, tmp_path) as server:
        for junk in (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", b"HELLO\r\n\r\n"):
            assert raw_request(server.port, junk) is None  # not HTTP: the server hangs up
        with socket.create_connection(("127.0.0.1", server.port)) as s:  # a half request
            s.sendall(HANDSHAKE)
        assert PolicyClient(server.address, api_key=KEY).infer(obs())["actions"].shape == (15, 4)
    no_tracebacks(caplog)


def test_every_request_field_has_a_range_and_costs_bounded_work(single, tmp_path):
    limits = ServerLimits(deadline_s=1.0)
    with (
        serving(single, tmp_path, limits=limits) as server,
        PolicyClient(server.address, api_key=KEY) as client,
    ):
        for extra, named in (
            ({"chunk_index": 2**40}, "`chunk_index` must be in [0, 10000]"),
            ({"seed": np.uint64(2**64 - 1)}, "`seed` must be in [0, 9223372036854775807]"),
            ({"prefix_committed": 99, "prefix_actions": np.zeros((2, 4))}, "must be in [0"),
        ):
            with pytest.raises(PolicyServerError, match=named.replace("[", r"\[")):
                client.infer(obs(**extra))
        slowest = 0.0
        for index in (MAX_CHUNK_INDEX, 0, MAX_CHUNK_INDEX):  # the worst a client can ask
            reply = client.infer(obs(seed=7, chunk_index=index))
            slowest = max(slowest, reply["client_timing"]["round_trip_ms"])
    assert slowest < 1000 * limits.deadline_s / 2


def test_huge_finite_inputs_are_refused_or_clipped(single, tmp_path, caplog):
    prefix = np.full((3, 4), 1e308)
    with serving(single, tmp_path) as server, PolicyClient(server.address, api_key=KEY) as client:
        with pytest.raises(
            PolicyServerError, match=r"input out of range: `state` lies 2e\+36 half-ranges"
        ):
            client.infer(obs(1e35))
        with pytest.raises(PolicyServerError, match="`prefix_actions` lies inf half-ranges"):
            client.infer(obs(prefix_actions=prefix))
    clipping = ServerLimits(out_of_range="clip", range_factor=2.0)
    with (
        serving(single, tmp_path, limits=clipping) as server,
        PolicyClient(server.address, api_key=KEY) as client,
    ):
        actions = client.infer(obs(1e35, prefix_actions=prefix))["actions"]
    assert actions.shape == (15, 4) and np.all(np.isfinite(actions))
    assert "clipped ['state', 'prefix_actions']" in caplog.text
    assert any(e["event"] == "clipped" for e in audit_lines(server))


class ShiftedPolicy:
    """The real policy with its training bounds, its chunks moved far outside them."""

    def __init__(self, inner, shift: float) -> None:
        self.inner, self.spec, self.shift = inner, inner.spec, shift
        self.training_bounds = inner.training_bounds

    def infer(self, o):
        return {"actions": self.inner.infer(o)["actions"] + self.shift}

    def reset(self) -> None:
        self.inner.reset()


def test_unsafe_chunks_are_never_sent(single, tmp_path):
    corrupt = CorruptingPolicy(single, "nan")
    corrupt.active.set()
    for policy, named in (
        (corrupt, "unsafe actions, not sent: `actions` must be finite. Got NaN or inf"),
        (ShiftedPolicy(single, 50.0), "unsafe actions, not sent: `actions` lie .* half-ranges"),
    ):
        with (
            serving(policy, tmp_path) as server,
            PolicyClient(server.address, api_key=KEY) as client,
            pytest.raises(PolicyServerError, match=named),
        ):
            client.infer(obs())
    assert [e["kind"] for e in audit_lines(server) if e["event"] == "error"] == [
        "unsafe actions, not sent"
    ] * 2


@pytest.mark.realtime
def test_a_stuck_inference_errs_at_its_deadline_and_the_server_says_unhealthy(single, tmp_path):
    gated = GatedPolicy(single)
    with serving(gated, tmp_path, limits=ServerLimits(deadline_s=0.3)) as server:
        first = PolicyClient(server.address, api_key=KEY)
        other = PolicyClient(server.address, api_key=KEY)
        started = time.monotonic()
        # the server's deadline error (the client's own timeout is 10 s and raises another)
        with pytest.raises(PolicyServerError, match=r"deadline of 0.3 s \(limits.deadline_s\)"):
            first.infer(obs())
        assert time.monotonic() - started >= 0.3
        assert not first.healthy()  # /healthz: 503 while the call runs on
        with pytest.raises(PolicyServerError, match="refused until it returns"):
            other.infer(obs())  # at once, not after another deadline
        gated.release.set()
        deadline = time.monotonic() + 5
        while not first.healthy() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert other.infer(obs())["actions"].shape == (15, 4)
        first.close()
        other.close()


def closed_by_server(ws) -> ConnectionClosed:
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            ws.recv(timeout=5)
    return closed.value


@pytest.mark.realtime
def test_limits_close_with_a_code_and_a_reason(single, tmp_path):
    headers = {"Authorization": f"Api-Key {KEY}"}
    with (
        serving(single, tmp_path, limits=ServerLimits(idle_timeout_s=0.3)) as server,
        connect(server.address, additional_headers=headers) as idle,
    ):
        started = time.monotonic()
        unpack(idle.recv(timeout=5))
        gone = closed_by_server(idle)  # within its 5 s receive timeout, not before the limit
        assert gone.rcvd.code == 1000 and "limits.idle_timeout_s" in gone.rcvd.reason
        assert time.monotonic() - started >= 0.3
    # its own server: on a busy machine the burst's replies can outlast a short idle timeout
    with (
        serving(single, tmp_path, limits=ServerLimits(max_rate_hz=1.0)) as server,
        connect(server.address, additional_headers=headers) as fast,
    ):
        unpack(fast.recv(timeout=5))
        # twenty seconds' worth at once: the budget (one request) refills by one a second, so
        # only replies slower than a second each could keep the burst within it
        for _ in range(20):
            fast.send(pack(obs()))
        gone = closed_by_server(fast)
        assert gone.rcvd.code == 1008 and "limits.max_rate_hz" in gone.rcvd.reason
    with (
        serving(single, tmp_path, limits=ServerLimits(max_connections=2)) as server,
        PolicyClient(server.address, api_key=KEY) as one,
        PolicyClient(server.address, api_key=KEY) as two,
    ):
        with connect(server.address, additional_headers=headers) as third:
            gone = closed_by_server(third)
            assert gone.rcvd.code == 1013 and "limits.max_connections" in gone.rcvd.reason
        for client in (one, two):  # the legitimate clients are served on
            assert client.infer(obs())["actions"].shape == (15, 4)
    refusals = [e["code"] for e in audit_lines(server) if e["event"] == "refused"]
    assert refusals == [1000, 1008, 1013]  # both servers wrote to one audit log


def test_the_audit_log_says_who_and_what_but_no_key_or_observation(single, tmp_path):
    value = 0.123456789
    with serving(single, tmp_path) as server:
        with pytest.raises(Exception, match="HTTP 401"):
            PolicyClient(server.address, api_key="bad-guess-42", connect_timeout_s=1)
        with PolicyClient(server.address, api_key=KEY) as client:
            client.infer(obs(value))
            with pytest.raises(PolicyServerError):
                client.infer({"state": np.full((2, 10), value)})
    text = server.audit.path.read_text()
    events = [e["event"] for e in audit_lines(server)]
    assert events[0] == "listening" and events[-1] == "stopped"
    assert {"auth", "connected", "error", "closed"} <= set(events)
    assert KEY not in text and "bad-guess" not in text and "0.1234" not in text


def test_tls_serves_wss_and_a_plain_client_gets_nothing(single, tmp_path):
    pytest.importorskip("cryptography", reason="makes the test's certificate")
    from robocompose.real_robot.exposure import tls_context
    from tests.real_robot.tls_cert import self_signed

    cert, key = self_signed(tmp_path)
    with serving(single, tmp_path, tls=tls_context(str(cert), str(key))) as server:
        assert server.address.startswith("wss://127.0.0.1:")
        with PolicyClient(server.address, api_key=KEY, ca_file=str(cert)) as client:
            assert client.infer(obs())["actions"].shape == (15, 4)
            assert client.healthy()
        plain = f"ws://127.0.0.1:{server.port}"
        with pytest.raises(ConnectionError, match="could not reach"):
            PolicyClient(plain, api_key=KEY, connect_timeout_s=0.3)
        with pytest.raises(ConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
            PolicyClient(server.address, api_key=KEY, connect_timeout_s=0.3)  # no ca_file


def test_a_frame_larger_than_any_observation_is_refused_unread(single, tmp_path):
    limit = message_limit(single.spec)
    assert limit < 2**17  # a state policy: tens of kilobytes, not the 64 MiB it used to be
    headers = {"Authorization": f"Api-Key {KEY}"}
    with serving(single, tmp_path) as server:
        with connect(server.address, additional_headers=headers) as ws:
            unpack(ws.recv(timeout=5))
            ws.send(pack(obs(prefix_actions=np.zeros((limit // 32, 4)))))
            assert closed_by_server(ws).rcvd.code == 1009  # message too big
        with PolicyClient(server.address, api_key=KEY) as client:
            assert client.infer(obs())["actions"].shape == (15, 4)


def _hostile(address: str, until: float, kind: str) -> None:
    """Until `until`: the costliest valid requests, junk frames, or wrong-key connections."""
    headers = {"Authorization": f"Api-Key {KEY if kind != 'wrong key' else 'guess'}"}
    seed = 0
    while time.monotonic() < until:
        try:
            with connect(address, additional_headers=headers, open_timeout=2) as ws:
                unpack(ws.recv(timeout=5))
                while time.monotonic() < until:
                    seed += 1  # a new stream each time: chunk_index is drawn from scratch
                    worst = obs(seed=seed, chunk_index=MAX_CHUNK_INDEX)
                    ws.send(pack(worst) if kind == "worst" else b"\xc1" * 1000)
                    ws.recv(timeout=5)
        except Exception:  # noqa: BLE001 - refused, closed or rate-limited: try again
            time.sleep(0.01)


@pytest.mark.realtime
def test_a_legitimate_client_keeps_its_deadline_beside_hostile_ones(single, tmp_path):
    limits = ServerLimits(deadline_s=1.0, max_rate_hz=50.0)
    with serving(single, tmp_path, limits=limits) as server:
        until = time.monotonic() + 2.0
        hostile = [
            threading.Thread(target=_hostile, args=(server.address, until, kind), daemon=True)
            for kind in ("worst", "worst", "junk", "wrong key")
        ]
        for thread in hostile:
            thread.start()
        latencies = []
        with PolicyClient(server.address, api_key=KEY) as client:
            while time.monotonic() < until:
                reply = client.infer(obs(seed=1, chunk_index=len(latencies)))
                latencies.append(reply["client_timing"]["round_trip_ms"] / 1000)
                time.sleep(0.1)
        for thread in hostile:
            thread.join(10)
    assert len(latencies) >= 3 and max(latencies) < limits.deadline_s


def test_a_request_the_policy_refuses_is_one_line_not_a_traceback(tmp_path, caplog):
    """A prefix sent to a mixture (which has no single denoiser to guide) is the client's
    error: any client could send it, so it must not fill the log with tracebacks."""
    pair = [shipped_path("PickPlaceTwoCubes", k) for k in ("flow_mlp", "flow_mlp_b")]
    mixture = load_served_policy(parents=pair, operator="mixture")
    state = {"state": np.full((2, 16), 0.05), "prefix_actions": np.zeros((2, 4))}
    with (
        serving(mixture, tmp_path) as server,
        PolicyClient(server.address, api_key=KEY) as client,
        pytest.raises(PolicyServerError, match="ValueError: `prefix_actions`: operator 'mixture'"),
    ):
        client.infer(state)
    no_tracebacks(caplog)

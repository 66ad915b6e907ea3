"""Both directions against the real `openpi-client` package from PyPI (not a copy of its code):
its WebsocketClientPolicy talks to our server, and our client talks to a server that speaks
openpi's protocol through openpi_client's own msgpack codec."""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("websockets", reason="the `robot` extra is not installed")
openpi_msgpack = pytest.importorskip("openpi_client.msgpack_numpy", reason="no openpi-client")
openpi_policy = pytest.importorskip("openpi_client.websocket_client_policy")

from websockets.exceptions import InvalidStatus  # noqa: E402
from websockets.sync.server import ServerConnection, serve  # noqa: E402

from robocompose.real_robot.client import PolicyClient, PolicyServerError  # noqa: E402
from robocompose.real_robot.policy_adapter import load_served_policy  # noqa: E402
from robocompose.real_robot.websocket_server import PolicyServer  # noqa: E402
from robocompose.shipped import shipped_path  # noqa: E402


@pytest.fixture(scope="module")
def served():
    return load_served_policy(shipped_path("PickPlace", "flow_mlp"))


# openpi's client opens its socket outside a `with` block, which websockets >= 17.1 warns about
@pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager")
def test_openpi_client_against_our_server(served):
    obs = {"state": np.full((2, 11), 0.1)}
    with PolicyServer(served, api_key="k") as server:
        client = openpi_policy.WebsocketClientPolicy("127.0.0.1", server.port, api_key="k")
        assert client.get_server_metadata() == served.spec.to_metadata()
        reply = client.infer(obs | {"seed": 3})
        assert reply["actions"].shape == (15, 4) and reply["actions"].dtype == np.float32
        assert reply["server_timing"]["infer_ms"] > 0
        with pytest.raises(RuntimeError, match="`state` must have shape"):
            client.infer({"state": np.zeros((11,))})
        again = client.infer(obs | {"seed": 3, "chunk_index": 0})  # still connected
        np.testing.assert_array_equal(again["actions"], reply["actions"])
        client._ws.close()
        with pytest.raises(InvalidStatus, match="401"):
            openpi_policy.WebsocketClientPolicy("127.0.0.1", server.port)


@pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager")
def test_openpi_client_over_tls(served, tmp_path, monkeypatch):
    """wss:// with a certificate the test makes: openpi's client verifies it through the
    standard SSL_CERT_FILE, so the key never crosses the network in clear."""
    pytest.importorskip("cryptography", reason="makes the test's certificate")
    from robocompose.real_robot.exposure import tls_context
    from tests.real_robot.tls_cert import self_signed

    cert, key = self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    tls = tls_context(str(cert), str(key))
    with PolicyServer(served, api_key="k", tls=tls) as server:
        client = openpi_policy.WebsocketClientPolicy("wss://127.0.0.1", server.port, api_key="k")
        assert client.get_server_metadata() == served.spec.to_metadata()
        reply = client.infer({"state": np.full((2, 11), 0.1)})
        assert reply["actions"].shape == (15, 4)
        client._ws.close()


class OpenpiStyleServer:
    """A policy server written only with websockets and openpi_client's codec: metadata on
    connect, one reply per observation (actions = 2 * state), a traceback as a text frame and
    a closed connection on error, as openpi's own server does."""

    def __init__(self) -> None:
        self.server = serve(self.handle, "127.0.0.1", 0, compression=None, max_size=None)
        self.port = self.server.socket.getsockname()[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @staticmethod
    def handle(ws: ServerConnection) -> None:
        ws.send(openpi_msgpack.packb({"robot": "aloha", "action_horizon": 10}))
        for message in ws:
            obs = openpi_msgpack.unpackb(message)
            try:
                actions = np.repeat(obs["state"][None] * 2.0, 10, axis=0)
            except KeyError as e:
                ws.send(f"Traceback (most recent call last):\nKeyError: {e}")
                ws.close(1011, "Internal server error")
                return
            ws.send(openpi_msgpack.packb({"actions": actions, "server_timing": {"infer_ms": 1.0}}))

    def close(self) -> None:
        self.server.shutdown()
        self.thread.join(10)


def test_our_client_against_an_openpi_style_server():
    other = OpenpiStyleServer()
    try:
        with PolicyClient("127.0.0.1", other.port, connect_timeout_s=5) as client:
            assert client.metadata == {"robot": "aloha", "action_horizon": 10}
            with pytest.raises(ValueError, match="not a robocompose policy spec"):
                _ = client.spec
            state = np.arange(7, dtype=np.float32)
            reply = client.infer({"state": state, "prompt": "fold the towel"})
            np.testing.assert_array_equal(reply["actions"], np.tile(2 * state, (10, 1)))
            assert reply["actions"].flags.writeable  # openpi's decoder gives read-only arrays
            with pytest.raises(PolicyServerError, match="KeyError") as error:
                client.infer({"image": np.zeros((4, 4, 3), np.uint8)})
            assert isinstance(error.value, RuntimeError)  # what openpi's own client raises
            reply = client.infer({"state": state})  # the server closed; the client reconnects
            assert reply["actions"].shape == (10, 7) and client.reconnects == 1
    finally:
        other.close()

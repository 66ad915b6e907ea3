"""`robocompose serve`: its config and the verb itself, run as a user runs it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from robocompose.cli import load_verb_config
from robocompose.config import ConfigError
from robocompose.shipped import parent_pair, shipped_path

CHECKPOINT = str(shipped_path("PickPlace", "flow_mlp"))


def test_config_from_the_command_line():
    a, b = (str(p) for p in parent_pair("Stack"))
    overrides = [f"parents=[{a},{b}]", "composition.weights=[0.3,0.7]", "composition.steps=4"]
    config = load_verb_config("serve", overrides)
    assert config.composition.operator == "convex" and config.composition.weights == [0.3, 0.7]
    assert config.host == "127.0.0.1" and config.checkpoint is None
    served = config.served_policy()
    assert served.policy.steps == 4
    assert served.spec.extra["policy"] == "convex [0.3, 0.7] of Stack_diffusion_mlp, Stack_flow_mlp"


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ([], "either `checkpoint` or >= 2 `parents`"),
        ([f"checkpoint={CHECKPOINT}", f"parents=[{CHECKPOINT},{CHECKPOINT}]"], "either"),
        ([f"parents=[{CHECKPOINT}]"], "`parents` must name >= 2"),
        ([f"checkpoint={CHECKPOINT}", "port=70000"], "`port` must be in"),
        ([f"checkpoint={CHECKPOINT}", "delay_s=-0.1"], "`delay_s` must be in"),
        ([f"checkpoint={CHECKPOINT}", "rtc_mode=medium"], "`rtc_mode` must be one of"),
        ([f"checkpoint={CHECKPOINT}", "rtc_prefix_weight=2"], "`prefix_weight` must be in"),
        ([f"checkpoint={CHECKPOINT}", "prot=1"], "Did you mean 'port'"),
        ([f"checkpoint={CHECKPOINT}", "host=0.0.0.0"], "say allow_open=true to serve any"),
        ([f"checkpoint={CHECKPOINT}", "host=gpu-box.lan"], "`host` 'gpu-box.lan' is reachable"),
        ([f"checkpoint={CHECKPOINT}", "api_key=''"], "give one non-empty key"),
        ([f"checkpoint={CHECKPOINT}", "tls_cert=a.pem"], "give both `tls_cert` and `tls_key`"),
        ([f"checkpoint={CHECKPOINT}", "tls_cert=a.pem", "tls_key=a.key"], "`tls_cert` must be"),
        ([f"checkpoint={CHECKPOINT}", "limits.max_connections=0"], "`limits.max_connections`"),
        ([f"checkpoint={CHECKPOINT}", "limits.deadline_s=.inf"], "`limits.deadline_s` must"),
        ([f"checkpoint={CHECKPOINT}", "limits.range_factor=0.5"], "`limits.range_factor` must"),
        ([f"checkpoint={CHECKPOINT}", "limits.out_of_range=wrap"], "`limits.out_of_range`"),
        ([f"checkpoint={CHECKPOINT}", "max_batch=0"], "`max_batch` must be >= 1"),
        ([f"checkpoint={CHECKPOINT}", "batch_window_s=5"], "`batch_window_s` must be in [0, "),
    ],
)
def test_bad_configs_are_named(overrides, named):
    with pytest.raises(ConfigError, match=re.escape(named)):
        load_verb_config("serve", overrides)


def test_api_key_from_the_environment(monkeypatch):
    monkeypatch.setenv("MY_POLICY_KEY", "abc")
    config = load_verb_config("serve", [f"checkpoint={CHECKPOINT}", "api_key_env=MY_POLICY_KEY"])
    assert config.key() == "abc"
    assert load_verb_config("serve", [f"checkpoint={CHECKPOINT}", "api_key=xyz"]).key() == "xyz"


def test_a_named_key_variable_must_hold_a_key(monkeypatch):
    """A key source that is named but unset or empty fails closed, naming the variable."""
    monkeypatch.delenv("NO_SUCH_POLICY_KEY", raising=False)
    monkeypatch.setenv("EMPTY_POLICY_KEY", "")
    base = [f"checkpoint={CHECKPOINT}"]
    for overrides, named in (
        (["api_key_env=NO_SUCH_POLICY_KEY"], "NO_SUCH_POLICY_KEY is not set"),
        (["api_key_env=EMPTY_POLICY_KEY"], "EMPTY_POLICY_KEY is empty"),
        (["api_key_env=EMPTY_POLICY_KEY", "api_key=x"], "give one non-empty key"),
    ):
        with pytest.raises(ConfigError, match=named):
            load_verb_config("serve", base + overrides)
    monkeypatch.setenv("ROBOCOMPOSE_API_KEY", " ")
    with pytest.raises(ConfigError, match="ROBOCOMPOSE_API_KEY is empty"):
        load_verb_config("serve", base)
    monkeypatch.setenv("ROBOCOMPOSE_API_KEY", "k")
    assert load_verb_config("serve", [*base, "host=0.0.0.0"]).key() == "k"


def test_allow_open_is_said_loudly(capsys):
    """Without a key a network host serves only with allow_open=true, and the banner shouts it
    (nothing is bound here: the server is built, not started)."""
    pytest.importorskip("websockets", reason="the `robot` extra is not installed")
    from robocompose.verbs.serve import announce

    overrides = [f"checkpoint={CHECKPOINT}", "host=0.0.0.0", "allow_open=true", "audit_log=null"]
    announce(load_verb_config("serve", overrides).server())
    out, err = capsys.readouterr()
    assert "WITHOUT AN API KEY (allow_open=true)" in err
    assert "API key: NONE: OPEN TO THE NETWORK" in out and "audit log: none" in out
    assert "TLS: OFF: the key and the observations cross the network in clear" in out


def test_tls_files_make_a_wss_server_and_a_mismatched_pair_is_named(tmp_path):
    pytest.importorskip("websockets", reason="the `robot` extra is not installed")
    pytest.importorskip("cryptography", reason="makes the test's certificate")
    from tests.real_robot.tls_cert import self_signed

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (cert, key), (_, other_key) = self_signed(tmp_path / "a"), self_signed(tmp_path / "b")
    base = [f"checkpoint={CHECKPOINT}", f"tls_cert={cert}", "audit_log=null"]
    server = load_verb_config("serve", [*base, f"tls_key={key}"]).server()
    assert server.address.startswith("wss://127.0.0.1:")
    mismatched = load_verb_config("serve", [*base, f"tls_key={other_key}"])
    with pytest.raises(ValueError, match="do not make a certificate"):
        mismatched.server()


def start_serve(*overrides: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """`robocompose serve` on the shipped checkpoint in a child process, and its banner."""
    command = [sys.executable, "-m", "robocompose.cli", "serve", "--checkpoint", CHECKPOINT]
    process = subprocess.Popen(
        [*command, "--port", "0", *overrides],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"} | (env or {}),
    )
    lines: list[str] = []
    while not lines or not lines[-1].startswith("}"):  # the spec's JSON ends the banner
        line = process.stdout.readline()
        if not line:
            process.kill()
            pytest.fail(f"serve exited early: {process.stderr.read()}")
        lines.append(line)
    return process, "".join(lines)


def test_serve_verb_end_to_end(tmp_path):
    """The verb prints its address and spec, serves a client, and stops cleanly on SIGINT."""
    pytest.importorskip("websockets", reason="the `robot` extra is not installed")
    from robocompose.real_robot.client import PolicyClient

    audit = tmp_path / "audit.jsonl"
    process, banner = start_serve(f"audit_log={audit}", env={"ROBOCOMPOSE_API_KEY": "k3y"})
    try:
        address = re.search(r"on (ws://\S+)", banner).group(1)
        assert "API key: required" in banner and f"audit log: {audit}" in banner
        spec = json.loads(banner.split("spec: ", 1)[1])
        with PolicyClient(address, api_key="k3y") as client:
            assert client.metadata == spec
            reply = client.infer({"state": np.zeros((2, 11))})
            assert reply["actions"].shape == (15, 4)
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0
    finally:
        process.kill()
        process.wait()
    assert "k3y" not in audit.read_text() and '"result": "ok"' in audit.read_text()


@pytest.mark.realtime
def test_sigint_stops_a_server_stuck_in_inference_within_a_second(tmp_path):
    """An inference that never returns (30 s of injected delay): its client gets an error at
    the deadline, /healthz says 503, and Ctrl-C still closes every connection within a second
    (the process then exits; a Python with torch loaded takes ~0.5-1 s more to tear down)."""
    pytest.importorskip("websockets", reason="the `robot` extra is not installed")
    from websockets.exceptions import ConnectionClosedOK
    from websockets.sync.client import connect

    from robocompose.real_robot.wire import pack

    overrides = ("delay_s=30", "limits.deadline_s=0.5", f"audit_log={tmp_path / 'audit.jsonl'}")
    process, banner = start_serve(*overrides)
    try:
        address = re.search(r"on (ws://\S+)", banner).group(1)
        with connect(address) as ws:
            ws.recv(timeout=10)  # the metadata
            ws.send(pack({"state": np.zeros((2, 11))}))
            assert "deadline of 0.5 s (limits.deadline_s)" in ws.recv(timeout=10)
            with pytest.raises(urllib.error.HTTPError, match="503"):
                urllib.request.urlopen(address.replace("ws:", "http:") + "/healthz", timeout=5)
            process.send_signal(signal.SIGINT)
            signalled = time.monotonic()
            with pytest.raises(ConnectionClosedOK) as closed:
                ws.recv(timeout=10)
            assert closed.value.rcvd.code == 1001 and time.monotonic() - signalled < 1.0
        assert process.wait(10) == 0
    finally:
        process.kill()
        process.wait()


def test_a_port_in_use_is_one_line_naming_the_port_and_its_holder(caplog):
    """A real socket listening on loopback: serve names the port, this process holding it, and
    --port 0; it never logs a "stopped" for a server that did not start."""
    pytest.importorskip("websockets", reason="the `robot` extra is not installed")
    import socket

    from robocompose.cli import main

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SystemExit) as exit_info:
            main(["serve", "--checkpoint", CHECKPOINT, "--port", str(port)])
    message = str(exit_info.value.code)
    assert message.startswith(f"robocompose serve: error: port {port} on 127.0.0.1 is held by ")
    assert f"pid {os.getpid()} (" in message and "--port 0 for any free port" in message
    assert "\n" not in message
    assert "stopped" not in caplog.text


def test_delay_s_slows_every_inference_and_the_reply_says_so():
    """`delay_s` wraps the served policy (the server itself injects nothing); replies carry the
    same `server_timing` keys with or without it."""
    pytest.importorskip("websockets", reason="the `robot` extra is not installed")
    from robocompose.real_robot.client import PolicyClient

    obs = {"state": np.zeros((2, 11))}
    timings = []
    for delay in ("0", "0.05"):
        config = load_verb_config(
            "serve", [f"checkpoint={CHECKPOINT}", "port=0", f"delay_s={delay}", "audit_log=null"]
        )
        with config.server() as server, PolicyClient(server.address) as client:
            timings.append(client.infer(obs)["server_timing"])
    plain, delayed = timings
    config = load_verb_config("serve", [f"checkpoint={CHECKPOINT}", "delay_s=0.05", "max_batch=4"])
    with pytest.raises(ValueError, match="LatencyInjector has none: serve it with max_batch=1"):
        config.server()
    assert (
        set(plain) == set(delayed) == {"infer_ms", "queue_ms", "delay_ms", "stall_ms", "total_ms"}
    )
    assert plain["delay_ms"] == plain["stall_ms"] == delayed["stall_ms"] == 0.0
    assert delayed["delay_ms"] == pytest.approx(50.0) and delayed["infer_ms"] >= 50.0

"""`robocompose serve`: its config and the verb itself, run as a user runs it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

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


def test_serve_verb_end_to_end():
    """The verb prints its address and spec, serves a client, and stops cleanly on SIGINT."""
    pytest.importorskip("websockets", reason="the `robot` extra is not installed")
    from robocompose.real_robot.client import PolicyClient

    command = [sys.executable, "-m", "robocompose.cli", "serve", "--checkpoint", CHECKPOINT]
    env = os.environ | {"ROBOCOMPOSE_API_KEY": "k3y", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [*command, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        lines = []
        while not lines or not lines[-1].startswith("}"):  # the spec's JSON ends the banner
            line = process.stdout.readline()
            assert line, f"serve exited early: {process.stderr.read()}"
            lines.append(line)
        banner = "".join(lines)
        address = re.search(r"on (ws://\S+)", banner).group(1)
        assert "API key: required" in banner
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
            "serve", [f"checkpoint={CHECKPOINT}", "port=0", f"delay_s={delay}"]
        )
        with config.server() as server, PolicyClient(server.address) as client:
            timings.append(client.infer(obs)["server_timing"])
    plain, delayed = timings
    assert (
        set(plain) == set(delayed) == {"infer_ms", "queue_ms", "delay_ms", "stall_ms", "total_ms"}
    )
    assert plain["delay_ms"] == plain["stall_ms"] == delayed["stall_ms"] == 0.0
    assert delayed["delay_ms"] == pytest.approx(50.0) and delayed["infer_ms"] >= 50.0

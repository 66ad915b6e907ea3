"""`deploy viewer=rerun` streamed live to a real Rerun sink on loopback (the `rerun` CLI saving
what it receives, no window), read back with Rerun's own reader: entity paths and row counts."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("rerun")

from robocompose.cli import main  # noqa: E402
from robocompose.viz.live import LiveViewer  # noqa: E402
from robocompose.viz.recording import row_counts  # noqa: E402

# the deploys run the twin in real time: `make test` runs these alone, after the parallel pass
pytestmark = pytest.mark.realtime

RERUN = str(Path(sys.executable).parent / "rerun")
ROBOCOMPOSE = str(Path(sys.executable).parent / "robocompose")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen | None = None, timeout_s: float = 30) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{proc.args[0]} exited: {proc.stderr.read()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listened on {port} within {timeout_s} s")


def _deploy_args(
    tmp_path: Path, *viewer: str, episode_s: float = 1.0, time_scale: float = 1.0
) -> list[str]:
    return [
        "deploy",
        "twin",
        "--episodes",
        "1",
        "--out",
        str(tmp_path / "run"),
        "--rate-hz",
        "20",
        f"episode_s={episode_s}",
        f"time_scale={time_scale}",
        "viewer=rerun",
        *viewer,
        "safety.max_step_m=0.002",  # tight: the safety layer clamps
    ]


def _check_stream(tmp_path: Path, sink: Path) -> None:
    """Rows per entity in what the sink received = the loop's step lines."""
    counts = row_counts(sink)
    steps = (tmp_path / "run" / "steps.jsonl").read_text().splitlines()
    lines = [json.loads(line) for line in steps]
    ticks = sum(line["kind"] == "step" for line in lines)
    assert ticks >= 3  # a loaded machine skips late ticks
    for entity in ("measured", "clamps", "obs/state", "space/measured"):
        assert counts[f"/seed_100000/{entity}"] == ticks, entity
    proposed = sum(line.get("proposed") is not None for line in lines)  # none while waiting
    assert counts["/seed_100000/command/proposed"] == proposed > 0
    sent = sum(line.get("sent") is not None for line in lines)
    assert counts["/seed_100000/command/sent"] == counts["/seed_100000/space/sent"] == sent > 0
    assert counts["/seed_100000/safety"] > 0  # the clamps, each with its reason
    assert counts["/seed_100000/outcome"] == 1


def test_deploy_streams_to_a_running_viewer_at_viewer_url(tmp_path, capsys):
    port, sink = _free_port(), tmp_path / "sink.rrd"
    # `rerun --save` without a viewer: a gRPC server on `port` that saves what it receives
    proc = subprocess.Popen(
        [RERUN, "--port", str(port), "--save", str(sink)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_listening(port, proc)
        url = f"rerun+http://127.0.0.1:{port}/proxy"
        main(_deploy_args(tmp_path, f"viewer_url={url}"))
        assert f"live view: streaming to the viewer at {url}" in capsys.readouterr().out
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    _check_stream(tmp_path, sink)


def test_deploy_serves_the_live_view_to_a_viewer_that_connects_during_the_run(tmp_path):
    port, sink = _free_port(), tmp_path / "sink.rrd"
    # the deploy as a user runs it: its own process, whose exit ends the served stream
    deploy = subprocess.Popen(
        # 4 s of wall time: room for the viewer to start and connect on a loaded machine
        [ROBOCOMPOSE, *_deploy_args(tmp_path, f"viewer_port={port}", episode_s=4)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_listening(port, deploy)
        # a viewer connecting after the first ticks still receives them (the server buffers);
        # this one saves what it receives and stops when the deploy's stream ends
        client = subprocess.run(
            [RERUN, "--connect", f"rerun+http://127.0.0.1:{port}/proxy", "--save", str(sink)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        out, err = deploy.communicate(timeout=120)
    finally:
        deploy.kill()
    assert deploy.returncode == 0, err
    assert client.returncode == 0, client.stderr
    assert f"live view: connect a viewer with `rerun --connect rerun+http://127.0.0.1:{port}" in out
    _check_stream(tmp_path, sink)


def test_deploy_refuses_a_viewer_url_with_no_viewer_and_a_busy_viewer_port(tmp_path):
    url = f"rerun+http://127.0.0.1:{_free_port()}/proxy"
    with pytest.raises(SystemExit, match=re.escape(f"no Rerun viewer at {url}")):
        main(_deploy_args(tmp_path, f"viewer_url={url}"))
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(SystemExit, match=f"viewer_port {port} is held by pid"):
            main(_deploy_args(tmp_path, f"viewer_port={port}"))


def test_a_refused_viewer_leaves_nothing_open_that_breaks_the_process_at_exit(tmp_path):
    # the arm, the link and the logs were left open when the viewer was refused: refusals in
    # one process ended it with a segmentation fault at exit
    script = f"""
import socket
from robocompose.cli import main
def deploy(viewer):
    try:
        main({_deploy_args(tmp_path)!r} + [viewer])
    except SystemExit as e:
        print(e)
for _ in range(3):
    deploy("viewer_url=rerun+http://127.0.0.1:{_free_port()}/proxy")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        deploy(f"viewer_port={{held.getsockname()[1]}}")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "no Rerun viewer at" in done.stdout
    assert "is held by pid" in done.stdout


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"url": "http://127.0.0.1:9876/proxy"}, "must look like rerun"),
        ({"url": "rerun+http://127.0.0.1/proxy"}, "must look like rerun"),
        ({"url": "rerun+http://127.0.0.1:9876"}, "must look like rerun"),
        ({"save": "a.rrd", "url": "rerun+http://127.0.0.1:9876/proxy"}, "not both"),
        ({"save": "a.mp4"}, "must name an .rrd file"),
        ({"port": 0}, r"must be in \[1, 65535\]"),
    ],
)
def test_live_viewer_refuses_bad_settings_by_name(fields, message):
    with pytest.raises(ValueError, match=message):
        LiveViewer(**fields)

"""`robocompose deploy ... viewer=rerun`: the deploy loop's step log, streamed to Rerun as it runs.

Where the stream goes (`LiveViewer`):

    serve (default)   a gRPC server in the deploy process on `port` (all interfaces), which
                      buffers everything: a viewer connects at any time during the run with
                      `rerun --connect rerun+http://HOST:PORT/proxy` and sees it from the start
    url               a running viewer (`rerun`, listening on 9876) or `rerun --serve-grpc`
                      at that address, checked before the robot moves
    save              an .rrd file, for later

A step log with `JsonlWriter`'s interface (`write(line)`, `close()`) that writes each line on
and logs it, so the loop itself is unchanged. Per episode, under `seed_<seed>/`, on the
timeline `tick`:

    obs/<key>           low-dim observation keys (images are summarised in the log, not shown)
    command/proposed    the policy's action for the tick (x, y, z, gripper)     Scalars
    command/sent        what the safety layer sent after clamping               Scalars
    measured            the arm's end effector and gripper as read              Scalars
    space/measured, space/sent   the same, as 3-D points                        Points3D
    safety              each safety event (clamp, stop...) with its reason      TextLog
    clamps              safety events this tick                                 Scalars
    period_s            the tick's period (jitter)                              Scalars
    outcome             the episode's record at its end                         TextLog
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from robocompose.viz.recording import APPLICATION_ID, close_recording, open_recording, rerun

DEFAULT_PORT = 9876  # Rerun's own default, for the viewer and its gRPC server alike
URL_SCHEMES = ("rerun", "rerun+http", "rerun+https")  # what Rerun takes


@dataclass(frozen=True)
class LiveViewer:
    """Where the live view goes: an .rrd file (`save`), a running viewer (`url`), else a gRPC
    server on `port` that viewers connect to."""

    save: str | None = None
    url: str | None = None
    port: int = DEFAULT_PORT

    def __post_init__(self) -> None:
        if self.save is not None and self.url is not None:
            raise ValueError("give `viewer_save` (a file) or `viewer_url` (a viewer), not both.")
        if self.save is not None and not self.save.endswith(".rrd"):
            raise ValueError(f"`viewer_save` must name an .rrd file. Got {self.save!r}.")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"`viewer_port` must be in [1, 65535]. Got {self.port}.")
        if self.url is not None:
            self.address()

    def address(self) -> tuple[str, int]:
        """(host, port) of `url`, or a one-line error naming the form Rerun takes."""
        parts = urlsplit(self.url or "")
        valid = parts.scheme in URL_SCHEMES and parts.hostname and parts.path == "/proxy"
        if not valid or _port(parts.netloc) is None:
            raise ValueError(
                f"`viewer_url` must look like rerun+http://HOST:{DEFAULT_PORT}/proxy. "
                f"Got {self.url!r}."
            )
        return str(parts.hostname), int(_port(parts.netloc) or 0)

    def open(self, name: str) -> tuple[Any, str]:
        """The recording stream, and a line saying where to look."""
        if self.save is not None:
            return open_recording(self.save, name), f"live view: writing {self.save}"
        # every check before the stream exists: a refused viewer leaves no stream behind
        if self.url is not None:
            host, port = self.address()
            try:
                socket.create_connection((host, port), timeout=2.0).close()
            except OSError as e:
                raise ConnectionError(
                    f"no Rerun viewer at {self.url} ({e.strerror or e}): start one with `rerun` "
                    "(it listens on 9876), or drop viewer_url to serve the view from here."
                ) from None
            stream = rerun().RecordingStream(APPLICATION_ID, recording_id=name)
            stream.connect_grpc(self.url)
            return stream, f"live view: streaming to the viewer at {self.url}"
        _check_port_free(self.port)
        stream = rerun().RecordingStream(APPLICATION_ID, recording_id=name)
        url = stream.serve_grpc(grpc_port=self.port)
        return stream, f"live view: connect a viewer with `rerun --connect {url}`"


def _port(netloc: str) -> int | None:
    host, _, port = netloc.rpartition(":")
    return int(port) if host and port.isdigit() and 1 <= int(port) <= 65535 else None


def _check_port_free(port: int) -> None:
    """Rerun logs a busy port and serves nothing; say so in one line before the loop starts."""
    from robocompose.ports import port_holder

    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
            holder = port_holder(port)
            raise ValueError(
                f"viewer_port {port} is {f'held by {holder}' if holder else 'in use'}: pick "
                "another with viewer_port=N, or stream to the viewer there with viewer_url="
                f"rerun+http://127.0.0.1:{port}/proxy"
            ) from None


class RerunStepLog:
    """Write `log`'s lines and stream each to the live view `viewer` opens."""

    def __init__(self, log: Any, viewer: LiveViewer, name: str) -> None:
        self.log = log
        self.rr = rerun()
        self.stream, where = viewer.open(name)
        print(where, flush=True)
        self.root = "seed_?"

    def write(self, line: dict[str, Any]) -> None:
        self.log.write(line)
        kind = line.get("kind")
        if kind == "episode_start":
            self.root = f"seed_{line['seed']}"
        elif kind == "step":
            self._step(line)
        elif kind == "episode_end":
            outcome = "success" if line.get("success") else "failure"
            text = f"{outcome}: score {line.get('score', 0.0):.3f}, {line.get('ticks')} ticks"
            self.stream.log(f"{self.root}/outcome", self.rr.TextLog(text))

    def _step(self, line: dict[str, Any]) -> None:
        rr, log, root = self.rr, self.stream.log, self.root
        self.stream.set_time("tick", sequence=int(line["tick"]))
        for key, value in (line.get("obs") or {}).items():
            if isinstance(value, list):
                log(f"{root}/obs/{key}", rr.Scalars(np.asarray(value, dtype=np.float64).ravel()))
        measured = [*line["ee_m"], line["gripper"]]
        log(f"{root}/measured", rr.Scalars(np.asarray(measured, dtype=np.float64)))
        log(f"{root}/space/measured", rr.Points3D([line["ee_m"][:3]]))
        for name in ("proposed", "sent"):
            if line.get(name) is not None:
                log(f"{root}/command/{name}", rr.Scalars(np.asarray(line[name], dtype=np.float64)))
        if line.get("sent") is not None:
            log(f"{root}/space/sent", rr.Points3D([line["sent"][:3]]))
        safety = line.get("safety") or []
        for event in safety:
            log(f"{root}/safety", rr.TextLog(f"{event['kind']}: {event['reason']}", level="WARN"))
        log(f"{root}/clamps", rr.Scalars(float(len(safety))))
        if line.get("period_s") is not None:
            log(f"{root}/period_s", rr.Scalars(float(line["period_s"])))

    def close(self) -> None:
        try:
            self.log.close()
        finally:
            close_recording(self.stream)

"""Loopback stand-ins for the UR controller, shared by the driver tests, the control-process tests
and `benchmarks/real_robot.py`.

`FakeRTDEController` speaks UR's RTDE protocol on a loopback port 30004 (the real
`RTDEReceiveInterface` connects to it); `FakeRTDEControl` and `FakeRTDEIO` stand in for the
binding classes that need ur-rtde's URScript program running on a controller. In a control
process (a spawned child) `ur_on_fake_controller` swaps them in and builds the real driver; the
control recorder then appends every call as a JSON line to the file named by the environment
variable `CALL_LOG_ENV`, so the test reads what the arm was sent.
"""

from __future__ import annotations

import inspect
import json
import multiprocessing
import os
import random
import re
import socket
import struct
import threading
import time
from typing import Any

CALL_LOG_ENV = "ROBOCOMPOSE_FAKE_RTDE_CALLS"


def loopback_host() -> str:
    """A random 127.x.y.z: no clash with other tests using the well-known vendor ports."""
    return "127.{}.{}.{}".format(*(random.randint(1, 254) for _ in range(3)))


def assert_speaks(fake: type, real: type) -> None:
    """Every public method or property of `fake` exists on the binding class `real`, and each
    method takes as many parameters as one of the binding's signatures (pybind's docstring
    lines `name(self: ..., a: ..., ...) -> ...`, one per overload)."""
    for name, member in vars(fake).items():
        if name.startswith("_") or not (callable(member) or isinstance(member, property)):
            continue
        assert hasattr(real, name), f"{real.__name__} has no {name!r}"
        if not callable(member):
            continue
        doc = getattr(real, name).__doc__ or ""
        signatures = re.findall(rf"^(?:\d+\. )?{name}\((self: .*?)\) -> ", doc, re.MULTILINE)
        counts = {len(re.findall(r"(?:^|, )\w+: ", sig)) for sig in signatures}
        n_fake = len(inspect.signature(member).parameters)
        assert n_fake in counts, f"{fake.__name__}.{name}: {n_fake} params, real {counts}"


class CallLog(list):
    """A list of calls that also appends each one as a JSON line to `path` (if given)."""

    def __init__(self, path: str | None) -> None:
        super().__init__()
        self._file = open(path, "a", buffering=1) if path else None  # noqa: SIM115

    def append(self, call: Any) -> None:
        super().append(call)
        if self._file is not None:
            self._file.write(json.dumps([time.monotonic(), *call]) + "\n")


def read_call_log(path: str) -> list[list]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


RTDE = {"V": 86, "v": 118, "U": 85, "O": 79, "I": 73, "S": 83, "P": 80}
RTDE_TYPES = {
    "timestamp": ("DOUBLE", ">d"),
    "actual_TCP_pose": ("VECTOR6D", ">6d"),
    "actual_q": ("VECTOR6D", ">6d"),
    "safety_status_bits": ("UINT32", ">I"),
    "safety_mode": ("INT32", ">i"),
}
PROTECTIVE_STOP_BITS = 0b101  # normal mode + protective stop
UR_POSE = [0.4, -0.1, 0.3, 0.0, 3.1, 0.1]
UR_Q = [0.0, -1.57, 1.57, -1.57, -1.57, 0.0]


class FakeRTDEController:
    """The controller side of UR's RTDE protocol on a loopback port 30004: protocol version,
    controller version, recipe setup, start/pause, then big-endian data packages at ~125 Hz. It
    runs in a forked process: ur-rtde's blocking calls hold the GIL, so a server thread in the
    test process could never answer them. `set(name, value)` changes a streamed value."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("fork")
        self._updates, hosts = context.Queue(), context.Queue()
        self._process = context.Process(target=self._main, args=(hosts,), daemon=True)
        self._process.start()
        self.host = hosts.get(timeout=10)

    def set(self, name: str, value: object) -> None:
        self._updates.put((name, value))

    def close(self) -> None:
        self._process.terminate()
        self._process.join(timeout=5)

    # -- in the forked process -------------------------------------------------------------
    def _main(self, hosts: multiprocessing.Queue) -> None:
        host = loopback_host()
        server = socket.create_server((host, 30004))
        self.values = {
            "timestamp": 0.0,
            "actual_TCP_pose": list(UR_POSE),
            "actual_q": list(UR_Q),
            "safety_status_bits": 1,
            "safety_mode": 1,
        }
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()
        hosts.put(host)
        while True:
            name, value = self._updates.get()
            self.values[name] = value

    def _accept(self, server: socket.socket) -> None:
        while True:
            conn, _ = server.accept()
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _send(conn: socket.socket, kind: str, payload: bytes) -> None:
        conn.sendall(struct.pack(">HB", 3 + len(payload), RTDE[kind]) + payload)

    def _serve(self, conn: socket.socket) -> None:
        streaming, outputs = threading.Event(), []
        reader = conn.makefile("rb")
        while header := reader.read(3):
            size, kind = struct.unpack(">HB", header)
            payload = reader.read(size - 3)
            if kind == RTDE["V"]:
                self._send(conn, "V", b"\x01")
            elif kind == RTDE["v"]:
                self._send(conn, "v", struct.pack(">IIII", 5, 11, 0, 0))
            elif kind in (RTDE["O"], RTDE["I"]):
                is_output = kind == RTDE["O"]
                names = [n for n in (payload[8:] if is_output else payload).decode().split(",")]
                names = [n for n in names if n]
                types = ",".join(RTDE_TYPES.get(n, ("NOT_FOUND",))[0] for n in names)
                self._send(conn, "O" if is_output else "I", b"\x01" + types.encode())
                outputs = names if is_output else outputs
            elif kind == RTDE["S"]:
                self._send(conn, "S", b"\x01")
                streaming.set()
                threading.Thread(target=self._stream, args=(conn, outputs, streaming)).start()
            elif kind == RTDE["P"]:
                streaming.clear()
                self._send(conn, "P", b"\x01")

    def _stream(self, conn: socket.socket, names: list[str], streaming: threading.Event) -> None:
        start = time.monotonic()
        while streaming.is_set():
            self.values["timestamp"] = time.monotonic() - start
            data = b"\x01"
            for name in names:
                value, fmt = self.values[name], RTDE_TYPES[name][1]
                data += (
                    struct.pack(fmt, *value) if isinstance(value, list) else struct.pack(fmt, value)
                )
            try:
                self._send(conn, "U", data)
            except OSError:
                return
            time.sleep(0.008)


class FakeRTDEControl:
    """Stands in for `RTDEControlInterface`, whose constructor uploads a URScript program to
    the controller and talks to it through registers: nothing on this machine can run it."""

    def __init__(self, hostname: str) -> None:
        self.calls: list[tuple] = CallLog(os.environ.get(CALL_LOG_ENV))
        self.accept = True
        RECORDERS["control"] = self

    def servoL(self, pose, speed, acceleration, time, lookahead_time, gain) -> bool:  # noqa: N802
        self.calls.append(("servoL", list(pose), time, lookahead_time, gain))
        return self.accept

    def servoJ(self, q, speed, acceleration, time, lookahead_time, gain) -> bool:  # noqa: N802
        self.calls.append(("servoJ", list(q), time, lookahead_time, gain))
        return self.accept

    def servoStop(self, a) -> bool:  # noqa: N802
        self.calls.append(("servoStop", a))
        return True

    def stopScript(self) -> None:  # noqa: N802
        self.calls.append(("stopScript",))

    def reuploadScript(self) -> bool:  # noqa: N802
        self.calls.append(("reuploadScript",))
        return True

    def setWatchdog(self, min_frequency) -> bool:  # noqa: N802
        self.calls.append(("setWatchdog", min_frequency))
        return True

    def kickWatchdog(self) -> bool:  # noqa: N802
        self.calls.append(("kickWatchdog",))
        return True

    def disconnect(self) -> None:
        self.calls.append(("disconnect",))


class FakeRTDEIO:
    """Stands in for `RTDEIOInterface` (it also needs the URScript program running)."""

    def __init__(self, hostname: str) -> None:
        self.outputs: list[tuple[int, bool]] = []
        RECORDERS["io"] = self

    def setToolDigitalOut(self, output_id, signal_level) -> bool:  # noqa: N802
        self.outputs.append((output_id, signal_level))
        return True

    def disconnect(self) -> None:
        pass


RECORDERS: dict[str, object] = {}


def ur_on_fake_controller(host: str, rate_hz: float, options: dict[str, Any]) -> Any:
    """In a control process: swap in the control and IO stand-ins, then build the real UR
    driver (the real RTDEReceiveInterface talks to the fake controller at `host`)."""
    import rtde_control
    import rtde_io

    from robocompose.real_robot.process_loop import build_driver

    rtde_control.RTDEControlInterface = FakeRTDEControl
    rtde_io.RTDEIOInterface = FakeRTDEIO
    return build_driver("ur5e", host, options, rate_hz)

"""The parent's half of the sandbox: check, start the child, serve its calls, enforce the clock.

The parent trusts nothing the child sends: every message is size-bounded JSON, every API call is
validated against the API before it runs, a child that floods, babbles or dies is killed with its
whole process group, and the wall clock (minus the time the parent itself spends running skills)
is enforced here, with the CPU rlimit in the child as the backstop for busy loops in C.
"""

from __future__ import annotations

import ast
import contextlib
import json
import marshal
import math
import os
import select
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from types import CodeType
from typing import Any

from robocompose.hierarchical.sandbox.api import SandboxAPI, to_plain
from robocompose.hierarchical.sandbox.ast_check import FILENAME, SandboxRefusal, check_program
from robocompose.hierarchical.sandbox.limits import (
    LIMITS,
    CallRecord,
    ProgramResult,
    SandboxLimits,
)
from robocompose.hierarchical.sandbox.protocol import (
    FrameReader,
    ProtocolError,
    frame_bytes,
    send_frame,
)

_ROOT = str(Path(__file__).resolve().parents[3])  # the directory holding `robocompose`
_BOOT = (
    "import sys; sys.path.insert(0, {root!r}); "
    "from robocompose.hierarchical.sandbox.child import main; main({read_fd}, {write_fd})"
)
_ENV = {
    "PATH": os.defpath,
    "LANG": "C.UTF-8",
    "OPENBLAS_NUM_THREADS": "1",  # one thread: no arenas per core eating the address space
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
STDERR_TAIL = 4000  # characters of the child's stderr kept to explain a crash


def run_program(code: str, api: SandboxAPI, limits: SandboxLimits | None = None) -> ProgramResult:
    """Check `code` statically, then run it in a fresh isolated child process; see the package
    docstring. Never raises for anything the program does: the result says what happened."""
    limits = SandboxLimits() if limits is None else limits
    if not isinstance(api, SandboxAPI):
        raise TypeError(f"`api` must be a SandboxAPI. Got {type(api).__name__}.")
    if not isinstance(limits, SandboxLimits):
        raise TypeError(f"`limits` must be a SandboxLimits. Got {type(limits).__name__}.")
    start = time.perf_counter()
    try:
        tree = check_program(code, api.functions, limits.max_code_chars)
        compiled = compile(tree, FILENAME, "exec")
    except SandboxRefusal as e:
        message = "refused by the sandbox's static check:\n" + str(e)
        return ProgramResult(ok=False, error=message, refused=True, wall_s=_since(start))
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        message = f"refused: the program does not compile: {type(e).__name__}: {e}"
        return ProgramResult(ok=False, error=message, refused=True, wall_s=_since(start))
    names_numpy = any(isinstance(n, ast.Name) and n.id in ("np", "numpy") for n in ast.walk(tree))
    result = _Session(api, limits).run(compiled, with_numpy=names_numpy)
    result.wall_s = _since(start)
    return result


def _since(start: float) -> float:
    return time.perf_counter() - start


class _Session:
    """One child process from start to reaping."""

    def __init__(self, api: SandboxAPI, limits: SandboxLimits) -> None:
        self.api, self.limits = api, limits
        self.calls: list[CallRecord] = []
        self.stdout: list[str] = []
        self.stdout_chars = 0
        self.stderr = b""
        self.report: dict[str, Any] | None = None
        self.isolation: tuple[str, ...] = ()
        self.kill_reason: tuple[str, str] | None = None  # (limit, message) when the parent kills
        self.calls_exceeded = False
        self.deadline = math.inf  # the wall clock's end, pushed back by time spent in API calls

    def run(self, compiled: CodeType, with_numpy: bool = True) -> ProgramResult:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        boot = _BOOT.format(root=_ROOT, read_fd=to_child_r, write_fd=from_child_w)
        proc = subprocess.Popen(
            [sys.executable, "-I", "-c", boot],
            pass_fds=(to_child_r, from_child_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: one kill takes everything it made
            cwd="/",
            env=_ENV,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self.to_child = to_child_w
        try:
            setup = {
                "limits": asdict(self.limits),
                "api": list(self.api.functions),
                "numpy": with_numpy,
            }
            send_frame(to_child_w, json.dumps(setup).encode())
            send_frame(to_child_w, marshal.dumps(compiled))
            os.set_blocking(to_child_w, False)  # replies: see _reply
            self._serve(proc, from_child_r)
        except BrokenPipeError:
            pass  # the child died early; its exit status and stderr explain it below
        finally:
            _kill_group(proc.pid)
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            self._drain_stderr(proc)
            os.close(to_child_w)
            os.close(from_child_r)
        return self._result(proc.returncode, usage.ru_utime + usage.ru_stime)

    def _serve(self, proc: subprocess.Popen, channel_fd: int) -> None:
        reader = FrameReader(self.limits.max_message_bytes)
        os.set_blocking(channel_fd, False)
        os.set_blocking(proc.stderr.fileno(), False)
        self.deadline = time.monotonic() + self.limits.wall_s
        with selectors.DefaultSelector() as selector:
            selector.register(channel_fd, selectors.EVENT_READ, "channel")
            selector.register(proc.stderr.fileno(), selectors.EVENT_READ, "stderr")
            while self.report is None:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    self.kill_reason = (
                        "wall",
                        f"the program ran longer than {self.limits.wall_s} s and was stopped",
                    )
                    return
                for key, _ in selector.select(left):
                    data = os.read(key.fd, 65_536)
                    if key.data == "stderr":
                        self.stderr = (self.stderr + data)[-STDERR_TAIL:]
                        if not data:
                            selector.unregister(key.fd)
                        continue
                    if not data:
                        return  # the child exited or died without a report
                    try:
                        for frame in reader.feed(data):
                            self._handle(frame)
                    except ProtocolError as e:
                        self.kill_reason = ("protocol", f"the sandbox child misbehaved: {e}")
                        return

    def _handle(self, frame: bytes) -> None:
        """Act on one message; anything but the four kinds the child sends is a violation."""
        try:
            message = json.loads(frame)
        except (ValueError, RecursionError) as e:
            raise ProtocolError(f"a message is not JSON ({e})") from None
        op = message.get("op") if isinstance(message, dict) else None
        if op == "call":
            self._call(message)
        elif op == "print" and isinstance(message.get("text"), str):
            self._print(_text(message["text"], limit=None))
        elif op == "ready" and isinstance(message.get("isolation"), list) and not self.isolation:
            self.isolation = tuple(str(layer) for layer in message["isolation"])
        elif op == "done" and isinstance(message.get("ok"), bool):
            self.report = message
        else:
            raise ProtocolError(f"unexpected message {str(message)[:200]}")

    def _print(self, text: str) -> None:
        self.stdout_chars += len(text)
        if self.stdout_chars > self.limits.max_stdout_chars:
            raise ProtocolError("the child sent more output than `max_stdout_chars`")
        self.stdout.append(text)

    def _call(self, message: dict[str, Any]) -> None:
        name, args, kwargs = message.get("name"), message.get("args"), message.get("kwargs")
        if not (isinstance(name, str) and isinstance(args, list) and isinstance(kwargs, dict)):
            raise ProtocolError("a call message lacks a str name, a list args or a dict kwargs")
        raw = {"args": args, "kwargs": kwargs}
        if self.calls_exceeded:
            raise ProtocolError("the child kept calling after its call budget ran out")
        if len(self.calls) >= self.limits.max_calls:
            self.calls_exceeded = True
            error = f"the program made more than {self.limits.max_calls} API calls"
            self._refuse(name, raw, error)
            return
        try:
            checked = self.api.validate(name, args, kwargs)
        except ValueError as e:
            self._refuse(name, raw, str(e))
            return
        record = CallRecord(name, checked, executed=True)
        self.calls.append(record)
        start = time.monotonic()
        try:
            record.value = to_plain(self.api.functions[name].run(dict(checked)))
            reply = {"ok": True, "value": record.value}
        except Exception as e:  # the skill's failure goes back to the program as its error
            record.error = f"{name}() failed: {type(e).__name__}: {e}"
            reply = {"ok": False, "error": record.error}
        self.deadline += time.monotonic() - start  # the robot's time is not the program's
        self._reply(reply)

    def _refuse(self, name: str, raw: dict[str, Any], error: str) -> None:
        self.calls.append(CallRecord(name, raw, executed=False, error=error))
        self._reply({"ok": False, "error": error})

    def _reply(self, reply: dict[str, Any]) -> None:
        """Write without ever blocking past the deadline: a child that stops reading its replies
        must not hang the parent."""
        data = memoryview(frame_bytes(json.dumps(reply).encode()))
        while data:
            try:
                data = data[os.write(self.to_child, data) :]
            except BlockingIOError:
                left = self.deadline - time.monotonic()
                if left <= 0 or not select.select([], [self.to_child], [], left)[1]:
                    raise ProtocolError("the child stopped reading its replies") from None
            except BrokenPipeError:
                return  # the child is gone; the end of its pipe shows next

    def _drain_stderr(self, proc: subprocess.Popen) -> None:
        try:
            rest = proc.stderr.read(65_536) or b""
        except (BlockingIOError, ValueError):
            rest = b""
        self.stderr = (self.stderr + rest)[-STDERR_TAIL:]
        proc.stderr.close()

    def _result(self, returncode: int, cpu_s: float) -> ProgramResult:
        result = ProgramResult(
            ok=False,
            calls=self.calls,
            stdout="".join(self.stdout),
            cpu_s=cpu_s,
            isolation=self.isolation,
        )
        if self.kill_reason is not None:
            result.limit, result.error = self.kill_reason
            result.killed = True
        elif self.report is not None:
            result.ok = self.report["ok"]
            result.error = _text(self.report.get("error"))
            result.limit = _known_limit(self.report.get("limit"))
        elif returncode in (-signal.SIGXCPU, -signal.SIGKILL) and cpu_s >= self.limits.cpu_s - 0.5:
            result.limit, result.killed = "cpu", True
            result.error = f"the program used more than {self.limits.cpu_s} s of CPU and was killed"
        else:
            tail = self.stderr.decode(errors="replace").strip()
            result.error = f"the sandbox process ended without a result (exit {returncode})" + (
                f": {tail[-1000:]}" if tail else ""
            )
            result.killed = returncode < 0
        if self.calls_exceeded:
            result.ok, result.limit = False, "calls"
        return result


def _text(value: Any, limit: int | None = 4000) -> str | None:
    """The child's text, bounded and with lone surrogates replaced, safe to print or log."""
    if value is None:
        return None
    return str(value)[:limit].encode("utf-8", "replace").decode("utf-8")


def _known_limit(value: Any) -> str | None:
    return value if value in LIMITS else None


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
        os.killpg(pgid, signal.SIGKILL)  # not reaped yet, so the id cannot have been reused

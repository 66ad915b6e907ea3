"""The sandbox's child process: isolate itself, then run one checked program.

Started by runner.py as `python -I -c ...` with two pipe descriptors. It reads the setup (limits,
API names) and the compiled program, builds the only namespace the program sees (safe builtins,
read-only `math` and `np` views, one stub per API function), then, before running anything,
closes its own doors: a private network namespace when the kernel allows it, the `nobody` user
when started as root, and rlimits (CPU seconds, address space, no new processes, no new files or
sockets, no file writes). Every API call is a message to the parent and a blocking wait for its
answer; the program's `print` is sent the same way.
"""

from __future__ import annotations

import builtins
import ctypes
import fcntl
import json
import marshal
import math
import os
import resource
import sys
from collections.abc import Callable, Iterable, Iterator
from types import CodeType
from typing import Any

from robocompose.hierarchical.sandbox.ast_check import FILENAME, ITER, TICK
from robocompose.hierarchical.sandbox.names import MODULES, SAFE_BUILTINS
from robocompose.hierarchical.sandbox.protocol import read_frame, send_frame, send_json

CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
NOBODY = 65534
MAX_ERROR_CHARS = 2000
RECURSION_MARGIN = 40  # frames the stubs and the runner itself need above the program's own


class ApiError(Exception):
    """The parent refused or failed an API call; the message says why."""


class LimitReached(BaseException):
    """A budget of the sandbox ran out (`limit` is one of limits.LIMITS)."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit


class Namespace:
    """A read-only view of a module: only the listed members exist."""

    __slots__ = ("_label", "_members")

    def __init__(self, label: str, members: dict[str, Any]) -> None:
        object.__setattr__(self, "_label", label)
        object.__setattr__(self, "_members", members)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._members[name]
        except KeyError:
            raise AttributeError(f"`{self._label}.{name}` is not available") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"`{self._label}` is read-only")

    def __repr__(self) -> str:
        return f"<sandbox view of {self._label}>"


class Channel:
    """The child's end of the pipe: API calls, prints, and the final report."""

    def __init__(self, read_fd: int, write_fd: int, limits: dict[str, Any]) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd
        self.max_message_bytes = limits["max_message_bytes"]
        self.stdout_left = limits["max_stdout_chars"]
        self.max_stdout = limits["max_stdout_chars"]

    def send(self, message: dict[str, Any]) -> None:
        send_json(self.write_fd, message)

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        message = {"op": "call", "name": name, "args": _plain(args), "kwargs": _plain(kwargs)}
        data = json.dumps(message).encode()  # ASCII: json escapes everything else
        if len(data) > self.max_message_bytes:
            raise ApiError(f"the arguments of {name}() are too large ({len(data)} bytes)")
        send_frame(self.write_fd, data)
        reply = json.loads(read_frame(self.read_fd, 2**31))
        if not reply["ok"]:
            raise ApiError(reply["error"])
        return reply["value"]

    def write(self, text: str) -> None:
        kept = text[: max(self.stdout_left, 0)]
        chunk = self.max_message_bytes // 8  # JSON escapes a character into at most 6 bytes
        for start in range(0, len(kept), chunk):
            self.send({"op": "print", "text": kept[start : start + chunk]})
        self.stdout_left -= len(text)
        if self.stdout_left < 0:
            raise LimitReached("stdout", f"the program printed more than {self.max_stdout} chars")


def _plain(value: Any, depth: int = 0) -> Any:
    """Arguments as JSON data; anything else is refused here, before it reaches the pipe."""
    if depth > 20:
        raise ApiError("an argument is nested more than 20 levels deep")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    numpy = sys.modules.get("numpy")  # imported only for programs that name it
    if numpy is not None and isinstance(value, numpy.ndarray | numpy.generic):
        return _plain(value.tolist(), depth + 1)
    if isinstance(value, list | tuple):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    raise ApiError(f"a {type(value).__name__} cannot be passed to the API")


class Steps:
    """The step budget the instrumented program ticks."""

    def __init__(self, max_steps: int) -> None:
        self.max_steps = max_steps
        self.left = max_steps

    def tick(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise LimitReached(
                "steps",
                f"the program ran more than {self.max_steps} steps (loop iterations and function "
                "calls); is a loop endless?",
            )

    def counted(self, iterable: Iterable[Any]) -> Iterator[Any]:
        for item in iterable:
            self.tick()
            yield item


def build_namespace(
    api_names: list[str], channel: Channel, steps: Steps, with_numpy: bool
) -> dict[str, Any]:
    """Globals of the program: nothing but the allow-listed names. numpy takes most of the
    child's start-up, so it is imported only when the program names it."""
    safe = {name: getattr(builtins, name) for name in SAFE_BUILTINS}
    safe["print"] = _print(channel)
    safe["__import__"] = _import_loaded  # for numpy's C code; programs cannot name it
    sources = {"math": math}
    if with_numpy:
        import numpy
        import numpy.ma  # np.median imports it on first use, when no file can be opened any more

        sources["np"] = sources["numpy"] = numpy
    namespace: dict[str, Any] = {"__builtins__": safe, TICK: steps.tick, ITER: steps.counted}
    for label, (members, nested) in MODULES.items():
        if label not in sources:
            continue
        module = sources[label]
        view = {m: getattr(module, m) for m in members}
        for sub, sub_members in nested.items():
            inner = getattr(module, sub)
            view[sub] = Namespace(f"{label}.{sub}", {m: getattr(inner, m) for m in sub_members})
        namespace[label] = Namespace(label, view)
    for name in api_names:
        namespace[name] = _stub(channel, name)
    return namespace


def _import_loaded(
    name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
) -> Any:
    """numpy's array methods (a.sum(), a.max(), ...) import their helpers from C through the
    caller's builtins (PyImport_Import); only numpy modules already loaded are handed out,
    nothing is ever loaded. Programs cannot reach this: the check refuses `import` and `_`."""
    if level == 0 and name.split(".")[0] == "numpy" and name in sys.modules:
        return sys.modules[name] if fromlist else sys.modules["numpy"]
    raise ImportError(f"import of {name!r} is not allowed in the sandbox")


def _print(channel: Channel) -> Callable[..., None]:
    """The program's print: captured, bounded; `file` is refused since there are no files."""

    def print(*args: Any, sep: str | None = " ", end: str | None = "\n", flush: bool = False):
        sep = " " if sep is None else sep
        end = "\n" if end is None else end
        if not isinstance(sep, str) or not isinstance(end, str):
            raise TypeError("print(): `sep` and `end` must be str")
        channel.write(sep.join(str(a) for a in args) + end)

    print.__qualname__ = "print"
    return print


def _stub(channel: Channel, name: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return channel.call(name, args, kwargs)

    call.__name__ = call.__qualname__ = name
    return call


def isolate(limits: dict[str, Any], keep_fds: tuple[int, ...]) -> list[str]:
    """Apply every OS layer available; the names of those applied go back in the result."""
    layers = []
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) == 0 or libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0:
        layers.append("no-network")
    edges = [2, *sorted(keep_fds), resource.getrlimit(resource.RLIMIT_NOFILE)[0]]
    for low, high in zip(edges, edges[1:], strict=False):
        os.closerange(low + 1, high)  # every descriptor but stdio and the two pipe ends
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        layers.append("user-nobody")
    memory = limits["memory_mb"] * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_s"], limits["cpu_s"] + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    top = max(max(keep_fds), 2) + 1
    resource.setrlimit(resource.RLIMIT_NOFILE, (top, top))
    layers += ["rlimits", "no-fork", "no-new-files"]
    return layers


def run(code: CodeType, namespace: dict[str, Any], limits: dict[str, Any]) -> dict[str, Any]:
    """Execute the program; the report says how it ended."""
    sys.setrecursionlimit(_depth() + limits["max_recursion"] + RECURSION_MARGIN)
    try:
        exec(code, namespace)
    except LimitReached as e:
        return _failed(e, e.limit, str(e))
    except RecursionError as e:
        message = f"the program nested calls more than {limits['max_recursion']} deep"
        return _failed(e, "recursion", message)
    except MemoryError as e:
        return _failed(e, "memory", f"the program needed more than {limits['memory_mb']} MB")
    except Exception as e:
        return _failed(e, None, f"{type(e).__name__}: {e}")
    return {"op": "done", "ok": True, "error": None, "limit": None}


def _failed(error: BaseException, limit: str | None, message: str) -> dict[str, Any]:
    line = None
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    where = f"line {line}: " if line is not None else ""
    text = where + message
    if len(text) > MAX_ERROR_CHARS:
        text = text[:MAX_ERROR_CHARS] + "... (cut)"
    return {"op": "done", "ok": False, "error": text, "limit": limit}


def _depth() -> int:
    frame, depth = sys._getframe(), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


def pin_fds(read_fd: int, write_fd: int) -> tuple[int, int]:
    """Move the pipe ends to descriptors 3 and 4, so with RLIMIT_NOFILE = 5 and everything above
    closed there is no free descriptor left for a file or socket."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100) for fd in (read_fd, write_fd)]
    for target, fd in zip((3, 4), high, strict=True):
        os.dup2(fd, target, inheritable=False)
        os.close(fd)
    return 3, 4


def main(read_fd: int, write_fd: int) -> None:
    read_fd, write_fd = pin_fds(read_fd, write_fd)
    setup = json.loads(read_frame(read_fd, 2**20))
    code = marshal.loads(read_frame(read_fd, 2**26))
    limits = setup["limits"]
    channel = Channel(read_fd, write_fd, limits)
    steps = Steps(limits["max_steps"])
    namespace = build_namespace(setup["api"], channel, steps, setup["numpy"])
    layers = isolate(limits, (read_fd, write_fd))
    channel.send({"op": "ready", "isolation": layers})
    report = run(code, namespace, limits)
    namespace.clear()  # frees what the program allocated, so a report after MemoryError fits
    channel.send(report)

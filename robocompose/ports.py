"""A busy TCP port, said in one line: `PortInUse` names the port, the process holding it when
that can be read (`port_holder`, from /proc) and how to pick another.

    raise PortInUse("127.0.0.1", 8000)
    # port 8000 on 127.0.0.1 is held by pid 4242 (python -m robocompose serve ...); pick another ...
"""

from __future__ import annotations

import errno
import os
from pathlib import Path


class PortInUse(OSError):
    """The server's port is taken: which port, what holds it when that can be read, and how to
    pick another."""

    def __init__(self, host: str, port: int) -> None:
        holder = port_holder(port)
        held = f"held by {holder}" if holder else "in use"
        super().__init__(
            errno.EADDRINUSE,
            f"port {port} on {host} is {held}; pick another with --port N (or --port 0 for "
            "any free port, printed when it listens).",
        )

    def __str__(self) -> str:
        return str(self.strerror)


def port_holder(port: int) -> str | None:
    """The process listening on TCP `port` as "pid N (command)", read from /proc (Linux; only
    processes this user may inspect); None when it cannot be told."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    for fd_dir in Path("/proc").glob("[0-9]*/fd") if inodes else ():
        try:
            if any(os.readlink(fd) in inodes for fd in fd_dir.iterdir()):
                raw = (fd_dir.parent / "cmdline").read_bytes().replace(b"\0", b" ")
                command = " ".join(raw.decode(errors="replace").split())
                return f"pid {fd_dir.parent.name} ({command[:80]})"
        except OSError:  # gone, or another user's
            continue
    return None

"""The policy server's audit trail: one JSON line per connection, auth result, refusal and error,
so that who connected, who was turned away and why can be read after the fact.

    {"time": "2026-11-28T17:40:02.113Z", "event": "auth", "peer": "10.0.0.7:51234",
     "result": "refused", "reason": "wrong key"}

Events: listening, stopped, auth (when the server has a key), connected, closed (with the close
code), refused (a limit: `reason` names it), error (`kind` says which: malformed observation,
input out of range, inference not answered, unsafe actions, inference failed), clipped.
Never a key nor an observation's contents: only addresses, outcomes and the names of settings.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO


def peer_name(address: Any) -> str:
    """ "host:port" of a socket address tuple; "?" when the peer is unknown."""
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return "?"


class AuditLog:
    """Appends events to `path` (its folder made, the file opened at the first event and again
    after `close()`); with `path` None it keeps nothing."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = None if path is None else Path(path).resolve()
        self._lock = threading.Lock()
        self._file: TextIO | None = None

    def write(self, event: str, **fields: Any) -> None:
        """One line: the time (UTC), `event`, then `fields` (JSON-able values only)."""
        if self.path is None:
            return
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        line = json.dumps({"time": stamp, "event": event, **fields})
        with self._lock:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("a", encoding="utf-8")
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

"""Ctrl-C during a long run that saves as it goes: say what is saved where, not a traceback."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ResumableInterrupt(KeyboardInterrupt):
    """A KeyboardInterrupt that knows how much of the run is safe on disk (and so resumes)."""

    def __init__(self, saved: int, path: str | os.PathLike[str], unit: str = "episodes") -> None:
        super().__init__(saved, str(path), unit)
        self.saved, self.path, self.unit = saved, str(path), unit

    def __str__(self) -> str:
        return f"interrupted: {self.saved} {self.unit} saved to {self.path}, rerun to resume"


@contextmanager
def interrupt_deferred() -> Iterator[None]:
    """Ctrl-C inside the block takes effect when it ends, so a write it guards lands whole
    (a KeyboardInterrupt inside h5py can leave a half-counted demo or a held file lock). Only
    the main thread receives signals; elsewhere, and where SIGINT is ignored, it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous in (signal.SIG_IGN, None):
        yield
        return
    received: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received and callable(previous):
        previous(signal.SIGINT, None)
    elif received:  # SIG_DFL: what the default would have done
        signal.raise_signal(signal.SIGINT)

"""A real served policy held at a gate, so a test can see what the server does while an
inference runs (or never returns)."""

from __future__ import annotations

import threading


class GatedPolicy:
    """The real policy, held at a gate until the test opens `release`."""

    def __init__(self, inner) -> None:
        self.inner, self.spec = inner, inner.spec
        self.entered, self.release = threading.Event(), threading.Event()

    def infer(self, obs):
        self.entered.set()
        assert self.release.wait(30), "the test never opened the gate"
        return self.inner.infer(obs)

    def reset(self) -> None:
        self.inner.reset()

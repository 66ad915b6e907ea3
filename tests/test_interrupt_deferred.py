"""`interrupt_deferred`: a real SIGINT inside the block lands when the block ends."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from robocompose.interrupt import interrupt_deferred


@pytest.fixture
def sigint_handler() -> Iterator[None]:
    """Python's own Ctrl-C handler, as a terminal user has it (a job started in the
    background of a non-interactive shell, as CI may run us, inherits SIGINT ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_inside_waits_until_the_block_is_done(sigint_handler: None) -> None:
    steps = []
    with pytest.raises(KeyboardInterrupt), interrupt_deferred():
        os.kill(os.getpid(), signal.SIGINT)
        steps.append("after the signal")  # still runs: the write finishes
    assert steps == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_no_signal_no_interrupt_and_the_handler_is_restored(sigint_handler: None) -> None:
    with interrupt_deferred():
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_ignored_sigint_stays_ignored() -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupt_deferred():
            os.kill(os.getpid(), signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)

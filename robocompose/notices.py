"""Other packages' noise, kept out of a verb's output unless `--verbose` asks for it.

Two kinds: warnings addressed to a package's developers (deprecations, future changes), and
notices a package prints to stderr when imported or set up (gymnasium-robotics prints one about
AdroitHand on every import, robosuite its macros and controller files). `printed_as_warning`
turns the second kind into an `ImportNotice` warning, so `hide_developer_warnings` (which the
command line installs) drops both in one place.
"""

from __future__ import annotations

import contextlib
import io
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class ImportNotice(UserWarning):
    """What a third-party package printed to stderr while it was imported or set up."""


# warnings about other code than the user's run; shown by `--verbose`
HIDDEN = (DeprecationWarning, PendingDeprecationWarning, FutureWarning, ImportNotice)
PACKAGE_DIR = str(Path(__file__).resolve().parent)


class _Held(io.TextIOBase):
    """stderr held while `holding`, then passed on to whatever `sys.stderr` is: a logging
    handler a package made during the block (robosuite's) writes where stderr goes later."""

    def __init__(self) -> None:
        self.held, self.holding = io.StringIO(), True

    def write(self, text: str) -> int:
        return (self.held if self.holding else sys.stderr).write(text)

    def flush(self) -> None:
        if not self.holding:
            sys.stderr.flush()


@contextlib.contextmanager
def printed_as_warning(source: str) -> Iterator[None]:
    """Whatever the block prints to stderr (a package's import or setup) comes out as an
    ImportNotice naming `source`, after the block."""
    held = _Held()
    try:
        with contextlib.redirect_stderr(held):
            yield
    finally:
        held.holding = False
        if held.held.getvalue().strip():
            warnings.warn(f"{source}: {held.held.getvalue().strip()}", ImportNotice, stacklevel=3)


def hide_developer_warnings() -> None:
    """Drop the HIDDEN warnings of other packages (robocompose's own deprecations still show;
    an ImportNotice always goes). Done at `showwarning`, not with a filter: gymnasium puts its
    own filter for its deprecations in front of every other when it is imported."""
    show = warnings.showwarning
    if getattr(show, "hides_developer_warnings", False):
        return

    def shown(message: Any, category: type[Warning], filename: str, *rest: Any) -> None:
        ours = filename.startswith(PACKAGE_DIR) and category is not ImportNotice
        if not issubclass(category, HIDDEN) or ours:
            show(message, category, filename, *rest)

    shown.hides_developer_warnings = True  # type: ignore[attr-defined]
    warnings.showwarning = shown

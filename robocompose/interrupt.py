"""Ctrl-C during a long run that saves as it goes: say what is saved where, not a traceback."""

from __future__ import annotations

import os


class Interrupted(KeyboardInterrupt):
    """A KeyboardInterrupt that knows how much of the run is safe on disk (and so resumes)."""

    def __init__(self, saved: int, path: str | os.PathLike[str], unit: str = "episodes") -> None:
        super().__init__(saved, str(path), unit)
        self.saved, self.path, self.unit = saved, str(path), unit

    def __str__(self) -> str:
        return f"interrupted: {self.saved} {self.unit} saved to {self.path}, rerun to resume"

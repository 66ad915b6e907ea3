"""`python -m robocompose` is the `robocompose` script, and `--version` names the installed one."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).parent / "robocompose"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def test_version_via_python_m() -> None:
    done = _run(sys.executable, "-m", "robocompose", "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"robocompose {metadata.version('robocompose')}"


@pytest.mark.skipif(not SCRIPT.is_file(), reason="no console script installed beside python")
def test_python_m_matches_the_console_script() -> None:
    for args in (["--version"], ["collect", "--help"], ["no-such-verb"]):
        script = _run(str(SCRIPT), *args)
        module = _run(sys.executable, "-m", "robocompose", *args)
        assert (module.returncode, module.stdout) == (script.returncode, script.stdout), args
        assert module.stderr == script.stderr, args

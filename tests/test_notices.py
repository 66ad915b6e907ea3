"""Other packages' noise stays out of a verb's output (its progress bars included) unless
`--verbose` asks for it: gymnasium-robotics prints its AdroitHand notice on every import."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from robocompose.notices import PACKAGE_DIR, hide_developer_warnings

NOTICE = "AdroitHand"


def collect_stderr(tmp_path: Path, *flags: str) -> str:
    out = tmp_path / f"reach{len(flags)}.hdf5"
    args = ["collect", "FetchReach", "--episodes", "1", "--out", str(out), *flags]
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "robocompose", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "FetchReach: wrote" in done.stdout
    return done.stderr


def test_a_third_party_import_notice_shows_only_with_verbose(tmp_path: Path) -> None:
    pytest.importorskip("gymnasium_robotics", reason="the `external` extra is not installed")
    quiet = collect_stderr(tmp_path)
    assert NOTICE not in quiet and "Warning" not in quiet
    assert "collect FetchReach" in quiet  # the progress bar is all there is
    assert NOTICE in collect_stderr(tmp_path, "--verbose")


def test_only_other_packages_deprecations_are_hidden() -> None:
    elsewhere = "/site-packages/other/module.py"
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        hide_developer_warnings()
        warnings.warn_explicit("old api", DeprecationWarning, elsewhere, 1)
        warnings.warn_explicit("renamed key", DeprecationWarning, f"{PACKAGE_DIR}/config.py", 1)
        warnings.warn_explicit("about this run", UserWarning, elsewhere, 1)
    assert [str(w.message) for w in shown] == ["renamed key", "about this run"]

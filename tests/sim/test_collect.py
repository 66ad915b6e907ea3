"""`robocompose collect` as a new user first runs it: a fresh folder, a file not ours."""

from __future__ import annotations

from pathlib import Path

import h5py
import pytest

from robocompose.cli import main
from robocompose.sim.dataset import load_demos


def test_collect_makes_the_missing_parent_folders(tmp_path: Path) -> None:
    out = tmp_path / "fresh" / "data" / "PushT.hdf5"
    main(["collect", "PushT", "--episodes", "1", "--out", str(out)])
    assert len(load_demos(out)) == 1


def test_collect_into_a_file_that_is_not_ours_names_it(tmp_path: Path) -> None:
    out = tmp_path / "PushT.hdf5"
    main(["collect", "PushT", "--episodes", "1", "--out", str(out)])
    with h5py.File(out, "a") as f:  # the same env, but a demo without actions
        del f["data/demo_0/actions"]
    with pytest.raises(SystemExit) as info:
        main(["collect", "PushT", "--episodes", "2", "--out", str(out)])
    message = str(info.value)
    assert message.startswith("robocompose collect: error: ")
    assert str(out) in message
    assert "`data/demo_0` has no `actions`" in message

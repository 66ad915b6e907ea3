"""The sweep plan without axes: `--cfg` shows the base config, running refuses."""

from __future__ import annotations

import pytest

from robocompose.cli import main


def test_cfg_without_axes_prints_the_base_config(capsys) -> None:
    main(["sweep", "--cfg", "episodes=3"])
    out = capsys.readouterr().out
    assert out.startswith("# no axes yet: add one to run")
    assert "episodes: 3" in out and "composition:" in out


def test_run_without_axes_names_what_is_missing(tmp_path) -> None:
    with pytest.raises(SystemExit, match="a sweep needs at least one axis"):
        main(["sweep", f"sweep.dir={tmp_path}"])

"""A sweep folder's manifest: a rerun must match its axes and fixed config, except composition
fields added since it was written, which held their default there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robocompose.config import ConfigError
from robocompose.sweep.config import plan
from robocompose.sweep.run import _check_manifest

OVERRIDES = ["composition.operator=convex,weighted_sum", "composition.steps=4"]


def test_a_folder_written_before_a_composition_field_existed_still_resumes(tmp_path: Path):
    manifest = tmp_path / "sweep.json"
    _check_manifest(manifest, plan(OVERRIDES))
    written = json.loads(manifest.read_text())
    del written["config"]["composition"]["selector_composition"]  # as an older version wrote it
    manifest.write_text(json.dumps(written))
    _check_manifest(manifest, plan(OVERRIDES))
    with pytest.raises(ConfigError, match=r"differs in config\.composition\.selector_composition"):
        _check_manifest(
            manifest, plan([*OVERRIDES, "composition.selector_composition=weighted_sum"])
        )
    with pytest.raises(ConfigError, match=r"differs in config\.composition\.steps"):
        _check_manifest(manifest, plan([*OVERRIDES[:1], "composition.steps=8"]))

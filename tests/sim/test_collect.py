"""`robocompose collect` as a new user first runs it: a fresh folder, a file not ours."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from robocompose.cli import main
from robocompose.sim.hdf5_dataset import load_demos, read_env_args
from robocompose.sim.tasks import make_env


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


def test_collect_records_the_image_size_for_evaluation(tmp_path: Path) -> None:
    """Demos rendered at --image-size are what a policy trains on, and the file's env kwargs make
    evaluation render the same size."""
    out = tmp_path / "PickPlace.hdf5"
    main(
        [
            "collect",
            "PickPlace",
            "--episodes",
            "1",
            "--obs-keys",
            "proprio,image",
            "--image-size",
            "48",
            "--out",
            str(out),
        ]
    )
    (episode,) = load_demos(out)
    assert episode.obs["image"].shape[1:] == (48, 48, 3)
    assert episode.obs["proprio"].shape[1:] == (4,)
    env_kwargs = read_env_args(out)["env_kwargs"]
    assert env_kwargs == {"obs_keys": ["proprio", "image"], "image_size": 48}
    env = make_env("PickPlace", **env_kwargs)
    assert env.observation_space["image"].shape == (48, 48, 3)
    env.close()


@pytest.fixture
def fetch() -> None:
    pytest.importorskip("gymnasium_robotics", reason="the `external` extra is not installed")


def test_out_and_episodes_default_to_the_presets(fetch, tmp_path: Path, capsys) -> None:
    out = tmp_path / "preset.hdf5"
    main(["collect", "FetchReach", f"task.dataset={out}", "task.demos=1"])
    assert len(load_demos(out)) == 1
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["collect", "--help"])
    text = capsys.readouterr().out
    assert "out: str | None = null\n      None: the preset's `dataset`" in text
    assert "default: the preset's dataset" in " ".join(text.split())  # the --out flag


def test_a_demo_ends_at_its_first_success_when_asked(fetch, tmp_path: Path) -> None:
    """FetchReach reports success and runs on to its 50 steps; with --stop-on-success the demo
    ends at the step that first succeeds."""
    full, short = tmp_path / "full.hdf5", tmp_path / "short.hdf5"
    main(["collect", "FetchReach", "--episodes", "1", "--out", str(full)])
    main(["collect", "FetchReach", "--episodes", "1", "--out", str(short), "--stop-on-success"])
    (whole,), (cut,) = load_demos(full), load_demos(short)
    assert len(whole.actions) == 50 and len(cut.actions) < 50
    np.testing.assert_array_equal(cut.actions, whole.actions[: len(cut.actions)])


def test_a_weak_expert_ends_in_one_line_naming_the_cap(fetch, tmp_path: Path) -> None:
    """--expert-config merges into the preset's expert_config: a gain this low never reaches."""
    weak = json.dumps({"gain": 1e-3, "action_noise": 0.0})
    with pytest.raises(SystemExit) as info:
        main(
            ["collect", "FetchReach", "--episodes", "2", "--out", str(tmp_path / "weak.hdf5")]
            + ["--expert-config", weak, "attempts_per_demo=1"]
        )
    message = str(info.value)
    assert message.startswith("robocompose collect: error: FetchReach: the expert succeeded in ")
    assert "cap of 1 attempts per demo (2 episodes)" in message
    assert "attempts_per_demo=N" in message and "\n" not in message

"""`robocompose collect` as a new user first runs it: a fresh folder, a file not ours."""

from __future__ import annotations

from pathlib import Path

import h5py
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

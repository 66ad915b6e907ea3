"""hdf5 demo files: our writer and reader, robomimic's layout and robomimic's own reader."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from robocompose.sim.episode import ENV_TYPE_GYMNASIUM, DatasetError
from robocompose.sim.hdf5_dataset import DemoWriter, load_demos, read_env_args


def _episode(steps: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "obs": {
            "agent_pos": rng.normal(size=(steps, 2)),
            "image": rng.integers(0, 256, size=(steps, 8, 6, 3), dtype=np.uint8),
        },
        "actions": rng.normal(size=(steps, 2)),
        "rewards": rng.uniform(size=steps),
    }


def _write(path: Path, lengths: list[int], **kwargs) -> list[dict[str, np.ndarray]]:
    episodes = [_episode(steps, seed) for seed, steps in enumerate(lengths)]
    with DemoWriter(path, "robocompose/PushT-v0", {"max_steps": 300}, **kwargs) as writer:
        for ep in episodes:
            writer.add_episode(ep["obs"], ep["actions"], ep["rewards"])
    return episodes


# ---------------------------------------------------------------- writer and reader


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "demos.hdf5"
    written = _write(path, [5, 7, 3])
    episodes = load_demos(path)
    assert [e.name for e in episodes] == ["demo_0", "demo_1", "demo_2"]
    for ep, want in zip(episodes, written, strict=True):
        assert ep.actions.dtype == np.float32 and ep.obs["agent_pos"].dtype == np.float32
        assert ep.obs["image"].dtype == np.uint8
        np.testing.assert_array_equal(ep.obs["image"], want["obs"]["image"])
        np.testing.assert_array_equal(ep.obs["agent_pos"], want["obs"]["agent_pos"].astype("f4"))
        np.testing.assert_array_equal(ep.actions, want["actions"].astype(np.float32))
        np.testing.assert_array_equal(ep.rewards, want["rewards"].astype(np.float32))
    assert [len(e) for e in load_demos(path, ["agent_pos"])] == [5, 7, 3]
    assert list(load_demos(path, ["agent_pos"])[0].obs) == ["agent_pos"]


def test_file_layout(tmp_path: Path) -> None:
    path = tmp_path / "demos.hdf5"
    _write(path, [4] * 10 + [6] * 10, valid_fraction=0.25, seed=3)
    with h5py.File(path, "r") as f:
        data = f["data"]
        assert data.attrs["total"] == 4 * 10 + 6 * 10
        assert json.loads(data.attrs["env_args"]) == {
            "env_name": "robocompose/PushT-v0",
            "type": ENV_TYPE_GYMNASIUM,
            "env_kwargs": {"max_steps": 300},
        }
        demo = data["demo_11"]
        assert demo.attrs["num_samples"] == 6
        np.testing.assert_array_equal(demo["dones"][()], [0, 0, 0, 0, 0, 1])
        assert demo["actions"].dtype == np.float32 and demo["obs/agent_pos"].dtype == np.float32
        image = demo["obs/image"]
        assert image.dtype == np.uint8 and image.compression == "gzip"
        assert image.chunks == (1, 8, 6, 3)
        train, valid = list(f["mask/train"][()]), list(f["mask/valid"][()])
    assert len(valid) == 5 and all(isinstance(name, bytes) for name in train + valid)
    assert sorted(train + valid) == sorted(f"demo_{i}".encode() for i in range(20))
    assert read_env_args(path)["type"] == ENV_TYPE_GYMNASIUM
    # The split is a seeded shuffle: same seed, same split; the mask filters the reader.
    _write(tmp_path / "again.hdf5", [4] * 10 + [6] * 10, valid_fraction=0.25, seed=3)
    with h5py.File(tmp_path / "again.hdf5", "r") as f:
        assert list(f["mask/valid"][()]) == valid
    assert [e.name.encode() for e in load_demos(path, filter_key="valid")] == valid


def test_append_adds_demos_and_keeps_attrs(tmp_path: Path) -> None:
    path = tmp_path / "demos.hdf5"
    _write(path, [4, 5])
    extra = _episode(6, seed=9)
    with DemoWriter(path, "robocompose/PushT-v0", {"max_steps": 300}, append=True) as writer:
        assert len(writer.demo_attrs) == 2
        assert writer.add_episode(**extra, attrs={"seed": 9}) == "demo_2"
    with h5py.File(path) as f:
        assert f["data"].attrs["total"] == 15
        assert f["data/demo_2"].attrs["seed"] == 9
    assert [len(e) for e in load_demos(path)] == [4, 5, 6]


def test_append_refuses_other_env(tmp_path: Path) -> None:
    path = tmp_path / "demos.hdf5"
    _write(path, [4])
    with pytest.raises(DatasetError, match=r"env_args.env_kwargs.*cannot append"):
        DemoWriter(path, "robocompose/PushT-v0", {"max_steps": 100}, append=True)


@pytest.mark.parametrize(
    ("drop", "missing"),
    [
        ("data/demo_1/actions", r"`data/demo_1` has no `actions`"),
        ("data/demo_1/obs", r"`data/demo_1` has no `obs`"),
        ("num_samples", r"`data/demo_1` has no `num_samples` attribute"),
    ],
)
def test_append_to_a_foreign_file_names_what_is_missing(
    tmp_path: Path, drop: str, missing: str
) -> None:
    path = tmp_path / "theirs.hdf5"
    _write(path, [4, 5])
    with h5py.File(path, "a") as f:
        if drop == "num_samples":
            del f["data/demo_1"].attrs["num_samples"]
        else:
            del f[drop]
    with pytest.raises(DatasetError, match=missing) as info:
        DemoWriter(path, "robocompose/PushT-v0", {"max_steps": 300}, append=True)
    assert str(path) in str(info.value)
    assert "not a demo file written by `robocompose collect`" in str(info.value)


def test_append_resumes_a_file_killed_before_its_first_demo(tmp_path: Path) -> None:
    path = tmp_path / "demos.hdf5"
    _write(path, [])
    with DemoWriter(path, "robocompose/PushT-v0", {"max_steps": 300}, append=True) as writer:
        assert writer.demo_attrs == []
        writer.add_episode(**_episode(4, seed=0))
    assert [len(e) for e in load_demos(path)] == [4]


def test_interrupted_writer_keeps_finished_demos(tmp_path: Path) -> None:
    path = tmp_path / "demos.hdf5"
    with pytest.raises(KeyboardInterrupt), DemoWriter(path, "env") as writer:
        for seed in range(2):
            ep = _episode(4, seed)
            writer.add_episode(ep["obs"], ep["actions"], ep["rewards"])
        raise KeyboardInterrupt
    assert [len(e) for e in load_demos(path)] == [4, 4]
    with h5py.File(path, "r") as f:
        assert f["data"].attrs["total"] == 8
        assert len(f["mask/train"]) + len(f["mask/valid"]) == 2


def test_failed_episode_leaves_no_partial_demo(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "demos.hdf5"
    create_dataset = h5py.Group.create_dataset

    def fail_on_actions(self, name, *args, **kwargs):
        if name == "actions":
            raise OSError("disk full")
        return create_dataset(self, name, *args, **kwargs)

    with DemoWriter(path, "env") as writer:
        ep = _episode(4, 0)
        writer.add_episode(ep["obs"], ep["actions"], ep["rewards"])
        monkeypatch.setattr(h5py.Group, "create_dataset", fail_on_actions)
        with pytest.raises(OSError, match="disk full"):
            writer.add_episode(ep["obs"], ep["actions"], ep["rewards"])
        monkeypatch.undo()
    with h5py.File(path, "r") as f:
        assert list(f["data"]) == ["demo_0"] and f["data"].attrs["total"] == 4


def _robomimic_file(path: Path) -> None:
    """A file as robomimic's dataset_states_to_obs.py writes it: float64, next_obs, states, no
    masks, and demos created out of numeric order."""
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps({"env_name": "Lift", "type": 1, "env_kwargs": {}})
        for i in [10, 2, 0, 1]:
            steps = 3 + i
            demo = data.create_group(f"demo_{i}")
            demo.attrs["num_samples"] = steps
            demo.attrs["model_file"] = "<mujoco/>"
            for group in ("obs", "next_obs"):
                demo[f"{group}/robot0_eef_pos"] = np.full((steps, 3), float(i))
                demo[f"{group}/agentview_image"] = np.zeros((steps, 4, 4, 3), np.uint8)
            demo["states"] = np.zeros((steps, 32))
            demo["actions"] = np.full((steps, 7), float(i))
            demo["rewards"] = np.zeros(steps)
            demo["dones"] = np.zeros(steps, dtype=np.int64)
        data.attrs["total"] = sum(3 + i for i in [10, 2, 0, 1])


def test_reads_robomimic_layout(tmp_path: Path) -> None:
    path = tmp_path / "lift.hdf5"
    _robomimic_file(path)
    episodes = load_demos(path, ["robot0_eef_pos"])
    assert [e.name for e in episodes] == ["demo_0", "demo_1", "demo_2", "demo_10"]
    assert [e.actions[0, 0] for e in episodes] == [0.0, 1.0, 2.0, 10.0]
    assert episodes[3].actions.shape == (13, 7) and episodes[3].actions.dtype == np.float32
    assert episodes[3].obs["robot0_eef_pos"].dtype == np.float32
    assert sorted(load_demos(path)[0].obs) == ["agentview_image", "robot0_eef_pos"]
    with pytest.raises(DatasetError, match=r"unknown filter key `train`. Masks in the file: \[\]"):
        load_demos(path, filter_key="train")


# ---------------------------------------------------------------- errors


def _h5(path: Path, build) -> Path:
    with h5py.File(path, "w") as f:
        build(f)
    return path


def _demo(f: h5py.File, steps: int = 3, obs_steps: int | None = None, **skip: bool):
    demo = f.create_group("data/demo_0")
    if not skip.get("obs"):
        demo["obs/qpos"] = np.zeros((steps if obs_steps is None else obs_steps, 2))
    if not skip.get("actions"):
        demo["actions"] = np.zeros((steps, 2))


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (None, "no such file"),
        ("text", "not an hdf5 file"),
        (lambda f: f.create_group("stuff"), r"no `data` group. Top-level keys: \['stuff'\]"),
        (lambda f: f.create_group("data"), "has no demo_<i> groups"),
        (lambda f: _demo(f, actions=True), r"`data/demo_0/actions` is missing \(demo_0 in"),
        (lambda f: _demo(f, obs=True), r"`data/demo_0/obs` is missing \(demo_0 in"),
        (
            lambda f: _demo(f, obs=True) or f.create_dataset("data/demo_0/obs", data=[1.0]),
            r"`data/demo_0/obs` must be a group",
        ),
        (lambda f: _demo(f, obs_steps=2), r"`obs/qpos` .* Got 2 != 3 \(demo_0 in"),
    ],
)
def test_bad_files_name_file_and_key(tmp_path: Path, build, match: str) -> None:
    path = tmp_path / "bad.hdf5"
    if build == "text":
        path.write_text("not hdf5")
    elif build is not None:
        _h5(path, build)
    with pytest.raises(DatasetError, match=match) as info:
        load_demos(path)
    assert "bad.hdf5" in str(info.value)


def test_missing_obs_key_lists_available(tmp_path: Path) -> None:
    path = _h5(tmp_path / "demos.hdf5", _demo)
    with pytest.raises(DatasetError, match=r"\['image'\] not found .* keys: \['qpos'\]"):
        load_demos(path, ["qpos", "image"])
    with pytest.raises(TypeError, match="string"):
        load_demos(path, "qpos")


def test_nonfinite_values_are_refused_naming_demo_key_and_index(tmp_path: Path) -> None:
    """A NaN written by another tool (our writer refuses them) must not reach training: it
    would make the normalisers, then every trained weight, NaN."""
    path = tmp_path / "demos.hdf5"
    _write(path, [4, 5, 4])
    with h5py.File(path, "a") as f:
        f["data/demo_1/actions"][3, 1] = np.nan
        f["data/demo_2/obs/agent_pos"][0, 0] = np.inf
    with pytest.raises(
        DatasetError,
        match=r"`actions` holds nan at index \(3, 1\) \(1 non-finite\) \(demo_1 in .*demos.hdf5\)"
        r".*skip_nonfinite_demos=true",
    ):
        load_demos(path)
    with pytest.warns(
        UserWarning, match=r"left out 2 demo\(s\).*demo_1: .*demo_2: `obs/agent_pos`"
    ):
        kept = load_demos(path, skip_nonfinite=True)
    assert [e.name for e in kept] == ["demo_0"]


def test_unknown_filter_key_lists_masks(tmp_path: Path) -> None:
    path = tmp_path / "demos.hdf5"
    _write(path, [3, 3])
    with pytest.raises(DatasetError, match=r"`test`.*\['train', 'valid'\]"):
        load_demos(path, filter_key="test")


def test_writer_rejects_bad_episodes(tmp_path: Path) -> None:
    path = tmp_path / "demos.hdf5"
    ep = _episode(5, 0)
    with DemoWriter(path, "env") as writer:
        short = {**ep["obs"], "image": ep["obs"]["image"][:4]}
        with pytest.raises(DatasetError, match=r"`obs/image` .* Got 4 != 5"):
            writer.add_episode(short, ep["actions"], ep["rewards"])
        with pytest.raises(DatasetError, match=r"`rewards` .* Got 3 != 5"):
            writer.add_episode(ep["obs"], ep["actions"], ep["rewards"][:3])
        with pytest.raises(DatasetError, match=r"`actions` must have shape \(T, A\)"):
            writer.add_episode(ep["obs"], ep["actions"][:, 0], ep["rewards"])
        nan_actions = ep["actions"].copy()
        nan_actions[2, 1] = np.nan
        with pytest.raises(DatasetError, match="`actions` holds .* must be finite"):
            writer.add_episode(ep["obs"], nan_actions, ep["rewards"])
        writer.add_episode(ep["obs"], ep["actions"], ep["rewards"])
        with pytest.raises(DatasetError, match=r"`obs/image` must match demo_0's .* Got None"):
            writer.add_episode({"agent_pos": ep["obs"]["agent_pos"]}, ep["actions"], ep["rewards"])
        wide = {**ep["obs"], "agent_pos": np.zeros((5, 3))}
        with pytest.raises(
            DatasetError, match=r"`obs/agent_pos` must match .*\(2,\).* Got \(\(3,\)"
        ):
            writer.add_episode(wide, ep["actions"], ep["rewards"])
    assert [e.name for e in load_demos(path)] == ["demo_0"]
    with pytest.raises(FileExistsError):
        DemoWriter(path, "env")
    with pytest.raises(ValueError, match="`valid_fraction` must be in"):
        DemoWriter(tmp_path / "other.hdf5", "env", valid_fraction=1.0)
    with pytest.raises(ValueError, match="JSON-serialisable"):
        DemoWriter(tmp_path / "other.hdf5", "env", {"rng": np.random.default_rng()})


# ---------------------------------------------------------------- robomimic's own reader


def test_robomimic_sequence_dataset_reads_our_file(tmp_path: Path) -> None:
    pytest.importorskip("robomimic")
    import robomimic.utils.obs_utils as obs_utils
    from robomimic.utils.dataset import SequenceDataset

    path = tmp_path / "demos.hdf5"
    written = _write(path, [5, 3, 4] * 4)
    obs_utils.initialize_obs_utils_with_obs_specs({"obs": {"low_dim": ["agent_pos"]}})
    dataset = SequenceDataset(
        hdf5_path=str(path),
        obs_keys=("agent_pos",),
        dataset_keys=("actions", "rewards"),
        seq_length=3,
        load_next_obs=False,  # we do not write next_obs
        filter_by_attribute="train",
    )
    ours = {e.name: e for e in load_demos(path, filter_key="train")}
    assert dataset.demos == list(ours) and len(dataset) == sum(len(e) for e in ours.values())
    index = 0
    for name, episode in ours.items():
        for t in range(len(episode)):
            item = dataset[index]
            frames = np.minimum(np.arange(t, t + 3), len(episode) - 1)
            np.testing.assert_array_equal(item["actions"], episode.actions[frames])
            np.testing.assert_array_equal(
                item["obs"]["agent_pos"], episode.obs["agent_pos"][frames]
            )
            index += 1
        i = int(name.removeprefix("demo_"))
        np.testing.assert_array_equal(episode.actions, written[i]["actions"].astype(np.float32))

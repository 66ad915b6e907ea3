"""LeRobot v3.0 datasets: our writer and reader, checked against LeRobot's own dataset code.

LeRobot's code (`lerobot-dataset`, module `ledataset`) pins datasets < 4.2 and
huggingface-hub < 0.36, which clash with this venv, so it lives in `.venv-lerobot` (built by
`make setup-all`) and runs here in a subprocess (tests/sim/lerobot_reference.py).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("av")

from robocompose.cli import main  # noqa: E402
from robocompose.policies.checkpoint import load_policy  # noqa: E402
from robocompose.sim.episode import DatasetError  # noqa: E402
from robocompose.sim.hdf5_dataset import (  # noqa: E402
    DemoWriter,
    load_demos,
    read_env_args,
    read_skill_vocabulary,
)
from robocompose.sim.lerobot_dataset import LeRobotWriter, load_lerobot_demos  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LEROBOT_PYTHON = REPO / ".venv-lerobot" / "bin" / "python"
REFERENCE = Path(__file__).with_name("lerobot_reference.py")
ENV = "robocompose/PushT-v0"


def _episodes(n: int = 3, image: bool = True, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        steps = 9 + 2 * i
        obs = {"state": rng.normal(size=(steps, 5)).astype(np.float32)}
        if image:
            obs["image"] = rng.integers(0, 256, (steps, 16, 24, 3), dtype=np.uint8)
        actions = rng.normal(size=(steps, 2)).astype(np.float32)
        rewards = rng.random(steps).astype(np.float32)
        out.append({"obs": obs, "actions": actions, "rewards": rewards})
    return out


def _write(path: Path, episodes: list[dict], **kwargs) -> None:
    with LeRobotWriter(path, ENV, {"obs_keys": ["state", "image"]}, fps=10, **kwargs) as writer:
        for i, e in enumerate(episodes):
            writer.add_episode(e["obs"], e["actions"], e["rewards"], attrs={"seed": i})


def test_round_trip_is_exact_for_states_actions_rewards_and_video_frames(tmp_path):
    episodes = _episodes()
    _write(tmp_path / "ds", episodes, task="push")
    back = load_demos(tmp_path / "ds", ["state", "image"])
    assert [e.name for e in back] == ["episode_0", "episode_1", "episode_2"]
    for wrote, read in zip(episodes, back, strict=True):
        np.testing.assert_array_equal(read.obs["image"], wrote["obs"]["image"])  # lossless video
        np.testing.assert_array_equal(read.obs["state"], wrote["obs"]["state"])
        np.testing.assert_array_equal(read.actions, wrote["actions"])
        np.testing.assert_array_equal(read.rewards, wrote["rewards"])
    info = json.loads((tmp_path / "ds/meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["total_frames"] == 9 + 11 + 13
    assert info["features"]["observation.images.image"]["dtype"] == "video"
    assert read_env_args(tmp_path / "ds")["env_name"] == ENV
    # no skill labels: the task string is every frame's language
    assert read_skill_vocabulary(tmp_path / "ds") == [
        {"name": "task", "args": {}, "language": "push"}
    ]
    np.testing.assert_array_equal(back[0].skills, np.zeros(9))
    stats = json.loads((tmp_path / "ds/meta/stats.json").read_text())
    all_actions = np.concatenate([e["actions"] for e in episodes])
    np.testing.assert_allclose(stats["action"]["mean"], all_actions.mean(0), rtol=1e-5)
    np.testing.assert_allclose(stats["action"]["std"], all_actions.std(0), rtol=1e-5)
    assert np.array(stats["observation.images.image"]["mean"]).shape == (3, 1, 1)


def test_append_resumes_numbering_and_refuses_another_env(tmp_path):
    episodes = _episodes(3, image=False)
    with LeRobotWriter(tmp_path / "ds", ENV, {"obs_keys": ["state"]}) as writer:
        writer.add_episode(episodes[0]["obs"], episodes[0]["actions"], episodes[0]["rewards"])
    with LeRobotWriter(tmp_path / "ds", ENV, {"obs_keys": ["state"]}, append=True) as writer:
        for e in episodes[1:]:
            writer.add_episode(e["obs"], e["actions"], e["rewards"], attrs={"seed": 7})
        assert writer.demo_attrs == [{}, {"seed": 7}, {"seed": 7}]
    back = load_lerobot_demos(tmp_path / "ds")
    assert len(back) == 3
    np.testing.assert_array_equal(back[2].actions, episodes[2]["actions"])
    with pytest.raises(DatasetError, match="cannot append"):
        LeRobotWriter(tmp_path / "ds", "robocompose/Stack-v0", {"obs_keys": ["state"]}, append=True)


def test_skill_labels_become_task_strings_and_read_back_exactly(tmp_path):
    e = _episodes(1, image=False)[0]
    labels = [{"name": "pick", "args": {"obj": "red"}, "language": "pick red"}] * 4
    labels += [{"name": "place", "args": {"obj": "red"}, "language": "place red"}] * 5
    with LeRobotWriter(tmp_path / "ds", ENV) as writer:
        writer.add_episode(e["obs"], e["actions"], e["rewards"], skills=labels)
    back = load_demos(tmp_path / "ds")
    np.testing.assert_array_equal(back[0].skills, [0] * 4 + [1] * 5)
    assert read_skill_vocabulary(tmp_path / "ds") == [labels[0], labels[-1]]


def test_a_folder_that_is_not_a_lerobot_dataset_names_the_layout(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match=r"no meta/info.json.*meta/episodes/chunk-XXX"):
        load_demos(tmp_path / "empty")
    _write(tmp_path / "ds", _episodes(1))
    info_path = tmp_path / "ds/meta/info.json"
    info = json.loads(info_path.read_text()) | {"codebase_version": "v2.1"}
    info_path.write_text(json.dumps(info))
    with pytest.raises(DatasetError, match="v2.1; only v3.x is read"):
        load_demos(tmp_path / "ds")
    _write(tmp_path / "other", _episodes(1))
    with pytest.raises(DatasetError, match=r"obs key\(s\) \['proprio'\] not found"):
        load_demos(tmp_path / "other", ["proprio"])


def test_training_windows_and_normalisers_equal_the_hdf5_path(tmp_path):
    from robocompose.policies.train import prepare
    from robocompose.policies.train_config import TrainConfig

    episodes = _episodes(3, image=False)
    _write(tmp_path / "ds", episodes)
    with DemoWriter(tmp_path / "demos.hdf5", ENV, {"obs_keys": ["state"]}) as writer:
        for e in episodes:
            writer.add_episode(e["obs"], e["actions"], e["rewards"])
    prepared = {}
    for name in ("ds", "demos.hdf5"):
        config = TrainConfig(dataset=str(tmp_path / name), out=str(tmp_path / "ckpt"), steps=1)
        prepared[name] = prepare(config)
    (policy_a, windows_a, meta_a), (policy_b, windows_b, meta_b) = prepared.values()
    assert len(windows_a) == len(windows_b)
    index = np.arange(len(windows_a))
    batch_a, batch_b = windows_a.batch(index), windows_b.batch(index)
    np.testing.assert_array_equal(batch_a["actions"], batch_b["actions"])
    np.testing.assert_array_equal(batch_a["obs"]["state"], batch_b["obs"]["state"])
    for key in ("action", "state"):
        np.testing.assert_array_equal(
            policy_a.normalizers[key].scale, policy_b.normalizers[key].scale
        )
    assert meta_a["task"] == meta_b["task"] == ENV


def _lerobot(*args: str, tmp_path: Path) -> None:
    if not LEROBOT_PYTHON.is_file():
        pytest.skip("LeRobot's own environment is missing: `make setup-all` builds .venv-lerobot")
    env = os.environ | {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    done = subprocess.run(
        [str(LEROBOT_PYTHON), str(REFERENCE), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_lerobots_reader_loads_what_we_write_frame_for_frame(tmp_path):
    episodes = _episodes(2)
    labels = [
        [{"name": "push", "args": {}, "language": f"push {i}"}] * len(e["actions"])
        for i, e in enumerate(episodes)
    ]
    with LeRobotWriter(tmp_path / "ds", ENV, fps=10) as writer:
        for e, skills in zip(episodes, labels, strict=True):
            writer.add_episode(e["obs"], e["actions"], e["rewards"], skills=skills)
    _lerobot("read", str(tmp_path / "ds"), str(tmp_path / "read.npz"), tmp_path=tmp_path)
    read = np.load(tmp_path / "read.npz")
    np.testing.assert_array_equal(
        read["observation.images.image"], np.concatenate([e["obs"]["image"] for e in episodes])
    )
    for feature, key in (("observation.state", "state"),):
        np.testing.assert_array_equal(
            read[feature], np.concatenate([e["obs"][key] for e in episodes])
        )
    np.testing.assert_array_equal(read["action"], np.concatenate([e["actions"] for e in episodes]))
    np.testing.assert_array_equal(
        read["episode_index"], np.repeat([0, 1], [len(e["actions"]) for e in episodes])
    )
    assert list(read["task"][[0, -1]]) == ["push 0", "push 1"]


def test_we_load_and_train_on_what_lerobots_writer_makes(tmp_path):
    _lerobot("write", str(tmp_path / "theirs"), str(tmp_path / "added.npz"), tmp_path=tmp_path)
    added = np.load(tmp_path / "added.npz")
    back = load_demos(tmp_path / "theirs", ["state", "top"])
    assert [len(e) for e in back] == [7, 5]
    np.testing.assert_array_equal(np.concatenate([e.obs["state"] for e in back]), added["state"])
    np.testing.assert_array_equal(np.concatenate([e.actions for e in back]), added["action"])
    images = np.concatenate([e.obs["top"] for e in back]).astype(int)
    assert np.abs(images - added["image"]).max() <= 3  # their codec is lossy
    vocabulary = read_skill_vocabulary(tmp_path / "theirs")
    languages = [vocabulary[e.skills[0]]["language"] for e in back]
    assert languages == ["push the T", "pick the cube"]
    assert read_env_args(tmp_path / "theirs")["env_name"] is None
    # and it trains here as is (a short horizon: their episodes are 7 and 5 frames)
    window = ["policy.horizon=8", "policy.n_action_steps=4", "batch_size=4", "warmup_steps=1"]
    dataset, out = tmp_path / "theirs", tmp_path / "ckpt"
    main(["train", f"dataset={dataset}", f"out={out}", "policy=flow_mlp", "steps=2", *window])
    policy = load_policy(out)
    assert policy.config.obs_keys == ("state",) and policy.metadata["task"] is None


def test_proprio_is_the_robot_state_and_state_the_environment_state(tmp_path):
    e = _episodes(1, image=False)[0]
    obs = {"state": e["obs"]["state"], "proprio": e["obs"]["state"][:, :2].copy()}
    with LeRobotWriter(tmp_path / "ds", ENV) as writer:
        writer.add_episode(obs, e["actions"], e["rewards"])
    features = json.loads((tmp_path / "ds/meta/info.json").read_text())["features"]
    assert features["observation.state"]["shape"] == [2]
    assert features["observation.environment_state"]["shape"] == [5]
    back = load_demos(tmp_path / "ds", ["state", "proprio"])[0]
    np.testing.assert_array_equal(back.obs["proprio"], obs["proprio"])
    np.testing.assert_array_equal(back.obs["state"], obs["state"])

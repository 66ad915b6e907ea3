"""Conformance of every registered suite task: gymnasium API, seeding, expert, collection."""

from __future__ import annotations

import contextlib
import io
import subprocess
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from robocompose.cli import load_verb_config, main
from robocompose.config import CONFIGS
from robocompose.shipped import CHECKPOINTS, PARENT_PAIRS
from robocompose.sim import TASKS, get_task, make_env, make_expert
from robocompose.sim.collect import collect, run_expert_episode
from robocompose.sim.hdf5_dataset import load_demos, read_env_args

TASK_NAMES = list(TASKS)


@pytest.mark.parametrize("name", TASK_NAMES)
def test_check_env(name: str) -> None:
    env = make_env(name)
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def _rollout(env: gym.Env, seed: int, actions: np.ndarray) -> np.ndarray:
    obs, _ = env.reset(seed=seed)
    states = [obs["state"]]
    for action in actions:
        states.append(env.step(action)[0]["state"])
    return np.stack(states)


@pytest.mark.parametrize("name", TASK_NAMES)
def test_seeded_reset_is_deterministic(name: str) -> None:
    env = make_env(name)
    env.action_space.seed(0)
    actions = np.stack([env.action_space.sample() for _ in range(5)])
    first, again = _rollout(env, 7, actions), _rollout(env, 7, actions)
    np.testing.assert_array_equal(first, again)
    assert not np.allclose(first[0], _rollout(env, 8, actions)[0])
    env.close()


@pytest.mark.parametrize("name", TASK_NAMES)
def test_info_reports_success_and_score(name: str) -> None:
    env = make_env(name)
    _, info = env.reset(seed=0)
    _, reward, _, _, info = env.step(env.action_space.sample())
    assert isinstance(info["success"], bool)
    assert 0.0 <= info["score"] <= 1.0
    assert np.isfinite(reward)
    env.close()


@pytest.mark.parametrize("name", TASK_NAMES)
def test_image_observation(name: str) -> None:
    env = make_env(name, obs_keys=("state", "image"), image_size=64)
    obs, _ = env.reset(seed=0)
    assert obs["image"].shape == (64, 64, 3) and obs["image"].dtype == np.uint8
    assert obs["image"].std() > 5, "the rendered image is blank"
    assert env.observation_space.contains(obs)
    env.close()


@pytest.mark.parametrize("name", TASK_NAMES)
def test_expert_succeeds_on_small_seed_set(name: str) -> None:
    env, expert = make_env(name), make_expert(name)
    results = [run_expert_episode(env, expert, seed).success for seed in range(3)]
    env.close()
    assert sum(results) >= 3, f"{name}: expert succeeded on {sum(results)}/3 seeds"


def test_unknown_task_names_the_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown task 'PushTT'.*Choices: .*PushT.*Did you mean"):
        get_task("PushTT")
    assert get_task("pusht").env_id == "robocompose/PushT-v0"
    assert get_task("robocompose/PushT-v0").name == "PushT"


def test_collect_writes_demos_and_resumes(tmp_path) -> None:
    out = tmp_path / "pusht.hdf5"
    collect("PushT", 2, out, progress=False)
    collect("PushT", 3, out, progress=False)  # resumes: adds one demo, keeps the first two
    episodes = load_demos(out)
    assert len(episodes) == 3
    assert read_env_args(out)["env_name"] == "robocompose/PushT-v0"
    env = make_env("PushT")
    replay = run_expert_episode(env, make_expert("PushT"), seed=0)
    np.testing.assert_allclose(episodes[0].actions, replay.actions, atol=1e-6)
    np.testing.assert_allclose(episodes[0].obs["state"], replay.obs["state"], atol=1e-6)
    assert episodes[0].obs["state"].shape == (len(episodes[0].actions), 6)


def test_every_task_is_an_option_of_every_verb_built_from_its_spec(tmp_path) -> None:
    for name, spec in TASKS.items():
        task = load_verb_config("collect", [f"task={name}"]).task
        assert (task.name, task.dataset, task.demos) == (name, spec.dataset, spec.demos)
    presets = sorted(p.stem for p in CONFIGS.glob("task/*.yaml"))  # external tasks' presets
    help_text = " ".join(_stdout(["compose", "--help"]).split())  # unwrapped
    assert f"task: {', '.join(sorted([*TASKS, *presets]))}" in help_text
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "Mine.yaml").write_text("name: Stack\ndataset: mine.hdf5\ndemos: 7\n")
    composed = _stdout(["collect", "--config-dir", str(tmp_path), "task=Mine", "--cfg"])
    # collect's episodes and out are null here: they take the preset's demos and dataset
    assert "dataset: mine.hdf5\n  demos: 7\n" in composed and "name: Stack" in composed


def _stdout(argv: list[str]) -> str:
    """What the CLI prints (`--help` ends in SystemExit, as argparse does)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(argv)
    return out.getvalue()


@pytest.mark.parametrize("name", [n for n, spec in TASKS.items() if spec.shipped_pair])
def test_make_checkpoints_collects_what_the_spec_says(name: str) -> None:
    """The Makefile reads `demos` from the spec; its dry run shows the command it would run."""
    root = Path(__file__).parents[2]
    run = subprocess.run(
        ["make", "-n", f"collect-{name}"], cwd=root, capture_output=True, text=True, check=True
    )
    spec = TASKS[name]
    assert f"collect {name} --episodes {spec.demos} --out {spec.dataset}" in run.stdout
    assert PARENT_PAIRS[name] == spec.shipped_pair
    assert all((CHECKPOINTS / f"{name}_{kind}").is_dir() for kind in spec.shipped_pair)

"""Third-party gymnasium envs as tasks: the observation adapter on real envs of each kind, and a
task preset of one's own running collect -> train -> eval/compose with no code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from robocompose.sim.external import AdapterConfig, ExternalTask, make_external_env
from robocompose.sim.tasks import EXTERNAL_TASKS, get_task, register_external

REPO = Path(__file__).resolve().parents[2]


def _external(env_id: str, imports: list[str], **kw) -> dict:
    return {"env_id": env_id, "imports": imports, **kw}


@pytest.fixture(scope="module")
def fetch() -> None:
    pytest.importorskip("gymnasium_robotics", reason="the `external` extra is not installed")


@pytest.fixture(scope="module")
def pusht() -> None:
    pytest.importorskip("gym_pusht", reason="the `external` extra is not installed")


def test_goal_kind_gives_state_as_observation_and_desired_goal(fetch) -> None:
    env = make_external_env(
        _external("FetchReach-v4", ["gymnasium_robotics"], adapter={"kind": "goal"})
    )
    obs, info = env.reset(seed=3)
    raw = env.raw_observation
    assert set(obs) == {"state"} and obs["state"].shape == (13,)
    assert env.observation_space["state"].shape == (13,)
    np.testing.assert_allclose(
        obs["state"], np.concatenate([raw["observation"], raw["desired_goal"]]), rtol=1e-6
    )
    assert info["success"] is False and info["score"] == 0.0
    _, _, _, _, info = env.step(np.zeros(4, np.float32))
    assert info["success"] == bool(info["is_success"])
    env.close()


def test_box_pixels_and_dict_kinds_on_the_original_pusht(pusht) -> None:
    box = make_external_env(
        _external(
            "gym_pusht/PushT-v0",
            ["gym_pusht"],
            env_kwargs={"obs_type": "state"},
            adapter={"kind": "box"},
        )
    )
    obs, _ = box.reset(seed=0)
    assert obs["state"].shape == (5,) and obs["state"].dtype == np.float32
    box.close()

    pixels = make_external_env(
        _external(
            "gym_pusht/PushT-v0",
            ["gym_pusht"],
            env_kwargs={"obs_type": "pixels"},
            adapter={"kind": "pixels", "image_size": 48},
        )
    )
    obs, _ = pixels.reset(seed=0)
    assert obs["image"].shape == (48, 48, 3) and obs["image"].dtype == np.uint8
    assert pixels.observation_space["image"].shape == (48, 48, 3)
    assert obs["image"].std() > 0  # a rendered scene, not a blank
    pixels.close()

    mapped = make_external_env(
        _external(
            "gym_pusht/PushT-v0",
            ["gym_pusht"],
            env_kwargs={"obs_type": "pixels_agent_pos"},
            adapter={"kind": "dict", "keys": {"image": "pixels", "proprio": ["agent_pos"]}},
        ),
        obs_keys=["proprio"],
    )
    obs, _ = mapped.reset(seed=0)
    assert set(obs) == {"proprio"}
    np.testing.assert_allclose(obs["proprio"], mapped.raw_observation["agent_pos"])
    mapped.close()


@pytest.mark.parametrize(
    ("block", "message"),
    [
        (
            {
                "env_id": "FetchReach-v4",
                "imports": ["gymnasium_robotics"],
                "adapter": {"kind": "box"},
            },
            "needs a single Box",
        ),
        (
            {
                "env_id": "FetchReach-v4",
                "imports": ["gymnasium_robotics"],
                "adapter": {"kind": "dict", "keys": {"state": ["observation", "goal"]}},
            },
            "names ['goal']",
        ),
        (
            {"env_id": "FetchReach-v4", "adapter": {"kind": "goal", "size": 3}},
            "unknown `external.adapter` field(s) ['size']",
        ),
        ({"env_id": "FetchReach-v4", "expert_cfg": {}}, "unknown `external` field(s)"),
        ({"env_id": "NoSuchEnv-v0"}, "is not registered after importing"),
        ({"env_id": "FetchReach-v4", "imports": ["no_such_module"]}, "does not import"),
        ({"env_id": "FetchReach-v4", "adapter": {"kind": "voxels"}}, "`adapter.kind` must be"),
    ],
)
def test_bad_blocks_name_the_field(fetch, block, message) -> None:
    with pytest.raises((ValueError, ImportError), match=None) as e:
        make_external_env(block)
    assert message in str(e.value)


def test_obs_keys_outside_the_adapter_are_named(fetch) -> None:
    block = _external("FetchReach-v4", ["gymnasium_robotics"], adapter={"kind": "goal"})
    with pytest.raises(ValueError, match=r"\['image'\] are not keys of the adapter"):
        make_external_env(block, obs_keys=["image"])


def test_a_block_registers_a_task_and_refuses_suite_names(fetch) -> None:
    block = _external("FetchReach-v4", ["gymnasium_robotics"], adapter={"kind": "goal"})
    spec = register_external("ReachForTest", block)
    assert get_task("robocompose/ReachForTest-v0") is spec
    assert spec.external == ExternalTask.from_dict(block).to_dict()
    env = gym.make(spec.env_id, obs_keys=("state",))
    assert env.observation_space["state"].shape == (13,)
    env.close()
    with pytest.raises(ValueError, match="already registered with another"):
        register_external("ReachForTest", {**block, "env_id": "FetchPush-v4"})
    with pytest.raises(ValueError, match="the suite has a task of that name"):
        register_external("PushT", block)
    EXTERNAL_TASKS.pop("ReachForTest")


def test_adapter_config_rejects_a_bad_key_list() -> None:
    with pytest.raises(ValueError, match=r"`adapter.keys.state` must be a source name"):
        AdapterConfig(kind="dict", keys={"state": []})


def test_own_preset_runs_collect_train_then_eval_and_compose_elsewhere(fetch, tmp_path) -> None:
    """A user's preset under --config-dir: the dataset and checkpoints carry the env, so eval and
    compose in a new process (no --config-dir) run on it."""
    from robocompose.cli import main

    (tmp_path / "cfg" / "task").mkdir(parents=True)
    (tmp_path / "cfg" / "task" / "MyReach.yaml").write_text(
        "name: MyReach\n"
        f"dataset: {tmp_path}/reach.hdf5\n"
        "demos: 12\n"
        "external:\n"
        "  env_id: FetchReach-v4\n"
        "  imports: [gymnasium_robotics]\n"
        "  adapter: {kind: goal}\n"
        "  expert: robocompose.sim.experts.goal_reaching:GoalReachingExpert\n"
    )
    main(["collect", "--config-dir", str(tmp_path / "cfg"), "task=MyReach"])
    EXTERNAL_TASKS.pop("MyReach")  # what a new process knows: only what the files say
    from robocompose.sim.hdf5_dataset import read_env_args

    env_args = read_env_args(tmp_path / "reach.hdf5")
    assert env_args["env_name"] == "robocompose/MyReach-v0"
    assert env_args["env_kwargs"]["external"]["env_id"] == "FetchReach-v4"
    for name, policy in (("a", "flow_mlp"), ("b", "diffusion_unet")):
        main(
            [
                "train",
                f"dataset={tmp_path}/reach.hdf5",
                f"out={tmp_path}/{name}",
                f"policy={policy}",
                "steps=20",
                "batch_size=32",
                "torch_threads=1",
            ]
        )
    EXTERNAL_TASKS.pop("MyReach")
    env = {**os.environ, "MUJOCO_GL": "egl", "PYTHONPATH": str(REPO)}
    for args in (
        ["eval", f"checkpoint={tmp_path}/a", "episodes=2", f"out={tmp_path}/eval.jsonl"],
        [
            "compose",
            f"{tmp_path}/a",
            f"{tmp_path}/b",
            "episodes=2",
            "--steps",
            "2",
            f"out={tmp_path}/compose",
        ],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "robocompose", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
    records = [json.loads(x) for x in (tmp_path / "eval.jsonl").read_text().splitlines()]
    episodes = [r for r in records if "seed" in r]
    assert len(episodes) == 2 and all(r["env_id"] == "robocompose/MyReach-v0:a" for r in episodes)


def test_a_config_dir_preset_of_a_task_this_process_knows_loads_without_warnings(tmp_path):
    """A task learnt from a checkpoint is a code preset too, unless a --config-dir file names
    it: Hydra would warn about the pair (and merge them) on every later call."""
    from robocompose.cli import load_verb_config
    from robocompose.config import hydra_value

    block = _external("FetchReach-v4", ["gymnasium_robotics"], adapter={"kind": "goal"})
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "MyQuiet.yaml").write_text(
        json.dumps({"name": "MyQuiet", "dataset": "data/q.hdf5", "demos": 3, "external": block})
    )
    register_external("MyQuiet", block)
    searchpath = f"hydra.searchpath={hydra_value([f'file://{tmp_path}'])}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            config = load_verb_config("collect", [searchpath, "task=MyQuiet"])
    finally:
        EXTERNAL_TASKS.pop("MyQuiet")
    assert (config.task.name, config.task.demos) == ("MyQuiet", 3)


def test_cli_composes_the_shipped_jax_and_torch_parents_on_fetch_reach(fetch, tmp_path, capsys):
    """The cross-framework pair on an external task through the ordinary verbs."""
    pytest.importorskip("flax", reason="the `jax` extra is not installed")
    from robocompose.cli import main

    parents = ["FetchReach_diffusion_unet", "FetchReach_flow_jax_mlp"]
    main(["compose", *parents, "--weights", "0.5,0.5", "--episodes", "2", "--out", str(tmp_path)])
    assert "robocompose/FetchReach-v0:convex_0.500_0.500" in capsys.readouterr().out
    args = ["--episodes", "2", "--step", "0.5", "--out", f"{tmp_path}/s", "confirm=0"]
    main(["search", *parents, *args])
    record = json.loads((tmp_path / "s" / "search.json").read_text())
    assert record["task"]["env_id"] == "robocompose/FetchReach-v0"
    assert [p["name"] for p in record["parents"]] == parents
    assert len(record["result"]["chosen"]) == 2


@pytest.fixture
def scratch_folder(tmp_path, monkeypatch) -> Path:
    """The current folder is `tmp_path`; sys.path and the modules imported from it are put
    back afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    modules = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - modules:
        if str(tmp_path) in str(getattr(sys.modules[name], "__file__", "")):
            del sys.modules[name]


GUIDE = "docs/external-tasks.md"


def _guide_block(after: str, language: str) -> str:
    text = (REPO / GUIDE).read_text()
    start = text.index(f"```{language}\n", text.index(after)) + len(language) + 4
    return text[start : text.index("```", start)]


def test_the_guide_expert_in_the_current_folder_collects(fetch, scratch_folder) -> None:
    """The external-task guide's own expert and preset, as a user runs them: the module sits in
    the current folder, with no PYTHONPATH."""
    from robocompose.cli import main
    from robocompose.sim.hdf5_dataset import read_env_args

    intro = "This one, `my_reach.py`, drives FetchReach:"
    (scratch_folder / "my_reach.py").write_text(_guide_block(intro, "python"))
    preset = _guide_block(intro, "yaml").replace("ScriptedReach", "GuideReach")
    (scratch_folder / "cfg" / "task").mkdir(parents=True)
    (scratch_folder / "cfg" / "task" / "GuideReach.yaml").write_text(preset)
    try:
        main(["collect", "--config-dir", "cfg", "task=GuideReach", "--episodes", "2"])
    finally:
        EXTERNAL_TASKS.pop("GuideReach", None)
    env_args = read_env_args(scratch_folder / "data" / "GuideReach.hdf5")
    EXTERNAL_TASKS.pop("GuideReach", None)
    assert env_args["env_kwargs"]["external"]["expert"] == "my_reach:ReachExpert"


def test_an_expert_lacking_its_interface_is_refused_by_name(scratch_folder) -> None:
    from robocompose.sim.external import load_expert

    (scratch_folder / "half_experts.py").write_text(
        "from dataclasses import dataclass\n\n"
        "@dataclass\nclass NoActConfig:\n    gain: float = 1.0\n\n"
        "class NoAct:\n    def __init__(self, config): ...\n    def reset(self, env, rng): ...\n\n"
        "class NoConfig:\n    def __init__(self, config): ...\n"
        "    def reset(self, env, rng): ...\n    def act(self, env): ...\n\n"
        "GoodConfig = NoActConfig\n\nclass Good(NoConfig):\n    pass\n"
    )
    with pytest.raises(ValueError, match=r"'half_experts:NoAct' lacks act: an expert defines"):
        load_expert("half_experts:NoAct", {})
    with pytest.raises(
        ValueError, match="module half_experts has no NoConfigConfig, the dataclass"
    ):
        load_expert("half_experts:NoConfig", {})
    with pytest.raises(ValueError, match="has no class 'Missing'"):
        load_expert("half_experts:Missing", {})
    with pytest.raises(ValueError, match=r"`expert_config` \{'gian': 2\} does not fit"):
        load_expert("half_experts:Good", {"gian": 2})
    assert load_expert("half_experts:Good", {"gain": 2}).__class__.__name__ == "Good"
    with pytest.raises(
        ValueError, match=f"nor a file elsewhere/experts.py in the current folder {scratch_folder}"
    ):
        load_expert("elsewhere.experts:Expert", {})


RECIPE = "## Any gymnasium env from one file"
# the guide's preset on a task it does not ship: PointMaze's ball driven to its goal
ANOTHER_TASK = {
    "env_id: FetchReach-v4": "env_id: PointMaze_Open-v3",
    "expert_config: {gain: 10.0}": "expert_config: {gain: 1.0, goal_dims: [0, 1]}",
    "success_key: is_success": "success_key: success",
}
TINY = {  # appended to each of the guide's commands
    "collect": ["--episodes", "3"],
    "train": ["steps=10", "eval_every=10", "eval_episodes=1", "batch_size=8", "warmup_steps=1"],
    "report": [],
    "eval": ["--episodes", "1"],
    "search": ["--episodes", "1", "--method", "grid", "--step", "1.0", "confirm=1"],
}


def test_the_guide_recipe_runs_end_to_end_on_a_task_it_does_not_ship(
    fetch, scratch_folder, capsys
) -> None:
    """The external-task recipe as the guide writes it, at tiny sizes: its preset (on
    PointMaze_Open), collect, train with evaluation, report, eval of the best checkpoint,
    search with its confirmation."""
    from robocompose.cli import main
    from tests.viz.test_doc_recipes import doc_commands

    preset = _guide_block("A preset of your own goes in", "yaml")
    for written, other in ANOTHER_TASK.items():
        assert written in preset
        preset = preset.replace(written, other)
    (scratch_folder / "DIR" / "task").mkdir(parents=True)
    (scratch_folder / "DIR" / "task" / "MyReach.yaml").write_text(preset)
    commands = doc_commands(GUIDE, RECIPE)
    assert [c[1] for c in commands] == ["collect", "train", "train", "report", "eval", "search"]
    try:
        for command in commands:
            main([*command[1:], *TINY[command[1]]])
    finally:
        EXTERNAL_TASKS.pop("MyReach", None)
    printed = capsys.readouterr().out
    assert "best by eval success: ckpt/my_flow/best (step " in printed
    assert (scratch_folder / "ckpt" / "my_flow" / "curves.png").is_file()
    record = json.loads((scratch_folder / "runs" / "my_search" / "search.json").read_text())
    assert record["task"]["name"] == "MyReach" and "confirm" in record["result"]

"""A robomimic-layout file from another suite (its `env_args` name an env nobody registered):
it trains, `eval` says which env is missing and how to attach one, and `task=<preset>` on
`eval` or `train` runs the checkpoint on that task."""

from __future__ import annotations

import json

import numpy as np
import pytest

from robocompose.cli import main
from robocompose.policies.checkpoint import load_policy
from robocompose.sim.hdf5_dataset import DemoWriter

FOREIGN_ENV = "OtherSuite/Lift-v9"


@pytest.fixture(scope="module")
def foreign(tmp_path_factory) -> str:
    """Two demos shaped like PushT's (state 6, action 2) under an env name of another suite."""
    path = tmp_path_factory.mktemp("foreign") / "lift.hdf5"
    rng = np.random.default_rng(0)
    with DemoWriter(path, FOREIGN_ENV, {"robots": ["Panda"]}) as writer:
        for _ in range(2):
            obs = {"state": rng.normal(size=(24, 6))}
            writer.add_episode(obs, rng.uniform(-0.2, 0.2, (24, 2)), np.zeros(24))
    return str(path)


def _train(dataset: str, out, *extra: str) -> None:
    args = ["policy=flow_mlp", "steps=2", "batch_size=8", "warmup_steps=1", "torch_threads=1"]
    main(["train", f"dataset={dataset}", f"out={out}", *args, *extra])


def _eval(checkpoint, out, *extra: str) -> list[dict]:
    main(["eval", str(checkpoint), "--episodes", "1", "--out", str(out), *extra])
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_eval_names_the_missing_env_and_task_attaches_one(foreign, tmp_path) -> None:
    with pytest.warns(UserWarning, match=f"runs on env '{FOREIGN_ENV}', which is not a registered"):
        _train(foreign, tmp_path / "a")
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", str(tmp_path / "a"), "--episodes", "1", "--out", str(tmp_path / "x.jsonl")])
    message = str(exit_info.value.code)
    assert message.startswith(
        f"robocompose eval: error: {tmp_path / 'a'} (trained on {foreign}) runs on env "
        f"'{FOREIGN_ENV}', which is not a registered gymnasium env"
    )
    assert "`task=<preset>`" in message and "\n" not in message
    records = _eval(tmp_path / "a", tmp_path / "a.jsonl", "task=PushT")
    assert [r["env_id"] for r in records] == ["robocompose/PushT-v0:a"]
    assert load_policy(tmp_path / "a").metadata["task"] == FOREIGN_ENV  # eval changed no file


def test_train_with_a_task_records_it_and_a_registered_env_is_never_replaced(
    foreign, tmp_path
) -> None:
    _train(foreign, tmp_path / "b", "task=PushT")
    assert load_policy(tmp_path / "b").metadata["task"] == "robocompose/PushT-v0"
    records = _eval(tmp_path / "b", tmp_path / "b.jsonl")
    assert [r["env_id"] for r in records] == ["robocompose/PushT-v0:b"]
    with pytest.raises(SystemExit, match="runs on robocompose/PushT-v0, a registered env; "):
        _eval(tmp_path / "b", tmp_path / "c.jsonl", "task=Stack")


def test_a_preset_of_ones_own_attaches_an_external_env_that_later_runs_alone(tmp_path) -> None:
    """task= from --config-dir: the checkpoint records the preset's external block, so eval in
    a process that never read the preset rebuilds the env."""
    pytest.importorskip("gymnasium_robotics", reason="the `external` extra is not installed")
    from robocompose.sim.tasks import EXTERNAL_TASKS

    rng = np.random.default_rng(1)
    with DemoWriter(tmp_path / "reach.hdf5", FOREIGN_ENV) as writer:  # FetchReach's shapes
        for _ in range(2):
            obs = {"state": rng.normal(size=(24, 13))}
            writer.add_episode(obs, rng.uniform(-1, 1, (24, 4)), np.zeros(24))
    (tmp_path / "cfg" / "task").mkdir(parents=True)
    (tmp_path / "cfg" / "task" / "OwnFetch.yaml").write_text(
        "name: OwnFetch\ndataset: unused.hdf5\ndemos: 2\n"
        "external: {env_id: FetchReach-v4, imports: [gymnasium_robotics], adapter: {kind: goal}}\n"
    )
    try:
        _train(
            tmp_path / "reach.hdf5", tmp_path / "c", f"--config-dir={tmp_path}/cfg", "task=OwnFetch"
        )
    finally:
        EXTERNAL_TASKS.pop("OwnFetch", None)  # what a new process knows: only the checkpoint
    try:
        records = _eval(tmp_path / "c", tmp_path / "c.jsonl")
    finally:
        EXTERNAL_TASKS.pop("OwnFetch", None)
    assert [r["env_id"] for r in records] == ["robocompose/OwnFetch-v0:c"]
    metadata = load_policy(tmp_path / "c").metadata
    EXTERNAL_TASKS.pop("OwnFetch", None)
    assert metadata["env_kwargs"]["external"]["env_id"] == "FetchReach-v4"

"""Episodes that cannot count: eval and compose fail when episodes errored (saying how many and
the first error), and every verb that takes seeds refuses a negative one before running."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from robocompose.cli import main
from robocompose.evaluation import evaluate
from robocompose.policies.checkpoint import load_policy, save_policy
from robocompose.policies.config import PolicyConfig
from robocompose.policies.train import TrainConfig, train
from robocompose.sim.collect import collect


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> tuple[Path, Path]:
    """A tiny PushT flow MLP and a copy of it whose weights are NaN (its actions are NaN)."""
    folder = tmp_path_factory.mktemp("ckpt")
    collect("PushT", 1, folder / "pusht.hdf5", progress=False)
    policy = PolicyConfig(family="flow", backbone="mlp")
    config = TrainConfig(
        dataset=str(folder / "pusht.hdf5"),
        out=str(folder / "good"),
        policy=policy,
        steps=2,
        batch_size=4,
        warmup_steps=1,
    )
    good = train(config, progress=False)
    broken = load_policy(good)
    nan = {k: torch.full_like(v, float("nan")) for k, v in broken.state_dict().items()}
    return good, save_policy(broken, folder / "nan", broken.metadata, state_dict=nan)


def test_eval_with_errored_episodes_exits_nonzero_naming_count_and_first_error(
    checkpoints: tuple[Path, Path], tmp_path: Path, capsys
) -> None:
    _, nan = checkpoints
    out = tmp_path / "episodes.jsonl"
    with pytest.raises(
        SystemExit,
        match=r"robocompose eval: error: 2 of 2 episodes errored; the first \(seed 100000\): "
        r".*nan.*Records: .*episodes.jsonl",
    ):
        main(["eval", str(nan), "--episodes", "2", "--out", str(out)])
    assert "2 errors" in capsys.readouterr().out  # the summary still comes first
    assert all(json.loads(line)["error"] for line in out.read_text().splitlines())


def test_compose_with_errored_episodes_exits_nonzero(
    checkpoints: tuple[Path, Path], tmp_path: Path
) -> None:
    good, nan = checkpoints
    with pytest.raises(SystemExit, match=r"robocompose compose: error: 1 of 1 episodes errored"):
        main(["compose", str(good), str(nan), "--episodes", "1", "--out", str(tmp_path)])


@pytest.mark.parametrize(
    "args",
    [
        ["eval", "PushT_flow_mlp"],
        ["compose", "task=PushT"],
        ["search", "task=PushT"],
        ["compare", "PushT_flow_mlp", "PushT_flow_unet"],
        ["collect", "PushT", "--episodes", "1", "--out", "unused.hdf5"],
        ["rewards", "lift the red block 10 cm"],
    ],
)
def test_a_negative_seed_start_is_refused_by_every_verb(args: list[str]) -> None:
    with pytest.raises(SystemExit, match=r"error: `seed_start` must be >= 0 .*Got -5\."):
        main([*args, "--seed-start", "-5"])


def test_evaluate_refuses_negative_seeds(checkpoints: tuple[Path, Path]) -> None:
    good, _ = checkpoints
    with pytest.raises(ValueError, match=r"seeds must be >= 0 .*the first -1"):
        evaluate(good, [3, -1], progress=False)

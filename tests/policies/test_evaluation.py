"""A checkpoint evaluated on a task whose observations it was not trained on is refused up front."""

from __future__ import annotations

import pytest

from robocompose.composition.api import compose, evaluate
from robocompose.policies.checkpoint import load_policy
from robocompose.policies.evaluation import check_observations
from robocompose.policies.runner import PolicyPredictor
from robocompose.sim.tasks import register_tasks

STACK_ON_PUSHT = (
    r"the checkpoint \(trained on robocompose/Stack-v0\) expects observation `state` of shape "
    r"\(19,\); robocompose/PushT-v0 gives shape \(6,\)"
)


def test_stack_checkpoint_on_pusht_names_the_observation_mismatch(tmp_path) -> None:
    stack = load_policy("checkpoints/Stack_flow_mlp")
    with pytest.raises(ValueError, match=STACK_ON_PUSHT):
        evaluate(stack, [0], task="robocompose/PushT-v0", out=tmp_path / "ep.jsonl")
    assert not (tmp_path / "ep.jsonl").exists()  # refused before any episode ran
    pair = compose([stack, load_policy("checkpoints/Stack_flow_mlp_b")], "convex", (0.5, 0.5))
    with pytest.raises(ValueError, match=STACK_ON_PUSHT):
        evaluate(pair, [0], task="robocompose/PushT-v0", progress=False)


def test_own_task_passes_the_check() -> None:
    register_tasks()
    predictor = PolicyPredictor(load_policy("checkpoints/PushT_flow_mlp"))
    check_observations(predictor, "robocompose/PushT-v0", {"obs_keys": ("state",)})
    with pytest.raises(ValueError, match=r"expects observation `state` of shape \(6,\); "
                       r"robocompose/Stack-v0 gives shape \(19,\)"):
        check_observations(predictor, "robocompose/Stack-v0", {"obs_keys": ("state",)})

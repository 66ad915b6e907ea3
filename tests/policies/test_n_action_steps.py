"""`n_action_steps` as an evaluation setting: how many actions of each predicted chunk run before
the policy replans, the trained value by default, refused past the chunk; for single, composed,
merged and served policies alike."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from robocompose.cli import main
from robocompose.composition.api import compose
from robocompose.composition.config import CompositionConfig
from robocompose.evaluation import evaluate
from robocompose.policies.checkpoint import load_policy
from robocompose.policies.runner import PolicyPredictor
from robocompose.real_robot.policy_adapter import load_served_policy
from robocompose.real_robot.serve import ServeConfig
from robocompose.rollout_config import CompositionSpec
from tests.composition.test_composed_policy import _obs, tiny_policy

PUSHT = "PushT_flow_mlp"  # horizon 16, n_obs_steps 2, trained n_action_steps 8
TOO_MANY = (
    r"`n_action_steps` must be in \[1, 15\]: the policy predicts 16 steps \(horizon\) from its "
    r"current step 1 \(n_obs_steps - 1\)\. Got 16\."
)


def test_a_policy_replans_after_the_asked_number_of_actions() -> None:
    policy = load_policy(PUSHT)
    calls = []
    sample = policy.sample

    def counting(obs, steps=None, noise=None):
        calls.append(1)
        return sample(obs, steps, noise)

    policy.sample = counting
    for n in (None, 2):
        calls.clear()
        record = evaluate(policy, [100_000], n_action_steps=n, progress=False).records[0]
        assert len(calls) == math.ceil(record["length"] / (n or 8))
    assert record["policy_id"].endswith("-act2")
    trained = PolicyPredictor(policy, n_action_steps=8).fingerprint()
    assert trained == PolicyPredictor(policy).fingerprint()  # earlier records still match


def test_eval_takes_it_as_a_flag_and_refuses_more_than_the_chunk_holds(tmp_path: Path) -> None:
    out = tmp_path / "episodes.jsonl"
    main(["eval", PUSHT, "--n-action-steps", "4", "--episodes", "1", "--out", str(out)])
    assert json.loads(out.read_text())["policy_id"].endswith("-act4")
    with pytest.raises(SystemExit, match=r"robocompose eval: error: " + TOO_MANY):
        main(["eval", PUSHT, "--n-action-steps", "16", "--episodes", "1", "--out", str(out)])


def _parents():
    """Two tiny flow MLPs (trained n_action_steps 4, horizon 16, n_obs_steps 2)."""
    parents = tiny_policy(0), tiny_policy(1)
    for parent in parents:
        parent.metadata = {}
    return parents


@pytest.mark.parametrize("operator", ["convex", "mixture"])
def test_composed_policies_execute_the_asked_number(operator: str) -> None:
    a, b = _parents()
    for n, expected in ((None, 4), (2, 2), (15, 15)):
        composed = compose([a, b], operator, (0.5, 0.5), n_action_steps=n)
        noise = torch.randn(3, *composed.noise_shape, generator=torch.Generator().manual_seed(0))
        assert composed.predict_actions(_obs(3), noise).shape == (3, expected, 2)
    assert compose([a, b], operator, n_action_steps=2).fingerprint() != composed.fingerprint()
    with pytest.raises(ValueError, match=TOO_MANY):
        compose([a, b], operator, n_action_steps=16)
    with pytest.raises(ValueError, match=r"composition.n_action_steps"):
        evaluate(compose([a, b], operator), [0], n_action_steps=2, task="PushT")


def test_a_merge_executes_the_asked_number_and_leaves_its_parents_alone() -> None:
    a, b = _parents()
    merged = compose([a, b], "merge", (0.5, 0.5), n_action_steps=2)
    assert merged.executed_slice() == slice(1, 3)
    assert a.config.n_action_steps == b.config.n_action_steps == 4


def test_the_setting_at_its_default_leaves_records_as_they_were() -> None:
    """Composition fingerprints and search records hash the config's fields: the new field is
    left out at its default, so episodes logged before it was added still resume."""
    assert "n_action_steps" not in CompositionConfig().as_record()
    assert CompositionConfig(n_action_steps=2).as_record()["n_action_steps"] == 2


def test_served_specs_tell_clients_the_asked_number() -> None:
    assert load_served_policy(PUSHT).spec.n_action_steps == 8
    assert load_served_policy(PUSHT, n_action_steps=3).spec.n_action_steps == 3
    pair = ["PushT_flow_mlp", "PushT_flow_unet"]
    config = ServeConfig(parents=pair, composition=CompositionSpec(n_action_steps=5))
    assert config.served_policy().spec.n_action_steps == 5


@pytest.mark.parametrize("verb", ["compose", "search"])
def test_compose_and_search_take_it_as_a_flag(verb: str, capsys) -> None:
    main([verb, "task=PushT", "--n-action-steps", "2", "--cfg"])
    assert "  n_action_steps: 2\n" in capsys.readouterr().out

"""The one evaluation path on shipped checkpoints: episodes independent of num_envs, of a rerun
and of a resume; batched inference kept apart; observations and devices checked up front."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from robocompose.cli import main
from robocompose.composition.api import compose
from robocompose.composition.api import evaluate as api_evaluate
from robocompose.evaluation import check_observations, evaluate, task_of
from robocompose.interrupt import ResumableInterrupt
from robocompose.policies.checkpoint import load_policy
from robocompose.policies.runner import PolicyPredictor
from robocompose.records import EvalResult
from robocompose.verbs import demo
from robocompose.verbs.demo import DemoConfig

PUSHT = "PushT_flow_unet"  # a UNet: batched inference rounds differently per batch
SHORT_SEEDS = [100_005, 100_011, 100_013]  # its episodes of 59-89 steps
OUTCOME = ("success", "score", "return", "length", "error")
STACK_ON_PUSHT = (
    r"the checkpoint \(trained on robocompose/Stack-v0\) expects observation `state` of shape "
    r"\(19,\); robocompose/PushT-v0 gives shape \(6,\)"
)


def outcomes(result: EvalResult) -> dict[int, tuple]:
    return {r["seed"]: tuple(r[k] for k in OUTCOME) for r in result.records}


@pytest.fixture(scope="module")
def reference() -> EvalResult:
    """PUSHT on SHORT_SEEDS, one env at a time."""
    return evaluate(PUSHT, SHORT_SEEDS, num_envs=1, progress=False)


def test_num_envs_does_not_change_any_episode(reference: EvalResult) -> None:
    three = evaluate(PUSHT, SHORT_SEEDS, num_envs=3, progress=False)
    assert outcomes(three) == outcomes(reference)
    assert [r["seed"] for r in three.records] == SHORT_SEEDS
    assert {r["batch"] for r in three.records} == {"per-episode"}
    assert reference.env_id == "robocompose/PushT-v0:PushT_flow_unet"  # label: the folder


def test_inference_runs_on_one_thread_whatever_torch_was_set_to(reference: EvalResult) -> None:
    """The caller's thread count changes neither the episodes nor survives the call."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen: list[int] = []
        predictor = PolicyPredictor(load_policy(PUSHT))
        predict = predictor.predict_actions

        def recording(obs, noise):
            seen.append(torch.get_num_threads())
            return predict(obs, noise)

        predictor.predict_actions = recording
        again = evaluate(predictor, SHORT_SEEDS[:1], progress=False)
        assert set(seen) == {1} and torch.get_num_threads() == 2
        assert outcomes(again)[SHORT_SEEDS[0]] == outcomes(reference)[SHORT_SEEDS[0]]
    finally:
        torch.set_num_threads(before)


def test_a_rerun_gives_the_same_episodes(reference: EvalResult) -> None:
    again = evaluate(PUSHT, SHORT_SEEDS, num_envs=1, progress=False)
    assert outcomes(again) == outcomes(reference)


class StopOnceSaved:
    """A real predictor that raises Ctrl-C, as a user would, at its first inference after an
    episode reached `out`: mid-run on any CPU, however its float path shortens the episodes."""

    def __init__(self, predictor: PolicyPredictor, out: Path) -> None:
        self.inner, self.out = predictor, out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def predict_actions(self, obs: dict[str, torch.Tensor], noise: torch.Tensor) -> torch.Tensor:
        if self.out.is_file() and self.out.read_text().strip():
            raise KeyboardInterrupt
        return self.inner.predict_actions(obs, noise)


def test_interrupted_then_resumed_equals_uninterrupted(tmp_path, reference: EvalResult) -> None:
    out = tmp_path / "episodes.jsonl"
    policy = load_policy(PUSHT)
    label = "PushT_flow_unet"
    with pytest.raises(ResumableInterrupt):
        evaluate(
            StopOnceSaved(PolicyPredictor(policy), out),
            SHORT_SEEDS,
            out=out,
            label=label,
            num_envs=2,
            progress=False,
        )
    saved = [json.loads(line)["seed"] for line in out.read_text().splitlines()]
    assert 0 < len(saved) < len(SHORT_SEEDS)  # stopped mid-run, some episodes kept
    resumed = evaluate(policy, SHORT_SEEDS, out=out, label=label, num_envs=3, progress=False)
    assert outcomes(resumed) == outcomes(reference)
    assert len(out.read_text().splitlines()) == len(SHORT_SEEDS)  # nothing ran twice


def test_resume_into_a_file_of_the_other_layout_is_refused(tmp_path) -> None:
    out = tmp_path / "episodes.jsonl"
    stack = "Stack_flow_mlp"
    evaluate(stack, [100_000], out=out, num_envs=2, batch_invariant=False, progress=False)
    assert json.loads(out.read_text())["batch"] == "batched-2"
    with pytest.raises(
        ValueError,
        match=r"episodes run with batched-2 inference, this run uses "
        r"per-episode",
    ):
        evaluate(stack, [100_000, 100_001], out=out, num_envs=2, progress=False)
    with pytest.raises(ValueError, match=r"batched-2 inference, this run uses batched-4"):
        evaluate(stack, [100_001], out=out, num_envs=4, batch_invariant=False, progress=False)
    assert len(out.read_text().splitlines()) == 1  # refused before any episode ran


def test_the_api_evaluate_is_this_one() -> None:
    assert api_evaluate is evaluate


def test_stack_checkpoint_on_pusht_names_the_observation_mismatch(tmp_path) -> None:
    stack = load_policy("Stack_flow_mlp")
    with pytest.raises(ValueError, match=STACK_ON_PUSHT):
        evaluate(stack, [0], task="robocompose/PushT-v0", out=tmp_path / "ep.jsonl")
    assert not (tmp_path / "ep.jsonl").exists()  # refused before any episode ran
    pair = compose([stack, load_policy("Stack_flow_mlp_b")], "convex", (0.5, 0.5))
    with pytest.raises(ValueError, match=STACK_ON_PUSHT):
        evaluate(pair, [0], task="PushT", progress=False)


def test_own_task_passes_the_observation_check() -> None:
    predictor = PolicyPredictor(load_policy("PushT_flow_mlp"))
    check_observations(predictor, "robocompose/PushT-v0", {"obs_keys": ("state",)})
    with pytest.raises(
        ValueError,
        match=r"expects observation `state` of shape \(6,\); "
        r"robocompose/Stack-v0 gives shape \(19,\)",
    ):
        check_observations(predictor, "robocompose/Stack-v0", {"obs_keys": ("state",)})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"device": "gpu"}, r"`device` must be auto, cpu, cuda, cuda:N or mps. Got 'gpu'"),
        ({"steps": 3}, r"`steps`=3 but the composed policy samples in 10 steps"),
    ],
)
def test_bad_settings_are_refused_before_running(kwargs: dict[str, Any], message: str) -> None:
    parents = [load_policy(f"Stack_flow_mlp{s}") for s in ("", "_b")]
    with pytest.raises(ValueError, match=message):
        evaluate(compose(parents, "convex", (0.5, 0.5)), [0], progress=False, **kwargs)


def test_a_predictor_without_parents_needs_a_task() -> None:
    class Bare:
        obs_keys, n_obs_steps, noise_shape = ("state",), 1, (1, 2)

        def predict_actions(self, obs, noise):
            return noise

        def fingerprint(self) -> str:
            return "bare"

    with pytest.raises(ValueError, match=r"Bare names no parent policy .* pass `task=`"):
        evaluate(Bare(), [0], progress=False)
    with pytest.raises(ValueError, match=r"`steps`=4 applies to a checkpoint .* a Bare chooses"):
        evaluate(Bare(), [0], task="PushT", steps=4, progress=False)


@pytest.mark.parametrize("operator", ["convex", "merge"])
def test_parents_of_different_tasks_are_refused_naming_each_task(operator: str) -> None:
    parents = [load_policy(n) for n in ("PushT_flow_mlp", "Stack_flow_mlp")]
    with pytest.raises(ValueError) as refused:
        compose(parents, operator, (0.5, 0.5))
    assert str(refused.value) == (
        "the parents come from different tasks: PushT_flow_mlp (robocompose/PushT-v0), "
        "Stack_flow_mlp (robocompose/Stack-v0); composition needs parents of one task."
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_the_configs_device_reaches_the_evaluation(tmp_path) -> None:
    with pytest.raises(
        SystemExit,
        match=r"robocompose eval: error: `device`='cuda': this machine "
        r"has 0 CUDA device\(s\)",
    ):
        main(
            [
                "eval",
                "Stack_flow_mlp",
                "--episodes",
                "1",
                "device=cuda",
                "--out",
                str(tmp_path / "ep.jsonl"),
            ]
        )
    with pytest.raises(ValueError, match=r"`device`='cuda': this machine has 0 CUDA"):
        demo.run(DemoConfig(episodes=1, out=str(tmp_path), device="cuda"))
    assert not list(tmp_path.rglob("*.jsonl"))  # refused before any episode ran


def test_a_state_parent_first_still_gets_the_image_parents_env() -> None:
    """The env must render what every parent was trained on, not only the first parent."""
    state, image = (load_policy(f"PickPlace_{k}") for k in ("diffusion_unet", "image_flow"))
    env_id, kwargs = task_of(compose([state, image], "convex", (0.5, 0.5)))
    assert env_id == "robocompose/PickPlace-v0"
    assert kwargs == {"image_size": 64, "obs_keys": ("state", "proprio", "image")}
    other = load_policy("PickPlace_image_flow")
    other.metadata = {**other.metadata, "env_kwargs": {"image_size": 96}}
    with pytest.raises(
        ValueError,
        match=r"the parents need different envs: PickPlace_image_flow was trained with "
        r"image_size=64, PickPlace_image_flow with image_size=96",
    ):
        task_of(compose([image, other], "convex", (0.5, 0.5)))

"""Watching training on tiny real runs: TensorBoard curves, resumed curves, evaluation while
training, mixed precision, a damaged training state, and `robocompose report`."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys

import matplotlib.image
import pytest
import torch
from safetensors.torch import load_file

from robocompose.cli import load_verb_config, main
from robocompose.evaluation import training_success
from robocompose.policies.checkpoint import load_policy
from robocompose.policies.config import PolicyConfig
from robocompose.policies.train import TrainConfig, learning_rate, train
from robocompose.policies.train_curves import read_scalars, write_report
from robocompose.policies.train_monitor import BEST
from robocompose.policies.train_state import STATE_JSON, STATE_TENSORS
from robocompose.sim.collect import collect

TRAIN_TAGS = ("train/loss", "train/grad_norm", "train/lr", "train/steps_per_s")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "pusht.hdf5"
    collect("PushT", 1, path, progress=False)
    return path


def tiny(dataset, out, **fields) -> TrainConfig:
    policy = PolicyConfig(family="flow", backbone="mlp")
    base = dict(steps=6, batch_size=4, warmup_steps=1, log_every=2, checkpoint_every=2)
    base["device"] = "cpu"
    return TrainConfig(dataset=str(dataset), out=str(out), policy=policy, **(base | fields))


def test_cli_train_says_where_curves_go_and_logs_four_scalars(dataset, tmp_path, capsys) -> None:
    out = tmp_path / "run"
    args = [f"dataset={dataset}", f"out={out}", "policy=flow_mlp", "steps=5", "batch_size=4"]
    main(["train", *args, "warmup_steps=1", "log_every=2", "device=cpu"])
    printed = capsys.readouterr().out
    assert f"{out / 'tensorboard'}/" in printed and f"robocompose report {out}" in printed
    assert f"checkpoint: {out}" in printed

    curves = read_scalars(out)
    assert set(curves) == set(TRAIN_TAGS)
    for tag in TRAIN_TAGS:  # every log_every steps, and the last step
        assert curves[tag][0] == [2, 4, 5]
        assert all(math.isfinite(v) and v > 0 for v in curves[tag][1])
    config = TrainConfig(**{**vars(tiny(dataset, out)), "steps": 5})
    expected_lr = [learning_rate(config, step - 1) for step in (2, 4, 5)]
    assert curves["train/lr"][1] == pytest.approx(expected_lr, rel=1e-6)


def test_curves_follow_the_order_the_files_were_written_past_a_tenth_writer(tmp_path) -> None:
    """A process's 10th writer ("...pid.10") sorts by name before its 9th; a resumed run's file
    must still replace the steps it redid, not be replaced by them."""
    from torch.utils.tensorboard import SummaryWriter

    for first, values, name in ((1, [1.0, 2.0, 3.0], "9"), (3, [30.0, 40.0], "10")):
        folder = tmp_path / name
        with SummaryWriter(str(folder), purge_step=first) as writer:
            for step, value in enumerate(values, start=first):
                writer.add_scalar("train/loss", value, step)
        (written,) = folder.iterdir()
        written.rename(tmp_path / f"events.out.tfevents.1795899503.my.host.4242.{name}")
    assert read_scalars(tmp_path)["train/loss"] == ([1, 2, 3, 4], [1.0, 2.0, 30.0, 40.0])


def test_resumed_curve_continues_without_duplicates(dataset, tmp_path) -> None:
    whole = tmp_path / "whole"
    train(tiny(dataset, whole), progress=False)

    out = tmp_path / "resumed"
    train(tiny(dataset, out), progress=False, stop_at_step=2)
    saved = tmp_path / "state_at_2"
    saved.mkdir()
    for name in (STATE_TENSORS, STATE_JSON):
        shutil.copy(out / name, saved / name)
    train(tiny(dataset, out), progress=False, stop_at_step=4)
    # a kill after step 4's curve point but before its checkpoint: the state is still step 2
    for name in (STATE_TENSORS, STATE_JSON):
        shutil.copy(saved / name, out / name)
    train(tiny(dataset, out), progress=False)

    resumed, reference = read_scalars(out), read_scalars(whole)
    for tag in ("train/loss", "train/grad_norm", "train/lr"):
        assert resumed[tag][0] == [2, 4, 6]
        assert resumed[tag][1] == pytest.approx(reference[tag][1], rel=1e-5)


def test_eval_while_training_logs_success_and_trains_the_same_weights(dataset, tmp_path) -> None:
    plain, evaluated = tmp_path / "plain", tmp_path / "evaluated"
    train(tiny(dataset, plain, steps=4), progress=False)
    train(
        tiny(dataset, evaluated, steps=4, eval_every=2, eval_episodes=2),
        progress=False,
        evaluator=training_success,
    )

    assert load_file(plain / STATE_TENSORS).keys() == load_file(evaluated / STATE_TENSORS).keys()
    for key, tensor in load_file(plain / STATE_TENSORS).items():
        assert torch.equal(tensor, load_file(evaluated / STATE_TENSORS)[key]), key
    curves = read_scalars(evaluated)
    assert "eval/success" not in read_scalars(plain)
    steps, success = curves["eval/success"]
    assert steps == [2, 4]
    assert curves["eval/episodes"][1] == [2, 2]
    for low, rate, high in zip(
        curves["eval/success_ci_low"][1], success, curves["eval/success_ci_high"][1], strict=True
    ):
        assert 0.0 <= low <= rate <= high <= 1.0 and high - low > 0.3  # two episodes: wide


def test_evaluating_while_training_needs_the_evaluation_handed_in(dataset, tmp_path) -> None:
    """Training sits below evaluation, so `eval_every` without an evaluator is refused up front
    (the train verb hands in `training_success`)."""
    with pytest.raises(ValueError, match="needs an evaluator"):
        train(tiny(dataset, tmp_path / "run", steps=4, eval_every=2), progress=False)


def test_report_writes_a_png_with_the_task_and_refuses_a_folder_without_events(
    dataset, tmp_path, capsys
) -> None:
    out = tmp_path / "run"
    train(
        tiny(dataset, out, steps=4, eval_every=4, eval_episodes=1),
        progress=False,
        evaluator=training_success,
    )
    main(["report", str(out)])
    assert capsys.readouterr().out.splitlines()[-1] == f"plot: {out / 'curves.png'}"
    image = matplotlib.image.imread(out / "curves.png")
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    assert image.std() > 0  # something drawn, not a blank canvas

    elsewhere = tmp_path / "plots" / "mine.png"
    assert write_report(out, elsewhere) == elsewhere
    assert elsewhere.stat().st_size > 0

    empty = tmp_path / "not_a_run"
    empty.mkdir()
    with pytest.raises(SystemExit, match=rf"report: error: {empty}: no TensorBoard event files"):
        main(["report", str(empty)])
    with pytest.raises(ValueError, match="predates training curves, or it is not a training run"):
        write_report(empty)


def test_bf16_autocast_on_cpu_trains_with_finite_loss(dataset, tmp_path) -> None:
    out = tmp_path / "bf16"
    train(tiny(dataset, out, steps=4, amp="bf16"), progress=False)
    losses = read_scalars(out)["train/loss"][1]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses)
    weights = load_file(out / "model.safetensors")
    assert all(v.dtype == torch.float32 and v.isfinite().all() for v in weights.values())


def test_amp_and_device_refusals(dataset, tmp_path) -> None:
    with pytest.raises(ValueError, match=r"`amp` must be one of \['off', 'bf16', 'fp16'\].*'fp8'"):
        tiny(dataset, tmp_path, amp="fp8")
    with pytest.raises(ValueError, match=r"`amp`='fp16' needs a CUDA device.*on cpu"):
        train(tiny(dataset, tmp_path / "fp16", amp="fp16"), progress=False)
    with pytest.raises(ValueError, match=r"`device`='meta' holds no data"):
        tiny(dataset, tmp_path, device="meta")
    with pytest.raises(ValueError, match=r"`grad_clip` must be > 0"):
        tiny(dataset, tmp_path, grad_clip=0.0)


def test_grad_clip_bounds_the_update_and_logs_the_norm_before_it(dataset, tmp_path) -> None:
    """After one AdamW step the first moment is (1 - beta1) * the gradient it was given."""
    norms = {}
    for name, clip in (("free", None), ("clipped", 1e-3)):
        out = tmp_path / name
        train(tiny(dataset, out, steps=1, log_every=1, grad_clip=clip), progress=False)
        moments = [v for k, v in load_file(out / STATE_TENSORS).items() if k.endswith("exp_avg")]
        norms[name] = torch.linalg.vector_norm(torch.stack([m.norm() for m in moments])).item()
        logged = read_scalars(out)["train/grad_norm"][1]
        assert len(logged) == 1
        norms[f"{name}_logged"] = logged[0]
    assert norms["clipped_logged"] == pytest.approx(norms["free_logged"], rel=1e-5)
    assert norms["free"] == pytest.approx(0.1 * norms["free_logged"], rel=1e-4)
    assert norms["clipped"] == pytest.approx(0.1 * 1e-3, rel=1e-3)


@pytest.mark.parametrize("damage", ["truncated", "empty"])
def test_damaged_train_state_names_the_file_and_what_to_do(dataset, tmp_path, damage) -> None:
    out = tmp_path / "run"

    def args(steps: int) -> list[str]:
        fields = f"policy=flow_mlp steps={steps} batch_size=4 warmup_steps=1 device=cpu"
        return [f"dataset={dataset}", f"out={out}", *fields.split()]

    main(["train", *args(2)])
    state = out / STATE_TENSORS
    state.write_bytes(state.read_bytes()[:100] if damage == "truncated" else b"")

    with pytest.raises(SystemExit, match=rf"train: error: {state}: not a readable safetensors"):
        main(["train", *args(4)])
    with pytest.raises(ValueError, match=rf"{state}: not a readable safetensors file") as error:
        train(load_verb_config("train", args(4)), progress=False)
    assert f"Delete {state} and {out / STATE_JSON}" in str(error.value)
    assert "another `out`" in str(error.value)

    state.unlink()
    (out / STATE_JSON).unlink()
    train(load_verb_config("train", args(4)), progress=False)  # what the message advises
    assert json.loads((out / STATE_JSON).read_text())["step"] == 4
    assert read_scalars(out)["train/loss"][0] == [4]  # the restart's curve, not both runs'


def test_a_run_saved_before_the_new_fields_resumes(dataset, tmp_path) -> None:
    out = tmp_path / "run"
    config = tiny(dataset, out, steps=2)
    train(config, progress=False)
    document = json.loads((out / STATE_JSON).read_text())
    for name in ("grad_clip", "log_every", "eval_every", "eval_episodes", "amp"):
        del document["config"][name]
    (out / STATE_JSON).write_text(json.dumps(document))
    train(TrainConfig(**{**vars(config), "steps": 3}), progress=False)
    assert json.loads((out / STATE_JSON).read_text())["step"] == 3


def test_train_config_imports_without_torch() -> None:
    code = (
        "import sys, robocompose.policies.train_config; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    from robocompose.policies import train_config

    assert TrainConfig is train_config.TrainConfig


def test_the_best_evaluated_checkpoint_is_kept_beside_the_last(dataset, tmp_path, capsys) -> None:
    """An untrained policy never pushes the T home: its first evaluation (0%) is the best, and
    a later one of equal success, in this session or a resumed one, does not replace it."""
    out = tmp_path / "run"
    train(
        tiny(dataset, out, steps=4, eval_every=2, eval_episodes=1),
        progress=False,
        evaluator=training_success,
    )
    train(
        tiny(dataset, out, steps=6, eval_every=2, eval_episodes=1),
        progress=False,
        evaluator=training_success,
    )
    best = load_policy(out / BEST)
    assert best.metadata["best"] == {"step": 2, "success": 0.0, "episodes": 1}
    assert best.metadata["step"] == 2 and load_policy(out).metadata["step"] == 6
    main(["eval", str(out / BEST), "--episodes", "1", "--out", str(tmp_path / "best.jsonl")])
    assert "robocompose/PushT-v0:best: " in capsys.readouterr().out

"""`robocompose view`: recordings written to .rrd and read back with Rerun's own reader."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("rerun")

from robocompose.cli import main  # noqa: E402
from robocompose.composition.api import compose  # noqa: E402
from robocompose.evaluation import evaluate  # noqa: E402
from robocompose.policies.checkpoint import load_policy  # noqa: E402
from robocompose.policies.runner import PolicyPredictor  # noqa: E402
from robocompose.viz.denoising import composed_path, first_observation, policy_path  # noqa: E402
from robocompose.viz.episodes import record_episodes  # noqa: E402
from robocompose.viz.recording import close_recording, open_recording, row_counts  # noqa: E402

FLOW = "Stack_flow_mlp"
DIFFUSION = "Stack_diffusion_mlp"
ENV = "robocompose/Stack-v0"


def test_recorded_episode_is_the_one_eval_scores_and_reads_back(tmp_path):
    policy = load_policy(FLOW)
    kwargs = {"obs_keys": list(policy.config.obs_keys)}
    stream = open_recording(tmp_path / "run.rrd", "test")
    try:
        [summary] = record_episodes(stream, PolicyPredictor(policy), ENV, kwargs, [100_000])
    finally:
        close_recording(stream)
    [record] = evaluate(policy, [100_000], progress=False).records
    assert (summary.success, summary.length) == (record["success"], record["length"])
    assert summary.score == pytest.approx(record["score"])
    counts = row_counts(tmp_path / "run.rrd")
    steps = summary.length
    assert counts["/seed_100000/camera"] == steps + 1  # and the last frame
    for entity in ("action", "obs/state", "success"):
        assert counts[f"/seed_100000/{entity}"] == steps
    assert counts["/seed_100000/chunk"] == summary.chunks == -(-steps // 8)  # 8 actions a chunk
    assert counts["/seed_100000/outcome"] == counts["/seed_100000/executed"] == 1


def test_denoising_paths_end_at_the_samplers_own_chunks():
    flow, diffusion = load_policy(FLOW), load_policy(DIFFUSION)
    obs = first_observation(ENV, {"obs_keys": ["state"]}, 3, ("state",), 2)
    noise = torch.randn((1, *flow.chunk_shape(1)[1:]), generator=torch.Generator().manual_seed(3))
    path = policy_path(flow, obs, noise, 10)
    assert len(path) == 10
    np.testing.assert_allclose(path[-1][1], flow.sample(obs, 10, noise)[0].numpy(), atol=1e-5)
    composed = compose([diffusion, flow], "convex", (0.5, 0.5))
    path = composed_path(composed, obs, noise)
    chunk = diffusion.action_normalizer.unnormalize(composed.sample_normalized(obs, noise))
    np.testing.assert_allclose(path[-1][1], chunk[0].numpy(), atol=1e-5)


def test_view_cli_records_each_parent_and_the_composition(tmp_path, capsys):
    out = tmp_path / "denoise.rrd"
    main(["view", "--denoising", DIFFUSION, FLOW, "--seed", "3", "--save", str(out)])
    assert "composed: 10 denoising steps at seed 3" in capsys.readouterr().out
    counts = row_counts(out)
    for name in ("Stack_diffusion_mlp", "Stack_flow_mlp", "composed"):
        assert counts[f"/denoising/{name}/x0_hat"] == 10
        assert counts[f"/denoising/{name}/sigma"] == 10


def test_view_refuses_a_save_path_that_is_not_rrd(tmp_path):
    with pytest.raises(SystemExit, match=r"`save` must name an \.rrd file"):
        main(["view", FLOW, "--save", str(tmp_path / "run.mp4")])


def test_deploy_viewer_rerun_records_commands_measurements_and_clamps(tmp_path):
    out = tmp_path / "run"
    main(
        [
            "deploy",
            "twin",
            "--episodes",
            "1",
            "--out",
            str(out),
            "--rate-hz",
            "20",
            "episode_s=0.6",
            "time_scale=3",
            "viewer=rerun",
            f"viewer_save={tmp_path / 'live.rrd'}",
            "safety.max_step_m=0.002",  # tight: the safety layer clamps
        ]
    )
    counts = row_counts(tmp_path / "live.rrd")
    lines = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    ticks = sum(line["kind"] == "step" for line in lines)  # a late loop skips ticks
    assert ticks >= 6
    for entity in ("measured", "clamps", "obs/state", "space/measured"):
        assert counts[f"/seed_100000/{entity}"] == ticks
    sent = sum(line.get("sent") is not None for line in lines)
    assert counts["/seed_100000/command/sent"] == sent > 0
    assert counts["/seed_100000/safety"] > 0  # the clamps, each with its reason
    assert counts["/seed_100000/outcome"] == 1


def test_view_without_a_screen_says_to_save_a_file(monkeypatch):
    from robocompose.viz.recording import open_recording

    monkeypatch.setattr("sys.platform", "linux")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(ValueError, match="--save FILE.rrd"):
        open_recording(None, "run")

"""A composed policy times each parent on the calls it makes anyway: the actions are those of an
untimed run, every path (in turn, on threads, fused, the mixture) is counted, and `compose` and
`search` tell the user what each parent cost per chunk."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from robocompose.cli import main
from robocompose.composition.api import compose, search
from robocompose.composition.timing import ParentTimes
from robocompose.policies.checkpoint import load_policy
from robocompose.sim.tasks import make_env

STEPS = 3
ROWS = 2
UNET, MLP, MLP_B = "Stack_diffusion_unet", "Stack_flow_mlp", "Stack_flow_mlp_b"
PATHS = {  # operator, parents, settings
    "in turn": ("convex", (UNET, MLP), {"fuse": False}),
    "threads": ("convex", (UNET, MLP), {"fuse": False, "parallel": True}),
    "fused": ("convex", (MLP, MLP_B), {"fuse": True}),
    "mixture": ("mixture", (UNET, MLP), {}),
}
COST_LINE = re.compile(
    r"inference per chunk \((\d+) chunks this run\): (\S+) [\d.]+ ms \(encoder [\d.]+\), "
    r"(\S+) [\d.]+ ms \(encoder [\d.]+\); total [\d.]+ ms with the operator and sampler"
)


def history(n_obs_steps: int) -> dict[str, torch.Tensor]:
    """ROWS copies of a real Stack observation, as the runner batches it."""
    env = make_env("Stack")
    obs, _ = env.reset(seed=100_000)
    env.close()
    state = torch.as_tensor(np.stack([obs["state"]] * n_obs_steps), dtype=torch.float32)
    return {"state": state.expand(ROWS, *state.shape).clone()}


def composed(path: str):
    operator, names, settings = PATHS[path]
    parents = [load_policy(n) for n in names]
    return compose(parents, operator, (0.5, 0.5), steps=STEPS, **settings)


@pytest.mark.parametrize("path", list(PATHS))
def test_timing_changes_no_action(path: str) -> None:
    policy = composed(path)
    obs, noise = history(policy.n_obs_steps), torch.randn(ROWS, *policy.noise_shape)
    timed = policy.predict_actions(obs, noise)
    assert policy.times.chunks == ROWS
    policy.times = ParentTimes(policy.times.names, enabled=False)
    untimed = policy.predict_actions(obs, noise)
    assert policy.times.chunks == 0  # nothing was counted
    assert torch.equal(timed, untimed)


def test_each_path_counts_what_each_parent_ran() -> None:
    ran = {}
    for path in PATHS:
        policy = composed(path)
        policy.predict_actions(history(policy.n_obs_steps), torch.randn(ROWS, *policy.noise_shape))
        ran[path] = policy.times
    for path in ("in turn", "threads"):  # one batched call per parent per step
        assert ran[path].denoise_calls == [STEPS, STEPS] and ran[path].chunks_of == [ROWS, ROWS]
        assert ran[path].fused_calls == 0
    assert ran["threads"].parallel and "their times overlap" in ran["threads"].summary()
    assert not ran["in turn"].parallel and "overlap" not in ran["in turn"].summary()
    fused = ran["fused"]
    assert fused.denoise_calls == [0, 0] and fused.fused_calls == STEPS
    assert fused.chunks_of == [ROWS, ROWS]  # each still encodes its observations
    assert "their fused networks" in fused.summary() and "not separable" in fused.summary()
    mixture = ran["mixture"]
    assert sum(mixture.chunks_of) == ROWS and mixture.denoise_calls == [0, 0]
    assert mixture.encode_s == [0, 0]  # a drawn parent samples alone: its whole cost counts


def test_compose_says_what_each_parent_costs_per_chunk(tmp_path: Path, capsys) -> None:
    args = ["compose", UNET, MLP, "--episodes", "1"]
    args += ["--steps", "1", "--out", str(tmp_path)]
    main(args)
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("inference"))
    match = COST_LINE.fullmatch(line)
    assert match is not None, line
    chunks, first, second = match.groups()
    assert (first, second) == (UNET, MLP) and int(chunks) > 0
    main(args)  # every episode is read back from the log: nothing to time
    assert "inference per chunk: none inferred in this run" in capsys.readouterr().out


def test_search_adds_up_every_candidates_chunks(tmp_path: Path, capsys) -> None:
    parents = [UNET, MLP]
    tiny = {"method": "grid", "step": 1.0, "steps": 1, "num_envs": 1, "progress": False}
    result = search(parents, [100_000], out_dir=tmp_path / "api", **tiny)
    times = result.times
    assert times is not None and times.names == [UNET, MLP]
    assert times.chunks > 0 and times.chunks_of == [times.chunks, times.chunks]
    args = ["search", *parents, "--method", "grid", "--step", "1.0", "--episodes", "1"]
    main([*args, "--out", str(tmp_path / "cli"), "composition.steps=1", "num_envs=1", "confirm=0"])
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("inference"))
    assert COST_LINE.fullmatch(line) is not None, line

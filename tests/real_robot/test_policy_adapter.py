"""Served policies in-process: specs, seeded noise, RTC prefixes on real checkpoints, merges."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robocompose.policies.runner import _noise_seed
from robocompose.real_robot.obs_check import ObservationError, check_observation
from robocompose.real_robot.policy_adapter import EpisodeNoise, load_served_policy
from robocompose.real_robot.rtc import PrefixGuidance
from robocompose.shipped import shipped_path

# two flow MLPs of one architecture (merge needs that), trained on halves of one file
TWO_CUBES_FLOWS = [shipped_path("PickPlaceTwoCubes", k) for k in ("flow_mlp", "flow_mlp_b")]


def obs_for(spec, value=0.1, **extra):
    obs = {k: np.full((spec.n_obs_steps, *s.shape), value, s.dtype) for k, s in spec.obs.items()}
    return check_observation(obs | extra, spec)


def test_episode_noise_is_the_runners_stream():
    stream = torch.Generator().manual_seed(_noise_seed(0, 42))
    expected = [torch.randn((16, 4), generator=stream) for _ in range(3)]
    noise = EpisodeNoise((16, 4))
    torch.testing.assert_close(noise.draw(42), expected[0], rtol=0, atol=0)
    torch.testing.assert_close(noise.draw(42), expected[1], rtol=0, atol=0)  # continues
    torch.testing.assert_close(noise.draw(42, 0), expected[0], rtol=0, atol=0)  # rewinds
    torch.testing.assert_close(noise.draw(42, 2), expected[2], rtol=0, atol=0)  # skips ahead
    noise.reset()
    torch.testing.assert_close(noise.draw(42), expected[0], rtol=0, atol=0)
    assert not torch.equal(noise.draw(None), noise.draw(None))


def test_interleaved_episodes_each_keep_their_stream():
    """A fleet: two episodes' requests interleaved draw each episode's own stream; a request
    without chunk_index after another seed's starts its episode again, as before."""
    expected = {}
    for seed in (1, 2):
        stream = torch.Generator().manual_seed(_noise_seed(0, seed))
        expected[seed] = [torch.randn((16, 4), generator=stream) for _ in range(3)]
    noise = EpisodeNoise((16, 4))
    for index in range(3):
        for seed in (1, 2):
            torch.testing.assert_close(
                noise.draw(seed, index), expected[seed][index], rtol=0, atol=0
            )
    torch.testing.assert_close(noise.draw(1), expected[1][0], rtol=0, atol=0)


def test_diffusion_spec_and_hard_prefix():
    """A v-prediction DDPM (Stack's MLP): its RTC path runs Euler in sigma space on its DDIM
    grid, pins the committed prefix and stays near the native DDIM chunk elsewhere."""
    checkpoint = shipped_path("Stack", "diffusion_mlp")
    served = load_served_policy(checkpoint, guidance=PrefixGuidance("hard"))
    spec, cfg = served.spec, served.policy.config
    assert spec.chunk_length == cfg.horizon - cfg.n_obs_steps + 1
    assert spec.n_action_steps == cfg.n_action_steps and spec.control_hz == 10.0
    native = served.infer(obs_for(spec, seed=5))["actions"]
    prefix = native[:3] + 0.01
    guided = served.infer(obs_for(spec, seed=5, chunk_index=0, prefix_actions=prefix))["actions"]
    np.testing.assert_allclose(guided[:3], prefix, atol=1e-5)
    assert np.abs(guided[3:] - native[3:]).max() < 0.1  # a nearby chunk, not a jump


def test_flow_soft_prefix_pins_the_committed_and_leans_toward_the_rest():
    served = load_served_policy(shipped_path("PickPlace", "flow_mlp"))
    native = served.infer(obs_for(served.spec, seed=9))["actions"]
    old = native[:6] + np.array([0.03, -0.03, 0.02, 0.0], np.float32)  # the previous chunk
    request = obs_for(served.spec, seed=9, chunk_index=0, prefix_actions=old, prefix_committed=3)
    guided = served.infer(request)["actions"]
    np.testing.assert_allclose(guided[:3], old[:3], atol=1e-5)
    assert np.abs(guided[3:6] - old[3:6]).mean() < np.abs(native[3:6] - old[3:6]).mean()


def test_merged_pair_is_served():
    served = load_served_policy(parents=TWO_CUBES_FLOWS, operator="merge")
    assert served.spec.extra["policy"].startswith("merge")
    assert served.infer(obs_for(served.spec, seed=1))["actions"].shape == (15, 4)


def test_mixture_serves_its_executed_actions_and_refuses_a_prefix():
    served = load_served_policy(parents=TWO_CUBES_FLOWS, operator="mixture")
    assert served.spec.chunk_length == served.spec.n_action_steps == 8
    assert served.infer(obs_for(served.spec, seed=1))["actions"].shape == (8, 4)
    with pytest.raises(ValueError, match="operator 'mixture' has no single denoiser"):
        served.infer(obs_for(served.spec, prefix_actions=np.zeros((2, 4))))


def test_bad_requests_are_named():
    with pytest.raises(ValueError, match="either `checkpoint` or >= 2 `parents`"):
        load_served_policy()
    with pytest.raises(ValueError, match=">= 2 checkpoints"):
        load_served_policy(parents=[shipped_path("PickPlace", "flow_mlp")])
    served = load_served_policy(shipped_path("PickPlace", "flow_mlp"))
    with pytest.raises(ObservationError, match="`chunk_index` must be an integer"):
        obs_for(served.spec, chunk_index=1.5)
    with pytest.raises(ObservationError, match="`prefix_actions` must be finite"):
        obs_for(served.spec, prefix_actions=np.full((2, 4), np.inf))


def test_a_float64_policy_serves_the_float32_ones_actions():
    """Inputs follow the served policy's device and dtype; replies are always float32."""
    checkpoint = shipped_path("PickPlace", "flow_mlp")
    single = load_served_policy(checkpoint, device="cpu")
    wide = load_served_policy(checkpoint, device="cpu")
    wide.policy.to(torch.float64)
    prefix = np.zeros((3, single.spec.action_dim), np.float32)
    for extra in ({}, {"chunk_index": 0, "prefix_actions": prefix}):
        expected = single.infer(obs_for(single.spec, seed=3, **extra))["actions"]
        got = wide.infer(obs_for(wide.spec, seed=3, **extra))["actions"]
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, expected, atol=1e-4)


def test_serve_refuses_an_unknown_device():
    with pytest.raises(ValueError, match="`device` must be auto, cpu, cuda"):
        load_served_policy(shipped_path("PickPlace", "flow_mlp"), device="gpu")


@pytest.mark.parametrize("name", ["flow_mlp", "diffusion_unet"])
def test_a_batch_matches_each_request_served_alone(name):
    """Batch invariance of `infer_batch` (a fleet on one server): the same noise per request,
    the same chunks to float error; a request with a prefix is sampled alone, bit for bit."""
    served = load_served_policy(shipped_path("PickPlace", name))
    requests = [obs_for(served.spec, 0.02 * i, seed=i, chunk_index=i) for i in range(4)]
    requests.append(obs_for(served.spec, 0.05, seed=9, prefix_actions=np.zeros((3, 4))))
    alone = [served.infer(r)["actions"] for r in requests]
    batched = [reply["actions"] for reply in served.infer_batch(requests)]
    for one, many in zip(alone[:4], batched[:4], strict=True):
        np.testing.assert_allclose(many, one, rtol=0, atol=1e-5)
    np.testing.assert_array_equal(batched[4], alone[4])
    assert np.abs(batched[0] - batched[1]).max() > 1e-3  # each its own noise and observation

"""place_in run by a real shipped PickPlace policy, and how implementations are chosen."""

from __future__ import annotations

import numpy as np
import pytest

from robocompose.hierarchical.learned_skills import (
    PolicySkillConfig,
    pick_place_state,
    registry_for,
)
from robocompose.hierarchical.world import SimWorld
from robocompose.sim.pick_place import PickPlaceEnv


@pytest.fixture(scope="module")
def world() -> SimWorld:
    world = SimWorld("SortBins")
    yield world
    world.close()


def test_observation_has_pick_place_layout(world: SimWorld) -> None:
    world.reset(0)
    state = pick_place_state(world, "green_block", "blue_bin")
    assert state.shape == PickPlaceEnv().observation_space["state"].shape
    np.testing.assert_allclose(state[:3], world.gripper_position())
    np.testing.assert_allclose(state[4:7], world.position("green_block"))
    np.testing.assert_allclose(state[9:], world.position("blue_bin")[:2])


def test_flow_policy_puts_a_block_in_its_bin(world: SimWorld) -> None:
    registry = registry_for(world, {"place_in": "policy:PickPlace_flow_mlp"})
    assert registry["place_in"].kind == "policy"
    world.reset(0)
    trace = registry.call(world, "place_in", "blue_block", "blue_bin")
    assert trace.success_check, trace.error
    assert world.in_bin("blue_block") == "blue_bin" and world.holding() is None
    assert trace.steps <= PolicySkillConfig(("x",)).max_steps


def test_composed_policy_drives_the_arm_within_its_step_limit(world: SimWorld) -> None:
    config = PolicySkillConfig(
        ("PickPlace_diffusion_unet", "PickPlace_flow_mlp"), "convex", (0.5, 0.5), max_steps=12
    )
    registry = registry_for(world, {"place_in": config})
    assert registry["place_in"].kind == "composed"
    world.reset(2)
    path: list[list[float]] = []
    record = lambda w: path.append(w.gripper_position())  # noqa: E731
    world.add_hook(record)
    try:
        result = registry["place_in"].run(world, obj="red_block", bin="red_bin")
    finally:
        world.remove_hook(record)
    assert not result.success and "after 12 policy steps" in result.message
    assert len(path) == 12  # the scripted move to the start pose, then the policy
    assert np.linalg.norm(np.subtract(path[-1], path[-8])) > 0.01  # the policy's own steps


def test_policy_skill_keeps_its_preconditions(world: SimWorld) -> None:
    registry = registry_for(world, {"place_in": "policy:PickPlace_flow_mlp"})
    world.reset(1)
    assert registry.call(world, "pick", "red_block").success_check
    result = registry["place_in"].run(world, obj="green_block", bin="green_bin")
    assert not result.success and "already holds red_block" in result.message


def test_specs_parse_into_configs() -> None:
    composed = PolicySkillConfig.parse(
        "composed:PickPlace_diffusion_unet+PickPlace_flow_mlp:convex:0.3,0.7"
    )
    assert composed.kind == "composed" and composed.weights == (0.3, 0.7)
    assert composed.checkpoints == ("PickPlace_diffusion_unet", "PickPlace_flow_mlp")
    assert PolicySkillConfig.parse("policy:PickPlace_flow_mlp").kind == "policy"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("PickPlace_flow_mlp", "must read 'policy:<checkpoint>'"),
        ("composed:PickPlace_flow_mlp", "2 or more"),
        ("composed:a+b:convex:x,y", "must be numbers"),
        ("composed:a+b:convex:0.5", "`weights` must have one entry per checkpoint"),
    ],
)
def test_bad_specs_are_refused(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PolicySkillConfig.parse(spec)


def test_registry_for_refuses_what_it_cannot_build(world: SimWorld) -> None:
    with pytest.raises(ValueError, match="'pick' has no learned implementation"):
        registry_for(world, {"pick": "policy:PickPlace_flow_mlp"})
    stack = SimWorld("Stack")
    with pytest.raises(ValueError, match="needs bins"):
        registry_for(stack, {"place_in": "policy:PickPlace_flow_mlp"})
    stack.close()
    registry = registry_for(world, {"place_in": "policy:Stack_flow_mlp"})
    world.reset(0)
    with pytest.raises(ValueError, match=r"Stack_flow_mlp: place_in feeds a PickPlace state"):
        registry["place_in"].run(world, obj="red_block", bin="red_bin")
    with pytest.raises(FileNotFoundError, match="no checkpoint 'nope'"):
        registry_for(world, {"place_in": "policy:nope"})["place_in"].run(
            world, obj="red_block", bin="red_bin"
        )

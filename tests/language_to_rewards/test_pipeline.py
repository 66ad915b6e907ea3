"""Language to Rewards: reward templates on hand-made states, the sampling MPC on real MuJoCo
scenes, the scripted baselines, and the LLM filling a template (real local models)."""

from __future__ import annotations

import math
import subprocess
import sys

import mujoco
import numpy as np
import pytest

from robocompose.language_to_rewards.mpc import MPCConfig, SamplingMPC
from robocompose.language_to_rewards.pipeline import (
    INSTRUCTIONS,
    LanguageToRewards,
    PushT,
    Tabletop,
    reference_of,
    run_mpc,
    run_scripted,
)
from robocompose.language_to_rewards.rewards import (
    START,
    PlaceGoal,
    PushGoal,
    TemplateError,
    fill_template,
    goal_from_reply,
    place_reached,
    push_reached,
    push_reward,
    schema,
    tabletop_reward,
)
from robocompose.sim.gantry import MAX_OPENING_M
from robocompose.sim.pusht import T_RADIUS_M

TARGET = np.array([0.05, 0.0, 0.12])
LIFT = PlaceGoal("red_block", START, (0.0, 0.0, 0.10), False)
ON_RED = PlaceGoal("green_block", "red_block", (0.0, 0.0, 0.04), True)


def test_tabletop_reward_prefers_the_object_at_its_target_and_the_gripper_at_the_object():
    at = tabletop_reward(TARGET, TARGET, TARGET, 0.0, release=False)
    assert at == pytest.approx(0.0)
    away = tabletop_reward(TARGET, TARGET + [0.05, 0, 0], TARGET + [0.05, 0, 0], 0.0, False)
    assert away == pytest.approx(-2.0 * 0.05)
    loose = tabletop_reward(TARGET, TARGET, TARGET + [0, 0, 0.05], 0.0, False)
    assert loose == pytest.approx(-1.0 * 0.05)
    assert at > loose > away


def test_tabletop_reward_pays_for_letting_go_only_at_the_target():
    closed = tabletop_reward(TARGET, TARGET, TARGET, 0.0, release=True)
    opened = tabletop_reward(TARGET, TARGET, TARGET, MAX_OPENING_M, release=True)
    assert opened > closed
    far = TARGET + [0.05, 0, 0]
    far_closed = tabletop_reward(TARGET, far, far, 0.0, release=True)
    far_opened = tabletop_reward(TARGET, far, far, MAX_OPENING_M, release=True)
    assert far_closed == pytest.approx(far_opened)


def test_push_reward_weighs_yaw_like_the_expert_and_pulls_the_pusher_behind_the_block():
    target = (0.0, 0.0, 0.0)
    near = np.array([0.05, 0.0])  # inside the bounding circle
    assert push_reward(target, target, near) == pytest.approx(0.0)
    assert push_reward(target, (0.0, 0.0, 0.5), near) == pytest.approx(-0.06 * 0.5)
    assert push_reward(target, target, np.array([0.5, 0.0])) < push_reward(target, target, near)
    left_of_target = (-0.05, 0.0, 0.0)  # to be pushed right: from its left side
    behind = np.array([-0.05 - 0.8 * T_RADIUS_M, 0.0])
    assert push_reward(target, left_of_target, behind) == pytest.approx(-0.05)
    in_front = np.array([-0.05 + 0.8 * T_RADIUS_M, 0.0])
    assert push_reward(target, left_of_target, in_front) < push_reward(
        target, left_of_target, behind
    )


def test_goal_targets_follow_their_reference_and_stay_above_the_table():
    start, red = np.array([0.1, 0.0, 0.02]), np.array([-0.1, 0.05, 0.02])
    np.testing.assert_allclose(LIFT.target(start, None), [0.1, 0.0, 0.12])
    np.testing.assert_allclose(ON_RED.target(start, red), [-0.1, 0.05, 0.06])
    down = PlaceGoal("red_block", START, (0.0, 0.0, -0.1), True)
    assert down.target(start, None)[2] == pytest.approx(0.02)
    with pytest.raises(ValueError, match="needs its position"):
        ON_RED.target(start, None)
    with pytest.raises(ValueError, match="must not be the object itself"):
        PlaceGoal("red_block", "red_block", (0, 0, 0.04), True)
    assert PushGoal(0.05, 0.0, 0.5).target((0.1, 0.1, 1.0)) == pytest.approx((0.15, 0.1, 1.5))


def test_success_checks_need_the_release_the_goal_asks_for():
    assert place_reached(TARGET, TARGET + [0.01, 0, 0], released=False, goal=LIFT)
    assert not place_reached(TARGET, TARGET + [0.03, 0, 0], released=True, goal=LIFT)
    assert not place_reached(TARGET, TARGET, released=False, goal=ON_RED)
    assert place_reached(TARGET, TARGET, released=True, goal=ON_RED)
    assert push_reached((0, 0, 0), (0.01, 0.0, math.radians(5)))
    assert not push_reached((0, 0, 0), (0.0, 0.0, math.radians(15)))


def test_template_parameters_become_clipped_goals_or_say_what_is_wrong():
    reply = {
        "object": "blue_block",
        "relative_to": START,
        "dx_cm": -500,
        "dy_cm": 3,
        "dz_cm": 0,
        "release": True,
    }
    goal = goal_from_reply("tabletop", reply)
    assert goal == PlaceGoal("blue_block", START, (-0.2, 0.03, 0.0), True)
    assert goal_from_reply("pusht", {"dx_cm": 5, "dy_cm": 0, "dyaw_deg": 90}) == PushGoal(
        0.05, 0.0, math.pi / 2
    )
    with pytest.raises(TemplateError, match="dyaw_deg"):
        goal_from_reply("pusht", {"dx_cm": 5, "dy_cm": 0})
    with pytest.raises(TemplateError, match="itself"):
        goal_from_reply("tabletop", reply | {"relative_to": "blue_block"})
    tabletop = schema("tabletop", ("red_block", "blue_block"))
    assert tabletop["properties"]["relative_to"]["enum"] == [START, "red_block", "blue_block"]
    with pytest.raises(ValueError, match="template"):
        schema("kitchen")


def test_reference_goals_are_found_by_their_text():
    assert reference_of("  Lift the red block 10 cm") == INSTRUCTIONS[0].reference
    assert reference_of("dance") is None


def test_the_mpc_leaves_the_live_state_alone_and_raises_the_reward():
    scene = Tabletop()
    scene.reset(0)
    reward = scene.reward(LIFT)
    mpc = SamplingMPC(scene.plant(), reward, MPCConfig(samples=12, horizon=10, seed=0))
    mpc.reset(scene.world.last_action)
    qpos = scene.sim.data.qpos.copy()
    action = mpc.act(scene.sim.data)
    np.testing.assert_array_equal(scene.sim.data.qpos, qpos)
    assert action.shape == (4,)
    before = reward(scene.sim.data)
    for _ in range(15):
        scene.world.step(mpc.act(scene.sim.data))
    assert reward(scene.sim.data) > before + 0.1
    scene.world.close()


def test_the_mpc_lifts_a_block_and_the_scripted_baseline_stacks_one():
    scene = Tabletop()
    lifted = run_mpc(scene, LIFT, 0, max_steps=60)
    assert lifted.success, lifted
    assert scene.world.position("red_block")[2] > 0.09
    stacked = run_scripted(scene, ON_RED, 0)
    assert stacked.success and scene.world.on_top_of("green_block") == "red_block"
    scene.world.close()


def test_a_wrong_reward_fails_the_instructions_check():
    scene = Tabletop()
    wrong = PlaceGoal("blue_block", START, (0.0, 0.0, 0.10), False)
    result = run_mpc(scene, wrong, 0, check=LIFT, max_steps=40)
    assert not result.success and result.goal["object"] == "blue_block"
    assert scene.world.position("blue_block")[2] > 0.09  # it did what it was told
    scene.world.close()


def test_the_mpc_pushes_the_t_block_and_the_expert_aims_at_the_same_pose():
    scene = PushT()
    right = PushGoal(0.05, 0.0, 0.0)
    pushed = run_mpc(scene, right, 2, max_steps=100)
    assert pushed.success, pushed
    x0 = scene.start[0]
    scripted = run_scripted(scene, right, 2)
    assert scripted.success and scene.task.block_pose()[0] == pytest.approx(x0 + 0.05, abs=0.015)
    assert isinstance(scene.task.data, mujoco.MjData)


@pytest.mark.smollm2
def test_smollm2_fills_both_templates_within_their_schemas(smollm2):
    objects = ("red_block", "green_block", "blue_block")
    try:
        goal, reply = fill_template(smollm2, "tabletop", "lift the red block 10 cm", objects)
    except TemplateError as error:
        assert "do not make a tabletop goal" in str(error)
    else:
        assert set(reply) == set(schema("tabletop", objects)["properties"])
        assert goal.object in objects and goal.relative_to in (START, *objects)
        assert all(abs(v) <= 0.2 for v in goal.offset_m)
    goal, reply = fill_template(smollm2, "pusht", "push the T block 5 cm to the right")
    assert set(reply) == {"dx_cm", "dy_cm", "dyaw_deg"}
    assert isinstance(goal, PushGoal) and abs(goal.dyaw_rad) <= math.pi


@pytest.mark.qwen
def test_qwen_writes_the_lift_reward_and_the_mpc_carries_it_out(qwen):
    l2r = LanguageToRewards(qwen, MPCConfig(seed=0))
    try:
        result = l2r.run("lift the red block 10 cm", "tabletop", seed=0)
    finally:
        l2r.close()
    assert result.reply == {
        "object": "red_block",
        "relative_to": START,
        "dx_cm": 0,
        "dy_cm": 0,
        "dz_cm": 10,
        "release": False,
    }
    assert result.success


def test_a_missing_model_file_is_one_line(tmp_path):
    missing = tmp_path / "missing.gguf"
    run = subprocess.run(
        [sys.executable, "-m", "robocompose.cli", "rewards", f"llm.model={missing}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert run.stderr.strip() == (
        f"robocompose rewards: error: `llm.model`: model file {missing} does not exist."
    )

"""Language to Rewards (Yu et al. 2023): an LLM writes a reward, a sampling MPC optimises it.

    from robocompose.language_to_rewards.pipeline import LanguageToRewards
    from robocompose.hierarchical.llm import make_backend

    l2r = LanguageToRewards(make_backend())           # qwen2.5-coder-1.5b by default
    result = l2r.run("lift the red block 10 cm", "tabletop", seed=0)
    result.success, result.goal, result.reply, result.steps

The LLM fills a reward template (`rewards`: schema-constrained JSON), the MPC
(`mpc.SamplingMPC`, predictive sampling on copies of the live MuJoCo state) maximises the
reward at every control step, and the episode ends when the instruction's success check holds or
after `max_steps`. The check comes from a hand-written reference goal of the instruction
(`INSTRUCTIONS`), so a wrong template costs success; for an instruction without a reference the
episode runs the LLM's goal and reports whether that goal was reached.

Baselines on the same seeds (`run_scripted`): tabletop goals run the scripted primitives (pick,
then place / place_at / move_to), PushT goals the PushT expert's push-primitive planner aimed at
the reference pose instead of the goal T.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from robocompose.hierarchical.base import LLMBackend
from robocompose.hierarchical.llm import LLMConfig
from robocompose.hierarchical.skills.scripted import build_registry
from robocompose.hierarchical.world import SimWorld, StepBudgetExceeded
from robocompose.language_to_rewards.mpc import MPCConfig, Plant, Reward, SamplingMPC
from robocompose.language_to_rewards.rewards import (
    START,
    TEMPLATES,
    Goal,
    PlaceGoal,
    PushGoal,
    fill_template,
    goal_record,
    place_reached,
    pose_error,
    push_reached,
    push_reward,
    tabletop_reward,
)
from robocompose.sim.experts.pusht import PushTExpert
from robocompose.sim.gantry import WORKSPACE_HIGH, WORKSPACE_LOW
from robocompose.sim.pick_place import CUBE_HALF_M
from robocompose.sim.pusht import WORKSPACE_M, PushTEnv
from robocompose.sim.tasks import make_env

TABLETOP_BLOCKS = ("red", "green", "blue")
ON_TOP_M = (0.0, 0.0, 2 * CUBE_HALF_M)
MAX_STEPS = {"tabletop": 200, "pusht": 200}
MPC_NOISE = {"tabletop": (0.03, 0.03, 0.03, 1.0), "pusht": (0.05, 0.05)}
REST_SPEED_M_S = 0.05


@dataclass(frozen=True)
class Instruction:
    """An instruction, its template, and the goal a person means by it (for the success check)."""

    text: str
    template: str
    reference: Goal


INSTRUCTIONS = (
    Instruction(
        "lift the red block 10 cm", "tabletop", PlaceGoal("red_block", START, (0, 0, 0.10), False)
    ),
    Instruction(
        "put the green block on the red one",
        "tabletop",
        PlaceGoal("green_block", "red_block", ON_TOP_M, True),
    ),
    Instruction(
        "move the blue block 10 cm to the left",
        "tabletop",
        PlaceGoal("blue_block", START, (-0.10, 0, 0), True),
    ),
    Instruction(
        "place the blue block 8 cm to the right of the green one",
        "tabletop",
        PlaceGoal("blue_block", "green_block", (0.08, 0, 0), True),
    ),
    Instruction("push the T block 5 cm to the right", "pusht", PushGoal(0.05, 0.0, 0.0)),
    Instruction("push the T block 4 cm forward", "pusht", PushGoal(0.0, 0.04, 0.0)),
    Instruction(
        "turn the T block 45 degrees counterclockwise", "pusht", PushGoal(0, 0, math.pi / 4)
    ),
    Instruction(
        "push the T block 3 cm to the left and turn it 30 degrees clockwise",
        "pusht",
        PushGoal(-0.03, 0, -math.pi / 6),
    ),
)


@dataclass
class EpisodeResult:
    success: bool
    steps: int
    seconds: float
    error: float  # at the end: distance (m) to the reference target, PushT: pose error (m)
    goal: dict[str, Any] = field(default_factory=dict)  # the goal that was optimised
    reply: dict[str, Any] | None = None  # the LLM's raw template parameters


# -- tabletop -------------------------------------------------------------------------------------
class Tabletop:
    """The Stack scene with red, green and blue blocks; goals read from any `MjData` of it."""

    template = "tabletop"

    def __init__(self) -> None:
        self.world = SimWorld("Stack", {"blocks": TABLETOP_BLOCKS}, step_budget=10_000)
        self.sim = self.world.sim
        self.data = self.sim.data
        self.objects = tuple(self.world.objects())
        self.start: dict[str, np.ndarray] = {}

    def reset(self, seed: int) -> None:
        self.world.reset(seed)
        self.start = {b: np.array(self.world.position(b)) for b in self.world.objects()}

    def block(self, data: mujoco.MjData, name: str) -> np.ndarray:
        adr = self.sim._cube_qpos[self.world.block_index(name)]
        return data.qpos[adr : adr + 3]

    def target(self, goal: PlaceGoal, data: mujoco.MjData) -> np.ndarray:
        ref = None if goal.relative_to == START else self.block(data, goal.relative_to)
        return goal.target(self.start[goal.object], ref)

    def first_action(self) -> np.ndarray:
        return self.world.last_action

    def step(self, action: np.ndarray) -> None:
        self.world.step(action)

    def close(self) -> None:
        self.world.close()

    def reward(self, goal: PlaceGoal) -> Reward:
        gantry = self.sim.gantry

        def reward(data: mujoco.MjData) -> float:
            obj = self.block(data, goal.object)
            return tabletop_reward(
                self.target(goal, data),
                obj,
                gantry.ee_pos(data),
                gantry.opening(data),
                goal.release,
            )

        return reward

    def plant(self) -> Plant:
        return Plant(
            self.sim.model,
            self.sim.n_substeps,
            self.sim.gantry.command,
            np.append(WORKSPACE_LOW, -1.0),
            np.append(WORKSPACE_HIGH, 1.0),
            np.array(MPC_NOISE["tabletop"]),
        )

    def error(self, goal: PlaceGoal) -> float:
        data = self.sim.data
        return float(np.linalg.norm(self.block(data, goal.object) - self.target(goal, data)))

    def reached(self, goal: PlaceGoal) -> bool:
        i = self.world.block_index(goal.object)
        released = self.sim.released(i) and self.sim.cube_speed(i) < REST_SPEED_M_S
        data = self.sim.data
        return place_reached(self.target(goal, data), self.block(data, goal.object), released, goal)


# -- PushT ----------------------------------------------------------------------------------------
class PushT:
    """The PushT scene; goals are relative to the block's pose at reset."""

    template = "pusht"
    objects: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.task: PushTEnv = make_env("PushT").unwrapped
        self.data = self.task.data
        self.start = (0.0, 0.0, 0.0)

    def reset(self, seed: int) -> None:
        self.task.reset(seed=seed)
        self.start = self.task.block_pose()

    def pose(self, data: mujoco.MjData) -> tuple[float, float, float]:
        i = self.task.block_qpos_adr
        return float(data.qpos[i]), float(data.qpos[i + 1]), float(data.qpos[i + 2])

    def first_action(self) -> np.ndarray:
        return self.task.pusher_xy()

    def step(self, action: np.ndarray) -> None:
        self.task.step(action.astype(np.float32))

    def close(self) -> None:
        self.task.close()

    def reward(self, goal: PushGoal) -> Reward:
        target, pusher = goal.target(self.start), self.task.model.joint("pusher_x").qposadr[0]

        def reward(data: mujoco.MjData) -> float:
            return push_reward(target, self.pose(data), data.qpos[pusher : pusher + 2])

        return reward

    def plant(self) -> Plant:
        def apply(data: mujoco.MjData, action: np.ndarray) -> None:
            data.ctrl[:2] = action

        return Plant(
            self.task.model,
            self.task.n_substeps,
            apply,
            np.full(2, -WORKSPACE_M),
            np.full(2, WORKSPACE_M),
            np.array(MPC_NOISE["pusht"]),
        )

    def error(self, goal: PushGoal) -> float:
        return pose_error(goal.target(self.start), self.task.block_pose())

    def reached(self, goal: PushGoal) -> bool:
        return push_reached(goal.target(self.start), self.task.block_pose())


class GoalPushTExpert(PushTExpert):
    """The PushT expert's push-primitive planner aimed at a goal pose instead of the goal T."""

    def __init__(self, target: tuple[float, float, float]) -> None:
        super().__init__()
        self.target = target

    def cost(self, pose: tuple[float, float, float]) -> float:
        return pose_error(self.target, pose)

    def reached(self, task: PushTEnv, pose: tuple[float, float, float]) -> bool:
        return push_reached(self.target, pose)


RewardScene = Tabletop | PushT


def make_scene(template: str) -> RewardScene:
    if template not in TEMPLATES:
        raise ValueError(f"`template` must be one of {TEMPLATES}. Got {template!r}.")
    return Tabletop() if template == "tabletop" else PushT()


def run_mpc(
    scene: RewardScene,
    goal: Goal,
    seed: int,
    *,
    check: Goal | None = None,
    config: MPCConfig | None = None,
    max_steps: int | None = None,
) -> EpisodeResult:
    """One episode: the MPC maximises `goal`'s reward until `check` (default: `goal`) is
    reached or `max_steps` control steps have run."""
    check = check or goal
    max_steps = max_steps or MAX_STEPS[scene.template]
    started = time.perf_counter()
    scene.reset(seed)
    mpc = SamplingMPC(scene.plant(), scene.reward(goal), config or MPCConfig(seed=seed))
    mpc.reset(scene.first_action())
    steps, success = 0, scene.reached(check)
    while not success and steps < max_steps:
        scene.step(mpc.act(scene.data))
        steps += 1
        success = scene.reached(check)
    return EpisodeResult(
        success, steps, time.perf_counter() - started, scene.error(check), goal_record(goal)
    )


def run_scripted(
    scene: RewardScene, goal: Goal, seed: int, max_steps: int | None = None
) -> EpisodeResult:
    """The scripted baseline for `goal` on the same seed, judged by the same check."""
    max_steps = max_steps or MAX_STEPS[scene.template]
    started = time.perf_counter()
    scene.reset(seed)
    if isinstance(scene, Tabletop) and isinstance(goal, PlaceGoal):
        success, steps = _scripted_tabletop(scene, goal, max_steps)
    elif isinstance(scene, PushT) and isinstance(goal, PushGoal):
        success, steps = _scripted_pusht(scene, goal, max_steps)
    else:
        raise TypeError(f"a {scene.template} scene takes no {type(goal).__name__}.")
    return EpisodeResult(
        success, steps, time.perf_counter() - started, scene.error(goal), goal_record(goal)
    )


class _Reached(Exception):
    """Raised by the check hook to end a scripted run at the first step the goal holds."""


def _scripted_tabletop(scene: Tabletop, goal: PlaceGoal, max_steps: int) -> tuple[bool, int]:
    """pick, then place on the reference block, place_at the target, or carry to it."""
    world = scene.world
    registry = build_registry(world)

    def check(world: SimWorld) -> None:
        if scene.reached(goal):
            raise _Reached

    world.add_hook(check)
    budget, world.step_budget = world.step_budget, max_steps
    try:
        registry["pick"].run(world, obj=goal.object)
        target = scene.target(goal, world.sim.data)
        if goal.release and goal.relative_to != START and goal.offset_m == ON_TOP_M:
            registry["place"].run(world, obj=goal.object, target=goal.relative_to)
        elif goal.release:
            registry["place_at"].run(world, obj=goal.object, x=target[0], y=target[1])
        else:
            ee = np.add(world.gripper_position(), target - world.position(goal.object))
            ee = np.clip(ee, WORKSPACE_LOW, WORKSPACE_HIGH)
            registry["move_to"].run(world, x=ee[0], y=ee[1], z=ee[2])
    except _Reached:
        return True, world.steps
    except StepBudgetExceeded:
        return False, world.steps
    finally:
        world.remove_hook(check)
        world.step_budget = budget
    return scene.reached(goal), world.steps


def _scripted_pusht(scene: PushT, goal: PushGoal, max_steps: int) -> tuple[bool, int]:
    expert = GoalPushTExpert(goal.target(scene.start))
    expert.reset(scene.task, np.random.default_rng(0))
    steps = 0
    while not scene.reached(goal) and steps < max_steps:
        scene.task.step(expert.act(scene.task))
        steps += 1
    return scene.reached(goal), steps


# -- the planner ----------------------------------------------------------------------------------
class LanguageToRewards:
    """Instruction -> template parameters (LLM) -> reward -> MPC episode; scenes are reused."""

    def __init__(self, llm: LLMBackend, config: MPCConfig | None = None) -> None:
        self.llm, self.config = llm, config
        self._scenes: dict[str, RewardScene] = {}

    def scene(self, template: str) -> RewardScene:
        if template not in self._scenes:
            self._scenes[template] = make_scene(template)
        return self._scenes[template]

    def goal(self, instruction: str, template: str) -> tuple[Goal, dict[str, Any]]:
        """The LLM's goal for `instruction` and its raw parameters."""
        return fill_template(self.llm, template, instruction, self.scene(template).objects)

    def run(
        self, instruction: str, template: str, seed: int, reference: Goal | None = None
    ) -> EpisodeResult:
        """One episode of `instruction`, judged by `reference` (default: the known instruction
        of that text, else the LLM's own goal)."""
        goal, reply = self.goal(instruction, template)
        reference = reference or reference_of(instruction) or goal
        config = self.config or MPCConfig(seed=seed)
        result = run_mpc(self.scene(template), goal, seed, check=reference, config=config)
        result.reply = reply
        return result

    def close(self) -> None:
        for scene in self._scenes.values():
            scene.close()


def reference_of(text: str) -> Goal | None:
    """The hand-written goal of a benchmarked instruction (same text, any case), else None."""
    for item in INSTRUCTIONS:
        if item.text.lower() == text.strip().lower():
            return item.reference
    return None


# -- the CLI verb ---------------------------------------------------------------------------------
@dataclass(kw_only=True)
class RewardsConfig:
    """`robocompose rewards "<instruction>"`: the LLM writes the reward, the MPC runs it in sim."""

    instruction: str = "lift the red block 10 cm"
    template: str = ""  # tabletop | pusht ("" -> the benchmarked instruction's, else tabletop)
    episodes: int = 1
    seed_start: int = 0
    baseline: bool = True  # also run the scripted baseline (benchmarked instructions only)
    # the LLM that fills the template: llm.backend=local | openai, llm.model=qwen2.5-coder-1.5b
    # (default) | smollm2 | a .gguf path, llm.n_threads, llm.cache, ...
    llm: LLMConfig = field(default_factory=LLMConfig)
    samples: int = 16  # MPC rollouts per control step
    horizon: int = 12  # MPC control steps per rollout
    knots: int = 4
    max_steps: int = 0  # control steps per episode (0 -> the template's default)
    out: str = ""  # a JSONL file of the episodes ("" -> none)

    def __post_init__(self) -> None:
        if not self.instruction.strip():
            raise ValueError("`instruction` must not be empty.")
        if self.template and self.template not in TEMPLATES:
            raise ValueError(f"`template` must be one of {TEMPLATES}. Got {self.template!r}.")
        if self.seed_start < 0:
            raise ValueError(
                f"`seed_start` must be >= 0 (env seeds are non-negative). Got {self.seed_start}."
            )
        if self.episodes < 1 or self.max_steps < 0:
            raise ValueError(
                f"need `episodes` >= 1 and `max_steps` >= 0. Got {self.episodes}, {self.max_steps}."
            )
        MPCConfig(samples=self.samples, horizon=self.horizon, knots=self.knots)

    def resolved_template(self) -> str:
        known = [i.template for i in INSTRUCTIONS if i.text.lower() == self.instruction.lower()]
        return self.template or (known[0] if known else "tabletop")


def run_config(config: RewardsConfig) -> dict[str, Any]:
    """The CLI's run: the LLM's goal, the MPC per seed and the scripted baseline on the same
    seeds; prints a line per episode and returns a summary."""
    from robocompose.hierarchical.llm import backend_from_config
    from robocompose.hierarchical.llm.models import ModelError
    from robocompose.stats import success_rate

    try:
        l2r = LanguageToRewards(backend_from_config(config.llm))
    except ModelError as error:
        raise ValueError(f"`llm.model`: {error}") from None
    template, text = config.resolved_template(), config.instruction.strip()
    reference = reference_of(text)
    rows: list[dict[str, Any]] = []
    try:
        goal, reply = l2r.goal(text, template)
        print(f"{template}: {text!r} -> {json.dumps(reply)}", flush=True)
        scene, check = l2r.scene(template), reference or goal
        for seed in range(config.seed_start, config.seed_start + config.episodes):
            mpc_config = MPCConfig(config.samples, config.horizon, config.knots, seed)
            run = run_mpc(
                scene,
                goal,
                seed,
                check=check,
                config=mpc_config,
                max_steps=config.max_steps or None,
            )
            row = {"seed": seed, "mpc": _row(run)}
            if config.baseline and reference is not None:
                row["scripted"] = _row(run_scripted(scene, reference, seed))
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        l2r.close()
    if config.out:
        path = Path(config.out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary: dict[str, Any] = {"instruction": text, "template": template, "llm_parameters": reply}
    summary["checked_against"] = "reference goal" if reference else "the LLM's own goal"
    for who in ("mpc", "scripted"):
        if rows and who in rows[0]:
            summary[who] = str(success_rate(sum(r[who]["success"] for r in rows), len(rows)))
    return summary


def _row(result: EpisodeResult) -> dict[str, Any]:
    return {
        "success": result.success,
        "steps": result.steps,
        "seconds": round(result.seconds, 2),
        "error_m": round(result.error, 4),
    }

"""SimWorld: the tabletop a plan acts in, its perception, and the one door every action takes.

Skills never touch the env directly: each control step is `world.step(action)`, which steps the
env, counts the step against the budget and calls every registered hook `hook(world)`. The
plan executor uses hooks to poll language corrections and record video frames; a hook may raise to
interrupt the running skill (the exception propagates out of the skill's `run`).

Names. A block is `"<colour>_block"` (e.g. `"red_block"`), a bin `"<colour>_bin"`; the table is
`"table"`. Perception reads the simulator state, never images:

    objects() -> block names             position(name) -> [x, y, z] m (blocks and bins)
    colour(name) -> "red" | ...          holding() -> block name or None
    on_top_of(block) -> what it rests on ("table", a block, or None while held or falling)
    bins() -> bin names                  in_bin(block) -> bin name or None
    clear(block) -> nothing rests on it  snapshot() -> JSON-able dict of all of the above

Facts. `facts()` gives the same perception as ground facts (`goal.facts`: on, on_table, in,
clear, holding, hand_empty, empty), the vocabulary of the skills' declarations and the goal
planner. `arrange(facts)` starts a scene from an arrangement (towers, blocks in bins, blocks on
the table) by teleporting blocks after `reset` and letting them settle: no robot call, no step.

Faults for the repair benchmark: `inject("slip")` teleports the held block onto a free spot of
the table (it fell out of the hand); `inject("move", block)` teleports a block that has nothing on
it to another free spot. `FaultHook` triggers one at a chosen skill call and step.

Skill calls are bracketed by `begin_call(name, args)` (every skill's run does it), so hooks can see
`call_index` (0-based, counting calls since reset), `call_steps` and `current_skill`;
`call_start_positions` keeps every block's position at the start of the call (push's success
check compares against it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import mujoco
import numpy as np

from robocompose.sim.gantry import WORKSPACE_HIGH, WORKSPACE_LOW
from robocompose.sim.pick_place import CUBE_HALF_M, CUBE_MIN_GAP_M, CUBE_RANGE_M, TabletopEnv
from robocompose.sim.tasks import make_env

TASKS = ("Stack", "SortBins")
FAULTS = ("slip", "move")
TABLE = "table"
ON_XY_TOL_M = 0.025  # a block rests on another within this xy offset of its centre
ON_Z_TOL_M = 0.01
WORLD_STREAM = 1  # second entropy word of the world's rng (faults, skill styles)
ARRANGE_GAP_M = 0.0005  # arranged blocks start this far above the one below, then settle
SETTLE_STEPS = 150  # physics steps (0.6 s) an arrangement settles for
Hook = Callable[["SimWorld"], None]


class StepBudgetExceeded(RuntimeError):
    """The world ran out of env steps: the plan is taking too long."""


class SimWorld:
    """A tabletop env (Stack or SortBins) with perception, hooks, a step budget and faults.

    Args:
        task: "Stack" or "SortBins".
        env_kwargs: passed to the env (e.g. `blocks`, `order` for Stack).
        step_budget: env steps allowed between resets, over all skill calls.
        render_mode: None or "rgb_array" (then `render()` returns frames for videos).
    """

    def __init__(
        self,
        task: str = "Stack",
        env_kwargs: dict[str, Any] | None = None,
        *,
        step_budget: int = 2000,
        render_mode: str | None = None,
    ) -> None:
        if task not in TASKS:
            raise ValueError(f"`task` must be one of {TASKS}. Got {task!r}.")
        if step_budget < 1:
            raise ValueError(f"`step_budget` must be >= 1. Got {step_budget}.")
        self.task_name = task
        self.env_kwargs = dict(env_kwargs or {})
        self.step_budget = step_budget
        self.sim: TabletopEnv = make_env(task, render_mode=render_mode, **self.env_kwargs).unwrapped
        self._colours = tuple(self.sim.cube_names)
        self._hooks: list[Hook] = []
        self.reset(0)  # a valid scene from the start; planners reset to their own seeds

    # -- lifecycle ------------------------------------------------------------------------------
    def _reset_counters(self) -> None:
        self.steps = 0
        self.call_index = -1
        self.call_steps = 0
        self.current_skill: str | None = None
        self.current_args: dict[str, Any] = {}
        self.call_start_positions: dict[str, list[float]] = {}
        self.last_action = np.append(self.sim.ee_pos(), -1.0)
        self.faults: list[dict[str, Any]] = []

    def reset(self, seed: int) -> dict[str, Any]:
        """A new seeded scene; returns its snapshot."""
        self.sim.reset(seed=seed)
        # a stream of its own: default_rng(seed) would replay the env's scene draws
        self.rng = np.random.default_rng((seed, WORLD_STREAM))
        self._reset_counters()
        return self.snapshot()

    def close(self) -> None:
        self.sim.close()

    def add_hook(self, hook: Hook) -> None:
        """Call `hook(world)` after every env step, until `remove_hook`."""
        self._hooks.append(hook)

    def remove_hook(self, hook: Hook) -> None:
        self._hooks.remove(hook)

    def begin_call(self, skill: str, args: dict[str, Any]) -> None:
        """Mark the start of a skill call (hooks read `call_index`, `call_steps`)."""
        self.call_index += 1
        self.call_steps = 0
        self.current_skill, self.current_args = skill, dict(args)
        self.call_start_positions = {b: self.position(b) for b in self.objects()}

    def end_call(self) -> None:
        self.current_skill, self.current_args = None, {}

    def step(self, action: np.ndarray) -> dict[str, Any]:
        """One 10 Hz control step of `Box(4,)` action; then every hook. Returns the env info."""
        if self.steps >= self.step_budget:
            raise StepBudgetExceeded(
                f"the world's step budget of {self.step_budget} env steps is used up."
            )
        action = np.asarray(action, dtype=np.float64)
        _, _, _, _, info = self.sim.step(action)
        self.last_action = np.append(
            np.clip(action[:3], WORKSPACE_LOW, WORKSPACE_HIGH), np.clip(action[3], -1, 1)
        )
        self.steps += 1
        self.call_steps += 1
        for hook in list(self._hooks):
            hook(self)
        return info

    def render(self) -> np.ndarray | None:
        """An RGB frame when made with render_mode="rgb_array", else None."""
        return self.sim.render()

    def success(self) -> bool:
        """The env's own success check (Stack: the configured order; SortBins: all sorted)."""
        return bool(self.sim._evaluate()[0])

    @property
    def steps_left(self) -> int:
        return self.step_budget - self.steps

    # -- names ----------------------------------------------------------------------------------
    def objects(self) -> list[str]:
        """Block names, e.g. ["red_block", "green_block", "blue_block"]."""
        return [f"{c}_block" for c in self._colours]

    def bins(self) -> list[str]:
        """Bin names (empty on Stack)."""
        return [f"{c}_bin" for c in getattr(self.sim, "bin_colours", ())]

    def block_index(self, block: str) -> int:
        """Index of a block in the env; unknown names list the scene's blocks."""
        names = self.objects()
        if block not in names:
            raise ValueError(f"unknown block {block!r}; the scene has {names}.")
        return names.index(block)

    def bin_index(self, bin_name: str) -> int:
        names = self.bins()
        if bin_name not in names:
            raise ValueError(f"unknown bin {bin_name!r}; the scene has {names or 'no bins'}.")
        return names.index(bin_name)

    # -- perception -----------------------------------------------------------------------------
    def position(self, name: str) -> list[float]:
        """[x, y, z] in m of a block's centre or a bin's centre (z = 0, on the table)."""
        if name in self.bins():
            x, y = self.sim.bin_xy(self.bin_index(name))
            return [float(x), float(y), 0.0]
        return [float(v) for v in self.sim.cube_pos(self.block_index(name))]

    def colour(self, name: str) -> str:
        """The colour word of a block or bin."""
        if name in self.bins():
            return self.sim.bin_colours[self.bin_index(name)]
        return self._colours[self.block_index(name)]

    def gripper_position(self) -> list[float]:
        return [float(v) for v in self.sim.ee_pos()]

    def gripper_opening_m(self) -> float:
        return float(self.sim.opening())

    def holding(self) -> str | None:
        """The block a finger pad touches while it is lifted off its support, else None."""
        for i, name in enumerate(self.objects()):
            if self.sim.gripper_touches(i) and self._support(i) is None:
                return name
        return None

    def _support(self, i: int) -> str | None:
        z = self.sim.cube_pos(i)[2]
        if abs(z - CUBE_HALF_M) < ON_Z_TOL_M:
            return TABLE
        for j, name in enumerate(self.objects()):
            d = self.sim.cube_pos(i) - self.sim.cube_pos(j)
            stacked = abs(d[2] - 2 * CUBE_HALF_M) < ON_Z_TOL_M
            if j != i and stacked and np.hypot(d[0], d[1]) < ON_XY_TOL_M:
                return name
        return None

    def on_top_of(self, block: str) -> str | None:
        """What `block` rests on: "table", another block's name, or None (held or falling)."""
        return self._support(self.block_index(block))

    def clear(self, block: str) -> bool:
        """No block rests on `block`."""
        return not any(self.on_top_of(b) == block for b in self.objects() if b != block)

    def in_bin(self, block: str) -> str | None:
        """The bin whose zone holds `block`'s centre while it rests on the table, else None."""
        if not self.bins() or self.on_top_of(block) != TABLE:
            return None
        xy = np.asarray(self.position(block)[:2])
        for k, name in enumerate(self.bins()):
            if np.linalg.norm(xy - self.sim.bin_xy(k)) < self.sim.bin_radius_m:
                return name
        return None

    def snapshot(self) -> dict[str, Any]:
        """A small JSON-able state: blocks (colour, position mm-rounded, support, bin), bins,
        gripper, steps, task success."""
        objects = {
            name: {
                "colour": self.colour(name),
                "position": _round(self.position(name)),
                "on": self.on_top_of(name),
                **({"in_bin": self.in_bin(name)} if self.bins() else {}),
            }
            for name in self.objects()
        }
        bins = {
            name: {"colour": self.colour(name), "position": _round(self.position(name)[:2])}
            for name in self.bins()
        }
        return {
            "task": self.task_name,
            "objects": objects,
            "bins": bins,
            "holding": self.holding(),
            "gripper": {
                "position": _round(self.gripper_position()),
                "opening_m": round(self.gripper_opening_m(), 3),
            },
            "steps": self.steps,
            "success": self.success(),
        }

    # -- facts and arrangements ---------------------------------------------------------------
    def facts(self) -> frozenset[tuple[str, ...]]:
        """The scene as ground facts (on, on_table, in, clear, holding, hand_empty, empty)."""
        from robocompose.hierarchical.goal.facts import facts_of

        return facts_of(self)

    def arrange(self, facts: Iterable[Sequence[str]]) -> frozenset[tuple[str, ...]]:
        """Make `facts` hold by teleporting blocks, then let them settle; returns the facts
        after. `facts` are ("on", a, b), ("in", a, bin) and ("on_table", a); blocks not named
        stay where they are (a named block's support that is not named itself stays too). No
        robot call and no step is counted: call it right after `reset`."""
        from robocompose.hierarchical.goal.facts import SceneNames, arranged_facts, arrangement

        scene = SceneNames.of(self)
        stacks = arrangement(facts, scene)
        moved = {b for stack in stacks for b in stack.blocks}
        if self.holding() is not None:
            raise ValueError(f"cannot arrange the scene while the gripper holds {self.holding()}.")
        spots: list[np.ndarray] = []
        for stack in stacks:
            if stack.base == TABLE:
                xy, level = self._arrange_spot(moved, spots), 0
            elif stack.base in scene.bins:
                xy, level = np.asarray(self.sim.bin_xy(self.bin_index(stack.base))), 0
            else:  # on a block that stays where it is
                xy = np.asarray(self.position(stack.base)[:2])
                level = 1 + len(self._below(stack.base))
            spots.append(xy)
            yaw = float(self.rng.uniform(0.0, np.pi / 2))
            for k, block in enumerate(stack.blocks):
                self._put(self.block_index(block), xy, yaw, level + k)
        top = np.array([0.0, 0.0, WORKSPACE_HIGH[2]])
        self.sim.gantry.place(self.sim.data, top, grip=-1.0)
        self.last_action = np.append(top, -1.0)
        for _ in range(SETTLE_STEPS):
            mujoco.mj_step(self.sim.model, self.sim.data)
        after = self.facts()
        missing = [f for f in arranged_facts(stacks, scene) if f not in after]
        if missing:
            raise RuntimeError(f"the arrangement did not settle: {missing[0]} does not hold.")
        return after

    def _below(self, block: str) -> list[str]:
        chain = []
        while (below := self.on_top_of(block)) not in (TABLE, None):
            chain.append(below)
            block = below
        return chain

    def _put(self, i: int, xy: np.ndarray, yaw: float, level: int) -> None:
        """Cube i at `xy`, `level` cubes above the table, at rest."""
        self.sim._place_cube(i, xy, yaw)
        adr, dof = self.sim._cube_qpos[i], self.sim._cube_dof[i]
        self.sim.data.qpos[adr + 2] = CUBE_HALF_M * (2 * level + 1) + ARRANGE_GAP_M * level
        self.sim.data.qvel[dof : dof + 6] = 0.0

    def _arrange_spot(self, moved: set[str], taken: list[np.ndarray]) -> np.ndarray:
        """A table spot >= the cube gap from every block that stays, every bin and `taken`."""
        others = [np.asarray(self.position(b)[:2]) for b in self.objects() if b not in moved]
        others += [np.asarray(self.position(b)[:2]) for b in self.bins()] + list(taken)
        for _ in range(10_000):
            xy = self.rng.uniform(-CUBE_RANGE_M, CUBE_RANGE_M, 2)
            if all(np.linalg.norm(xy - o) >= CUBE_MIN_GAP_M for o in others):
                return xy
        raise RuntimeError("no free spot on the table for an arranged stack")

    # -- faults ---------------------------------------------------------------------------------
    def free_spot(self, avoid: Sequence[str] = ()) -> np.ndarray:
        """A random table xy >= the cube gap from every block (except `avoid`) and every bin."""
        others = [np.asarray(self.position(b)[:2]) for b in self.objects() if b not in avoid] + [
            np.asarray(self.position(b)[:2]) for b in self.bins()
        ]
        gap = CUBE_MIN_GAP_M
        for _ in range(10_000):
            xy = self.rng.uniform(-CUBE_RANGE_M, CUBE_RANGE_M, 2)
            if all(np.linalg.norm(xy - o) >= gap for o in others):
                return xy
        raise RuntimeError("no free spot on the table for a block")

    def inject(self, kind: str, block: str | None = None) -> dict[str, Any]:
        """Apply a fault now and return its record (also appended to `faults`).

        "slip": the held block (or `block`) falls out of the hand onto a free spot.
        "move": `block` (default: a random block with nothing on it and not held) is moved to
        another free spot of the table."""
        if kind not in FAULTS:
            raise ValueError(f"fault `kind` must be one of {FAULTS}. Got {kind!r}.")
        if kind == "slip":
            block = block or self.holding()
            if block is None:
                raise ValueError("cannot inject a slip: the gripper holds no block.")
        elif block is None:
            held = self.holding()
            movable = [b for b in self.objects() if b != held and self.clear(b)]
            block = movable[int(self.rng.integers(len(movable)))]
        elif not self.clear(block):
            raise ValueError(f"cannot move {block!r}: another block rests on it.")
        before = self.position(block)
        xy = self.free_spot(avoid=[block])
        self._teleport(self.block_index(block), xy)
        record = {
            "kind": kind,
            "block": block,
            "from": _round(before),
            "to": _round(self.position(block)),
            "call_index": self.call_index,
            "call_steps": self.call_steps,
            "step": self.steps,
        }
        self.faults.append(record)
        return record

    def _teleport(self, i: int, xy: np.ndarray) -> None:
        self.sim._place_cube(i, xy, float(self.rng.uniform(0.0, np.pi / 2)))
        dof = self.sim._cube_dof[i]
        self.sim.data.qvel[dof : dof + 6] = 0.0
        mujoco.mj_forward(self.sim.model, self.sim.data)


class FaultHook:
    """A hook that injects `kind` once, at env step `at_step` of skill call `at_call`.

    A "slip" waits (up to the end of that call) until the gripper actually holds a block."""

    def __init__(self, kind: str, at_call: int, at_step: int = 1, block: str | None = None) -> None:
        if kind not in FAULTS:
            raise ValueError(f"fault `kind` must be one of {FAULTS}. Got {kind!r}.")
        if at_call < 0 or at_step < 1:
            raise ValueError(
                f"`at_call` must be >= 0 and `at_step` >= 1. Got {at_call}, {at_step}."
            )
        self.kind, self.at_call, self.at_step, self.block = kind, at_call, at_step, block
        self.record: dict[str, Any] | None = None

    def __call__(self, world: SimWorld) -> None:
        if self.record is not None or world.call_index != self.at_call:
            return
        if world.call_steps < self.at_step:
            return
        if self.kind == "slip" and self.block is None and world.holding() is None:
            return
        self.record = world.inject(self.kind, self.block)


def _round(values: Sequence[float], ndigits: int = 3) -> list[float]:
    return [round(float(v), ndigits) for v in values]

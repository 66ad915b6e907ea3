"""The scripted primitives on the tabletop tasks and the registry of them for one scene.

    registry = build_registry(world)          # skills + perception queries for this scene
    registry["pick"].run(world, obj="red_block")
    registry.call(world, "pick", "red_block")  # validate + run -> SkillTrace (queries: value)

The registry itself (validation, listings for prompts) is `registry.py` next to this module.
Perception queries: objects(), position(name), colour(name), holding(), on_top_of(obj), and on
scenes with bins bins(), in_bin(obj).

Primitives (all scripted with the grasping experts' waypoint code, each with a step limit):
move_to(x, y, z), open_gripper(), close_gripper(), pick(obj), place(obj, target) with target a
block ("on") or a bin ("in"), place_at(obj, x, y) (on the table), push(obj, direction,
distance), and on scenes with bins place_in(obj, bin) = pick then place, the skill a learned
policy can take over (`robocompose.hierarchical.skills.learned`). Directions are as seen by the
top camera: "left" = -x, "right" = +x, "forward" = +y, "backward" = -y.

Each skill's `run` first checks its precondition and, when it does not hold, returns a failed
`SkillResult` whose message says why (e.g. "the gripper already holds green_block; place it
first") without moving; `precondition` is the same check as a bool (SayCan's affordance); and
`success` reads the world after the call. pick, place, place_at and place_in declare what they
need and do as STRIPS operators (`skills.declarations`, on `Skill.operators`): their
precondition check is those declarations evaluated on the world's facts (place_at adds that its
spot is free), the same declarations the plan check and the goal planner use. Every `run`
brackets itself with `world.begin_call`, so world hooks see which call and step they are in.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import Any

import numpy as np

from robocompose.hierarchical.base import Param, Skill, SkillResult
from robocompose.hierarchical.goal.facts import SceneNames
from robocompose.hierarchical.goal.strips import Fact, StripsOperator, Violation, show, step
from robocompose.hierarchical.skills.declarations import PICK, PLACE, PLACE_AT, PLACE_IN
from robocompose.hierarchical.skills.registry import Query, SkillRegistry
from robocompose.hierarchical.world import TABLE, SimWorld
from robocompose.sim.experts.grasping import CLOSED, OPEN, GraspExpertConfig, _GraspingExpert
from robocompose.sim.gantry import WORKSPACE_HIGH, WORKSPACE_LOW
from robocompose.sim.pick_place import CUBE_HALF_M, TabletopEnv

DIRECTIONS: dict[str, tuple[float, float]] = {
    "left": (-1.0, 0.0),
    "right": (1.0, 0.0),
    "forward": (0.0, 1.0),
    "backward": (0.0, -1.0),
}
PLACE_RANGE_M = 0.17  # place_at keeps block centres within [-range, range]^2
PUSH_RANGE_M = (0.02, 0.12)
PUSH_CONTACT_M = CUBE_HALF_M + 0.012  # ee centre to block centre when the closed pads touch it
FREE_SPOT_M = 0.07  # place_at refuses a spot closer than this to another block
MOVE_TOL_M = 0.02
MOVE_STEPS, GRIP_STEPS, PICK_STEPS, PLACE_STEPS, PUSH_STEPS = 80, 8, 200, 150, 150
RELEASED_OPENING_M = 2 * CUBE_HALF_M + 0.005
CLOSED_OPENING_M = 0.01


class Motion(_GraspingExpert):
    """The grasping experts' waypoint code, driven one primitive at a time on a world.

    Style (hover, carry and retreat heights, speed, grasp offset) is drawn per call from the
    world's seeded rng; the commanded point continues from the world's last action."""

    def __init__(self, world: SimWorld) -> None:
        super().__init__(GraspExpertConfig(action_noise_m=0.0))
        self.world = world
        self.task: TabletopEnv = world.sim
        self._rng = world.rng
        self._draw_style()
        self._cmd = world.last_action[:3].copy()

    def drive(self, script: Generator | Iterator, max_steps: int) -> tuple[Any, int, bool]:
        """Step the world with the script's commands: (its return value, steps, finished)."""
        steps = 0
        try:
            while steps < max_steps:
                xyz, grip = next(script)
                self.world.step(np.append(np.clip(xyz, WORKSPACE_LOW, WORKSPACE_HIGH), grip))
                steps += 1
        except StopIteration as stop:
            return stop.value, steps, True
        return None, steps, False

    def safe_z(self, i: int | None) -> float:
        """An ee height from which the hand (and a held block) clears every other block."""
        tops = [
            self.task.cube_pos(j)[2] + CUBE_HALF_M
            for j in range(len(self.task.cube_names))
            if j != i
        ]
        return max(tops, default=0.0) + CUBE_HALF_M + self.carry_m

    def rise_to(self, z: float, grip: float) -> Iterator[tuple[np.ndarray, float]]:
        if self._cmd[2] < z:
            goal = np.append(self._cmd[:2], z)
            yield from self._go(self.task, lambda: goal, grip, tol_m=0.015)

    def go(
        self, goal: Callable[[], np.ndarray], grip: float, speed_m: float | None = None
    ) -> Iterator[tuple[np.ndarray, float]]:
        yield from self._go(self.task, goal, grip, speed_m=speed_m, tol_m=0.008, max_steps=80)

    def hold(self, grip: float, steps: int) -> Iterator[tuple[np.ndarray, float]]:
        yield from self._hold(grip, steps)


# -- primitives -----------------------------------------------------------------------------------
Check = Callable[..., str | None]  # (world, **args) -> why the skill cannot run, or None


def make_skill(
    name: str,
    description: str,
    params: tuple[Param, ...],
    act: Callable[..., SkillResult],
    blocker: Check,
    success: Callable[..., bool] | None,
    kind: str = "scripted",
    operators: tuple[StripsOperator, ...] = (),
) -> Skill:
    """A Skill whose run checks `blocker` first and brackets itself with world.begin_call."""

    def run(world: SimWorld, **args: Any) -> SkillResult:
        world.begin_call(name, args)
        try:
            why = blocker(world, **args)
            if why is not None:
                return SkillResult(False, f"cannot {name}: {why}", 0)
            return act(world, **args)
        finally:
            world.end_call()

    return Skill(
        name,
        description,
        params,
        run,
        precondition=lambda world, **args: blocker(world, **args) is None,
        success=success,
        kind=kind,
        operators=operators,
    )


def declared(name: str, operators: tuple[StripsOperator, ...], extra: Check | None = None) -> Check:
    """The blocker of a declared skill: its operators on the world's facts, then `extra`."""

    def blocker(world: SimWorld, **args: Any) -> str | None:
        found = step(world.facts(), name, args, operators, SceneNames.of(world).objects)
        if isinstance(found, Violation):
            return _why(world, found.fact, args)
        return extra(world, **args) if extra is not None else None

    return blocker


def _why(world: SimWorld, fact: Fact, args: dict[str, Any]) -> str:
    """A failed precondition in the words a person (and the planner) acts on."""
    held = world.holding()
    obj = args.get("obj")
    if fact[0] == "valid_arguments":
        names = [v for v in args.values() if isinstance(v, str)]
        if len(set(names)) < len(names):
            return f"cannot put {obj} on itself"
        return "its arguments fit none of its declared uses"
    if fact[0] == "clear":
        return _supporting(world, fact[1]) or f"{fact[1]} is not clear"
    if fact[0] == "hand_empty":
        if held == obj:
            return f"the gripper already holds {obj}"
        return f"the gripper already holds {held}; place it first"
    if fact[0] == "holding":
        return f"the gripper does not hold {fact[1]} (it holds {held or 'nothing'}); pick it first"
    if fact[0] == "empty":
        inside = [b for b in world.objects() if world.in_bin(b) == fact[1]]
        return f"{inside[0] if inside else 'a block'} already lies in {fact[1]}; a bin holds one"
    return f"it needs {show(fact)}, which does not hold"


def _result(ok: bool, steps: int, finished: bool, failure: str) -> SkillResult:
    if not finished:
        return SkillResult(False, f"ran out of its step limit ({failure})", steps)
    return SkillResult(ok, "" if ok else failure, steps)


def _grip(world: SimWorld) -> float:
    return float(world.last_action[3])


def _supporting(world: SimWorld, obj: str) -> str | None:
    above = [b for b in world.objects() if b != obj and world.on_top_of(b) == obj]
    return f"{above[0]} rests on {obj}; move it first" if above else None


def _released(world: SimWorld, obj: str) -> bool:
    i = world.block_index(obj)
    return bool(world.sim.released(i) and world.sim.cube_speed(i) < 0.05)


# move_to / open / close ---------------------------------------------------------------------------
def _move_to(world: SimWorld, x: float, y: float, z: float) -> SkillResult:
    motion = Motion(world)
    goal = np.array([x, y, z])
    _, steps, done = motion.drive(motion.go(lambda: goal, _grip(world)), MOVE_STEPS)
    return _result(_at(world, x, y, z), steps, done, "the gripper did not reach the point")


def _at(world: SimWorld, x: float, y: float, z: float) -> bool:
    return bool(np.linalg.norm(world.sim.ee_pos() - (x, y, z)) < MOVE_TOL_M)


def _set_grip(grip: float) -> Callable[..., SkillResult]:
    def act(world: SimWorld) -> SkillResult:
        motion = Motion(world)
        _, steps, done = motion.drive(motion.hold(grip, GRIP_STEPS), GRIP_STEPS + 1)
        ok = _opened(world) if grip == OPEN else _closed(world)
        return _result(ok, steps, done, "the fingers did not move")

    return act


def _opened(world: SimWorld) -> bool:
    return world.gripper_opening_m() > RELEASED_OPENING_M and world.holding() is None


def _closed(world: SimWorld) -> bool:
    return world.gripper_opening_m() < CLOSED_OPENING_M or world.holding() is not None


# pick ---------------------------------------------------------------------------------------------
def _pick(world: SimWorld, obj: str) -> SkillResult:
    motion, i = Motion(world), world.block_index(obj)

    def script() -> Generator:
        yield from motion.rise_to(motion.safe_z(None), _grip(world))
        return (yield from motion._grasp_retrying(world.sim, i))

    _, steps, done = motion.drive(script(), PICK_STEPS)
    return _result(world.holding() == obj, steps, done, f"{obj} is not in the gripper")


# place / place_at ---------------------------------------------------------------------------------


def _place_script(motion: Motion, i: int, xy: Callable[[], np.ndarray], z: Callable[[], float]):
    yield from motion.rise_to(motion.safe_z(i), CLOSED)
    yield from motion._place_held(motion.task, i, xy, z)


def _place(world: SimWorld, obj: str, target: str) -> SkillResult:
    motion, i = Motion(world), world.block_index(obj)
    if target in world.bins():
        k = world.bin_index(target)
        script = _place_script(motion, i, lambda: world.sim.bin_xy(k), lambda: CUBE_HALF_M + 0.004)
    else:
        j = world.block_index(target)
        script = _place_script(
            motion,
            i,
            lambda: world.sim.cube_pos(j)[:2],
            lambda: world.sim.cube_pos(j)[2] + 2 * CUBE_HALF_M + 0.004,
        )
    _, steps, done = motion.drive(script, PLACE_STEPS)
    ok = _place_success(world, obj, target)
    return _result(ok, steps, done, f"{obj} did not come to rest {_relation(world, target)}")


def _relation(world: SimWorld, target: str) -> str:
    return f"in {target}" if target in world.bins() else f"on {target}"


def _place_success(world: SimWorld, obj: str, target: str) -> bool:
    if target in world.bins():
        where = world.in_bin(obj) == target
    else:
        where = world.on_top_of(obj) == target
    return where and _released(world, obj)


def _spot_taken(world: SimWorld, obj: str, x: float, y: float) -> str | None:
    for other in world.objects():
        if other != obj and np.hypot(*(np.subtract(world.position(other)[:2], (x, y)))) < (
            FREE_SPOT_M
        ):
            return f"the spot ({x:.3f}, {y:.3f}) is taken by {other}"
    return None


def _place_at(world: SimWorld, obj: str, x: float, y: float) -> SkillResult:
    motion, i = Motion(world), world.block_index(obj)
    goal = np.array([x, y])
    script = _place_script(motion, i, lambda: goal, lambda: CUBE_HALF_M + 0.004)
    _, steps, done = motion.drive(script, PLACE_STEPS)
    ok = _place_at_success(world, obj, x, y)
    return _result(ok, steps, done, f"{obj} did not come to rest at ({x:.3f}, {y:.3f})")


def _place_at_success(world: SimWorld, obj: str, x: float, y: float) -> bool:
    xy = world.position(obj)[:2]
    near = np.hypot(xy[0] - x, xy[1] - y) < MOVE_TOL_M
    return bool(near and world.on_top_of(obj) == TABLE and _released(world, obj))


# place_in: pick then place into a bin -------------------------------------------------------------
def _place_in(world: SimWorld, obj: str, bin: str) -> SkillResult:
    steps = 0
    if world.holding() != obj:
        picked = _pick(world, obj)
        steps += picked.steps
        if not picked.success:
            return SkillResult(False, picked.message, steps)
    placed = _place(world, obj, bin)
    return SkillResult(placed.success, placed.message, steps + placed.steps)


def place_in_success(world: SimWorld, obj: str, bin: str) -> bool:
    return _place_success(world, obj, bin)


# push -------------------------------------------------------------------------------------------
def _push_blocker(world: SimWorld, obj: str, direction: str, distance: float) -> str | None:
    held = world.holding()
    if held is not None:
        return f"the gripper holds {held}; place it first"
    if world.on_top_of(obj) != TABLE:
        return f"{obj} is not on the table (it rests on {world.on_top_of(obj)})"
    return _supporting(world, obj)


def _push(world: SimWorld, obj: str, direction: str, distance: float) -> SkillResult:
    motion, i = Motion(world), world.block_index(obj)
    unit = np.array(DIRECTIONS[direction])
    start = world.sim.cube_pos(i)[:2]
    behind = start - unit * (PUSH_CONTACT_M + 0.015)
    end = start + unit * (distance - PUSH_CONTACT_M)
    low_z = CUBE_HALF_M

    def script() -> Iterator:
        yield from motion.rise_to(motion.safe_z(None), CLOSED)
        yield from motion.go(lambda: np.append(behind, motion._cmd[2]), CLOSED)
        yield from motion.go(lambda: np.append(behind, low_z), CLOSED)
        yield from motion.go(lambda: np.append(end, low_z), CLOSED, speed_m=0.01)
        yield from motion.rise_to(motion.safe_z(None), CLOSED)

    _, steps, done = motion.drive(script(), PUSH_STEPS)
    ok = _push_success(world, obj, direction, distance)
    return _result(ok, steps, done, f"{obj} did not move {distance:.3f} m {direction}")


def _push_success(world: SimWorld, obj: str, direction: str, distance: float) -> bool:
    """Moved along `direction` by `distance` (within 2 cm) since the call began, still on the
    table."""
    start = world.call_start_positions.get(obj)
    if start is None:
        return False
    moved = np.subtract(world.position(obj)[:2], start[:2])
    along = float(moved @ np.array(DIRECTIONS[direction]))
    return abs(along - distance) < MOVE_TOL_M and world.on_top_of(obj) == TABLE


# -- perception queries -----------------------------------------------------------------------
def _queries(world: SimWorld, obj: Param, thing: Param) -> list[Query]:
    queries = [
        Query(
            "objects", "The names of the blocks in the scene.", (), SimWorld.objects, "list[str]"
        ),
        Query(
            "position",
            "The [x, y, z] centre in metres of a block or bin.",
            (thing,),
            lambda w, name: w.position(name),
            "list[float]",
        ),
        Query(
            "colour",
            "The colour word of a block or bin.",
            (thing,),
            lambda w, name: w.colour(name),
            "str",
        ),
        Query("holding", "The block in the gripper, or None.", (), SimWorld.holding, "str | None"),
        Query(
            "on_top_of",
            'What the block rests on: "table", a block, or None while held.',
            (obj,),
            lambda w, obj: w.on_top_of(obj),
            "str | None",
        ),
    ]
    if world.bins():
        queries += [
            Query("bins", "The names of the bins on the table.", (), SimWorld.bins, "list[str]"),
            Query(
                "in_bin",
                "The bin the block lies in, or None.",
                (obj,),
                lambda w, obj: w.in_bin(obj),
                "str | None",
            ),
        ]
    return queries


def build_registry(world: SimWorld) -> SkillRegistry:
    """The scripted primitives and perception queries, with parameter choices and ranges taken
    from `world`'s scene."""
    blocks = tuple(world.objects())
    bins = tuple(world.bins())
    lo, hi = WORKSPACE_LOW, WORKSPACE_HIGH
    obj = Param("obj", "str", "a block", choices=blocks)
    thing = Param("name", "str", "a block or bin", choices=blocks + bins)
    xyz = (
        Param("x", "float", "m", low=float(lo[0]), high=float(hi[0])),
        Param("y", "float", "m", low=float(lo[1]), high=float(hi[1])),
        Param("z", "float", "m, the table top is 0", low=float(lo[2]), high=float(hi[2])),
    )
    place_xy = (
        Param("x", "float", "m", low=-PLACE_RANGE_M, high=PLACE_RANGE_M),
        Param("y", "float", "m", low=-PLACE_RANGE_M, high=PLACE_RANGE_M),
    )
    skills = [
        make_skill(
            "move_to",
            "Move the gripper to the point (x, y, z), keeping its grip.",
            xyz,
            _move_to,
            lambda world, **a: None,
            _at,
        ),
        make_skill(
            "open_gripper",
            "Open the fingers, releasing whatever they hold.",
            (),
            _set_grip(OPEN),
            lambda world: None,
            _opened,
        ),
        make_skill(
            "close_gripper",
            "Close the fingers.",
            (),
            _set_grip(CLOSED),
            lambda world: None,
            _closed,
        ),
        make_skill(
            "pick",
            "Grasp the block and lift it. The gripper must be empty and nothing may "
            "rest on the block.",
            (obj,),
            _pick,
            declared("pick", PICK),
            lambda world, obj: world.holding() == obj,
            operators=PICK,
        ),
        make_skill(
            "place",
            "Put the held block on top of another block or into a bin, and let go.",
            (obj, Param("target", "str", "a block (on) or a bin (in)", choices=blocks + bins)),
            _place,
            declared("place", PLACE),
            _place_success,
            operators=PLACE,
        ),
        make_skill(
            "place_at",
            "Put the held block down on the table at (x, y) and let go.",
            (obj, *place_xy),
            _place_at,
            declared("place_at", PLACE_AT, _spot_taken),
            _place_at_success,
            operators=PLACE_AT,
        ),
        make_skill(
            "push",
            "Push a block along the table with the closed fingers. Directions as seen "
            "from above: left = -x, right = +x, forward = +y, backward = -y.",
            (
                obj,
                Param("direction", "str", choices=tuple(DIRECTIONS)),
                Param("distance", "float", "m", low=PUSH_RANGE_M[0], high=PUSH_RANGE_M[1]),
            ),
            _push,
            _push_blocker,
            _push_success,
        ),
    ]
    if bins:
        skills.append(place_in_skill(blocks, bins, _place_in, kind="scripted"))
    return SkillRegistry(skills, _queries(world, obj, thing))


def place_in_skill(
    blocks: tuple[str, ...],
    bins: tuple[str, ...],
    act: Callable[..., SkillResult],
    kind: str,
) -> Skill:
    """`place_in(obj, bin)`: pick the block (unless held) and put it into the bin; `act` is the
    implementation (scripted here, a policy in `skills.learned`)."""
    return make_skill(
        "place_in",
        "Pick up the block (unless already held) and put it into the bin.",
        (
            Param("obj", "str", "a block", choices=blocks),
            Param("bin", "str", "a bin", choices=bins),
        ),
        act,
        declared("place_in", PLACE_IN),
        place_in_success,
        kind=kind,
        operators=PLACE_IN,
    )

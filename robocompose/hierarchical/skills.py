"""The skill registry and the scripted primitives on the tabletop tasks.

    registry = build_registry(world)          # skills + perception queries for this scene
    registry["pick"].run(world, obj="red_block")
    registry.validate("place", {"obj": "red_block", "target": "blue_bin"})  # -> checked args
    registry.call(world, "pick", "red_block")  # validate + run -> SkillTrace (queries: value)
    registry.python_api()  /  registry.json_spec()  # listings for the planners' prompts

`SkillRegistry` is a mapping name -> `Skill` (what the executor and the grammar read) plus
perception `Query`s (read-only functions such as `position(obj)`). Unknown names and bad
arguments raise `SkillError` naming the skill, the parameter and what was expected.

Primitives (all scripted with the grasping experts' waypoint code, each with a step limit):
move_to(x, y, z), open_gripper(), close_gripper(), pick(obj), place(obj, target) with target a
block ("on") or a bin ("in"), place_at(obj, x, y) (on the table), push(obj, direction,
distance), and on scenes with bins place_in(obj, bin) = pick then place, the skill a learned
policy can take over (`robocompose.hierarchical.learned_skills`). Directions are as seen by the
top camera: "left" = -x, "right" = +x, "forward" = +y, "backward" = -y.

Each skill's `run` first checks its precondition and, when it does not hold, returns a failed
`SkillResult` whose message says why (e.g. "the gripper already holds green_block; place it
first") without moving; `precondition` is the same check as a bool (SayCan's affordance); and
`success` reads the world after the call. Every `run` brackets itself with `world.begin_call`,
so world hooks see which call and step they are in.
"""

from __future__ import annotations

import difflib
import math
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from robocompose.hierarchical.base import Param, Skill, SkillResult, SkillTrace
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


class SkillError(ValueError):
    """A call the registry refuses: unknown skill, missing, extra or out-of-range argument."""


class UnknownSkillError(SkillError, KeyError):
    """No skill of that name; a KeyError too, so `registry.get(name)` returns None."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class Query:
    """A read-only perception function the planners may call, e.g. `position(obj)`."""

    name: str
    description: str
    params: tuple[Param, ...]
    fn: Callable[..., Any]  # fn(world, **args) -> JSON-able value
    returns: str  # the Python return annotation shown in the API listing


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


def suggest(value: str, choices: Sequence[str]) -> str | None:
    """The choice `value` most likely meant: one containing it ("red" -> "red_block"), else
    the closest spelling."""
    containing = [c for c in choices if value and value.lower() in c.lower()]
    if len(containing) == 1:
        return containing[0]
    near = difflib.get_close_matches(value, containing or choices, 1, cutoff=0.5)
    return near[0] if near else None


# -- argument checking ----------------------------------------------------------------------------
def check_args(skill: str, params: Sequence[Param], args: Mapping[str, Any]) -> dict[str, Any]:
    """`args` checked against `params`: all present, none extra, typed, in range or choices."""
    names = [p.name for p in params]
    extra = [k for k in args if k not in names]
    if extra:
        raise SkillError(f"`{skill}` takes no argument {extra[0]!r}; its parameters: {names}.")
    missing = [n for n in names if n not in args]
    if missing:
        raise SkillError(f"`{skill}` is missing the argument `{missing[0]}`.")
    return {p.name: _check_value(skill, p, args[p.name]) for p in params}


def _check_value(skill: str, param: Param, value: Any) -> Any:
    where = f"`{skill}` argument `{param.name}`"
    if param.type == "str":
        if not isinstance(value, str):
            raise SkillError(f"{where} must be a string. Got {type(value).__name__} {value!r}.")
        if param.choices is not None and value not in param.choices:
            near = suggest(value, param.choices)
            hint = f" Did you mean {near!r}?" if near else ""
            raise SkillError(
                f"{where} must be one of {list(param.choices)}. Got {value!r}.{hint}"
            )
        return value
    if param.type == "vec2":
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise SkillError(f"{where} must be a list of 2 numbers. Got {value!r}.")
        return [_check_number(where, param, v) for v in value]
    if param.type in ("float", "int"):
        if param.type == "int" and not (isinstance(value, int) and not isinstance(value, bool)):
            raise SkillError(f"{where} must be an integer. Got {type(value).__name__} {value!r}.")
        return _check_number(where, param, value)
    raise SkillError(f"{where} has an unknown type {param.type!r}.")


def _check_number(where: str, param: Param, value: Any) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SkillError(f"{where} must be a number. Got {type(value).__name__} {value!r}.")
    if not math.isfinite(value):
        raise SkillError(f"{where} must be finite. Got {value!r}.")
    low = -math.inf if param.low is None else param.low
    high = math.inf if param.high is None else param.high
    if not low <= value <= high:
        raise SkillError(f"{where} must be in [{param.low}, {param.high}]. Got {value!r}.")
    return value if param.type == "int" else float(value)


# -- the registry ---------------------------------------------------------------------------------
class SkillRegistry(Mapping[str, Skill]):
    """Skills by name (a read-only mapping) plus perception queries; see the module docstring."""

    def __init__(self, skills: Iterable[Skill] = (), queries: Iterable[Query] = ()) -> None:
        self._skills: dict[str, Skill] = {}
        self.queries: dict[str, Query] = {}
        for skill in skills:
            self.add(skill)
        for query in queries:
            self.add_query(query)

    def __getitem__(self, name: str) -> Skill:
        if name not in self._skills:
            raise UnknownSkillError(self._unknown(name))
        return self._skills[name]

    def __contains__(self, name: object) -> bool:
        return name in self._skills

    def __iter__(self) -> Iterator[str]:
        return iter(self._skills)

    def __len__(self) -> int:
        return len(self._skills)

    def add(self, skill: Skill, *, replace: bool = False) -> None:
        """Register `skill`; `replace=True` swaps the implementation of an existing name."""
        if skill.name in self.queries or (skill.name in self._skills and not replace):
            raise ValueError(f"a skill or query named {skill.name!r} is already registered.")
        self._skills[skill.name] = skill

    def add_query(self, query: Query) -> None:
        if query.name in self.queries or query.name in self._skills:
            raise ValueError(f"a skill or query named {query.name!r} is already registered.")
        self.queries[query.name] = query

    def _unknown(self, name: str) -> str:
        known = [*self._skills, *self.queries]
        near = suggest(str(name), known)
        hint = f"; did you mean {near!r}?" if near else f"; known: {known}"
        return f"unknown skill {name!r}{hint}"

    def params(self, name: str) -> tuple[Param, ...]:
        if name in self.queries:
            return self.queries[name].params
        return self[name].params

    def bind(self, name: str, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None):
        """Positional and keyword arguments of a call -> one checked argument dict."""
        params = self.params(name)
        if len(args) > len(params):
            raise SkillError(
                f"`{name}` takes {len(params)} arguments ({[p.name for p in params]}). "
                f"Got {len(args)} positional."
            )
        merged = dict(zip((p.name for p in params), args, strict=False))
        for key, value in (kwargs or {}).items():
            if key in merged:
                raise SkillError(f"`{name}` got the argument `{key}` twice.")
            merged[key] = value
        return check_args(name, params, merged)

    def validate(self, name: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """Checked keyword arguments of skill or query `name` (raises `SkillError`)."""
        return self.bind(name, (), args)

    def call(self, world: SimWorld, name: str, /, *args: Any, **kwargs: Any) -> Any:
        """Validate and execute: a query returns its value, a skill its `SkillTrace`."""
        checked = self.bind(name, args, kwargs)
        if name in self.queries:
            return self.queries[name].fn(world, **checked)
        skill = self[name]
        trace = SkillTrace(name, checked, state_before=world.snapshot())
        start_steps, start = world.steps, time.perf_counter()
        result = skill.run(world, **checked)
        ok = result.success and (skill.success is None or skill.success(world, **checked))
        trace.success_check = bool(ok)
        trace.error = None if ok else (result.message or "its success check is false")
        trace.state_after = world.snapshot()
        trace.steps, trace.seconds = world.steps - start_steps, time.perf_counter() - start
        return trace

    # -- listings for prompts -----------------------------------------------------------------
    def python_api(self) -> str:
        """Python signatures with docstrings: the code planner's API listing."""
        blocks = []
        for kind, items in (("skill", self._skills.values()), ("query", self.queries.values())):
            for item in items:
                returns = "bool" if kind == "skill" else item.returns
                sig = ", ".join(f"{p.name}: {_py_type(p)}" for p in item.params)
                doc = [item.description] + [
                    f"{p.name}: {_describe(p)}" for p in item.params if _describe(p)
                ]
                body = "\n    ".join(doc)
                blocks.append(f'def {item.name}({sig}) -> {returns}:\n    """{body}"""')
        return "\n\n".join(blocks)

    def json_spec(self) -> list[dict[str, Any]]:
        """Every skill and query with its parameters: the skill planner's listing."""
        out = []
        for kind, items in (("skill", self._skills.values()), ("query", self.queries.values())):
            for item in items:
                params = {}
                for p in item.params:
                    spec: dict[str, Any] = {"type": p.type}
                    if p.description:
                        spec["description"] = p.description
                    if p.choices is not None:
                        spec["choices"] = list(p.choices)
                    if p.low is not None:
                        spec["low"], spec["high"] = p.low, p.high
                    params[p.name] = spec
                out.append(
                    {"name": item.name, "kind": kind, "description": item.description,
                     "params": params}
                )
        return out


def _py_type(p: Param) -> str:
    return {"str": "str", "float": "float", "int": "int", "vec2": "list[float]"}[p.type]


def _describe(p: Param) -> str:
    parts = [p.description] if p.description else []
    if p.choices is not None:
        parts.append("one of " + ", ".join(repr(c) for c in p.choices))
    if p.low is not None and p.high is not None:
        parts.append(f"in [{p.low:g}, {p.high:g}]")
    return "; ".join(parts)


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
    )


def _result(ok: bool, steps: int, finished: bool, failure: str) -> SkillResult:
    if not finished:
        return SkillResult(False, f"ran out of its step limit ({failure})", steps)
    return SkillResult(ok, "" if ok else failure, steps)


def _grip(world: SimWorld) -> float:
    return float(world.last_action[3])


def _held_elsewhere(world: SimWorld, obj: str) -> str | None:
    held = world.holding()
    if held is not None and held != obj:
        return f"the gripper already holds {held}; place it first"
    return None


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
def _pick_blocker(world: SimWorld, obj: str) -> str | None:
    if world.holding() == obj:
        return f"the gripper already holds {obj}"
    return _held_elsewhere(world, obj) or _supporting(world, obj)


def _pick(world: SimWorld, obj: str) -> SkillResult:
    motion, i = Motion(world), world.block_index(obj)

    def script() -> Generator:
        yield from motion.rise_to(motion.safe_z(None), _grip(world))
        return (yield from motion._grasp_retrying(world.sim, i))

    _, steps, done = motion.drive(script(), PICK_STEPS)
    return _result(world.holding() == obj, steps, done, f"{obj} is not in the gripper")


# place / place_at ---------------------------------------------------------------------------------
def _not_holding(world: SimWorld, obj: str) -> str | None:
    held = world.holding()
    if held != obj:
        return f"the gripper does not hold {obj} (it holds {held or 'nothing'}); pick it first"
    return None


def _place_blocker(world: SimWorld, obj: str, target: str) -> str | None:
    if target == obj:
        return f"cannot put {obj} on itself"
    if target in world.objects():
        on_target = _supporting(world, target)
        if on_target:
            return on_target
    return _not_holding(world, obj)


def _place_script(motion: Motion, i: int, xy: Callable[[], np.ndarray], z: Callable[[], float]):
    yield from motion.rise_to(motion.safe_z(i), CLOSED)
    yield from motion._place_held(motion.task, i, xy, z)


def _place(world: SimWorld, obj: str, target: str) -> SkillResult:
    motion, i = Motion(world), world.block_index(obj)
    if target in world.bins():
        k = world.bin_index(target)
        script = _place_script(
            motion, i, lambda: world.sim.bin_xy(k), lambda: CUBE_HALF_M + 0.004
        )
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


def _place_at_blocker(world: SimWorld, obj: str, x: float, y: float) -> str | None:
    for other in world.objects():
        if other != obj and np.hypot(*(np.subtract(world.position(other)[:2], (x, y)))) < (
            FREE_SPOT_M
        ):
            return f"the spot ({x:.3f}, {y:.3f}) is taken by {other}"
    return _not_holding(world, obj)


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
def _place_in_blocker(world: SimWorld, obj: str, bin: str) -> str | None:
    if world.holding() == obj:
        return None
    return _held_elsewhere(world, obj) or _supporting(world, obj)


def _place_in(world: SimWorld, obj: str, bin: str) -> SkillResult:
    steps = 0
    if world.holding() != obj:
        picked = _pick(world, obj)
        steps += picked.steps
        if not picked.success:
            return SkillResult(False, picked.message, steps)
    placed = _place(world, obj, bin)
    return SkillResult(placed.success, placed.message, steps + placed.steps)


def _place_in_success(world: SimWorld, obj: str, bin: str) -> bool:
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
        Query("objects", "The names of the blocks in the scene.", (), SimWorld.objects,
              "list[str]"),
        Query("position", "The [x, y, z] centre in metres of a block or bin.", (thing,),
              lambda w, name: w.position(name), "list[float]"),
        Query("colour", "The colour word of a block or bin.", (thing,),
              lambda w, name: w.colour(name), "str"),
        Query("holding", "The block in the gripper, or None.", (), SimWorld.holding,
              "str | None"),
        Query("on_top_of", 'What the block rests on: "table", a block, or None while held.',
              (obj,), lambda w, obj: w.on_top_of(obj), "str | None"),
    ]
    if world.bins():
        queries += [
            Query("bins", "The names of the bins on the table.", (), SimWorld.bins,
                  "list[str]"),
            Query("in_bin", "The bin the block lies in, or None.", (obj,),
                  lambda w, obj: w.in_bin(obj), "str | None"),
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
            "move_to", "Move the gripper to the point (x, y, z), keeping its grip.", xyz,
            _move_to, lambda world, **a: None, _at,
        ),
        make_skill(
            "open_gripper", "Open the fingers, releasing whatever they hold.", (),
            _set_grip(OPEN), lambda world: None, _opened,
        ),
        make_skill(
            "close_gripper", "Close the fingers.", (), _set_grip(CLOSED), lambda world: None,
            _closed,
        ),
        make_skill(
            "pick", "Grasp the block and lift it. The gripper must be empty and nothing may "
            "rest on the block.", (obj,), _pick, _pick_blocker,
            lambda world, obj: world.holding() == obj,
        ),
        make_skill(
            "place", "Put the held block on top of another block or into a bin, and let go.",
            (obj, Param("target", "str", "a block (on) or a bin (in)", choices=blocks + bins)),
            _place, _place_blocker, _place_success,
        ),
        make_skill(
            "place_at", "Put the held block down on the table at (x, y) and let go.",
            (obj, *place_xy), _place_at, _place_at_blocker, _place_at_success,
        ),
        make_skill(
            "push", "Push a block along the table with the closed fingers. Directions as seen "
            "from above: left = -x, right = +x, forward = +y, backward = -y.",
            (obj, Param("direction", "str", choices=tuple(DIRECTIONS)),
             Param("distance", "float", "m", low=PUSH_RANGE_M[0], high=PUSH_RANGE_M[1])),
            _push, _push_blocker, _push_success,
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
    implementation (scripted here, a policy in `learned_skills`)."""
    return make_skill(
        "place_in",
        "Pick up the block (unless already held) and put it into the bin.",
        (Param("obj", "str", "a block", choices=blocks),
         Param("bin", "str", "a bin", choices=bins)),
        act,
        _place_in_blocker,
        _place_in_success,
        kind=kind,
    )


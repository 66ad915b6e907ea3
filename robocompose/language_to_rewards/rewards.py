"""Reward templates of Language to Rewards: what the LLM fills, the JSON schema it must follow,
the reward the MPC maximises, and the success check of an instruction.

Two reward templates (Yu et al. 2023 let the LLM write reward code against a
small API; here the code is fixed and the LLM fills its parameters, constrained by a schema):

- "tabletop" (the Stack scene: red, green and blue blocks, the gantry gripper), `PlaceGoal`:
  bring `object` to `relative_to` + offset, where `relative_to` is "start" (where the object was
  when the instruction was given) or another block (where it is now), and `release` says whether
  to let go there. "lift the red block 10 cm" = (red_block, start, +10 cm z, hold);
  "put the green block on the red one" = (green_block, red_block, +4 cm z, release).
  Reward: -w_object |object - target| - w_reach |gripper - object|, plus, when releasing, a bonus
  for open fingers that grows as the object nears its target.
- "pusht" (the PushT scene: the T block and the round pusher), `PushGoal`: move the T block by
  (dx, dy) and turn it by dyaw from its start pose. Reward: -(position error + 0.06 m/rad * yaw
  error) - w_reach * (pusher distance to the point behind the block, seen from the target).

Directions are in the table frame as seen from the top camera: right = +x, forward (away from
the viewer) = +y, up = +z, counter-clockwise = +yaw; lengths in the templates are centimetres
and degrees, since that is how instructions speak.

The success check of an episode is built from a hand-written reference goal of the instruction
(see `pipeline.INSTRUCTIONS`), never from the LLM's goal.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from robocompose.hierarchical.base import LLMBackend
from robocompose.sim.experts.pusht import YAW_WEIGHT_M_PER_RAD
from robocompose.sim.gantry import MAX_OPENING_M
from robocompose.sim.pick_place import CUBE_HALF_M
from robocompose.sim.pusht import T_RADIUS_M

TEMPLATES = ("tabletop", "pusht")
START = "start"
MAX_OFFSET_CM = 20.0  # a template offset is clipped to +-this per axis
MAX_TURN_DEG = 180.0


@dataclass(frozen=True)
class PlaceGoal:
    """Tabletop template: bring `object` to `relative_to` + `offset_m` and maybe let go."""

    object: str
    relative_to: str  # "start" or another block's name
    offset_m: tuple[float, float, float]
    release: bool

    def __post_init__(self) -> None:
        if self.relative_to == self.object:
            raise ValueError(f"`relative_to` must not be the object itself ({self.object!r}).")
        if len(self.offset_m) != 3:
            raise ValueError(f"`offset_m` must be (dx, dy, dz). Got {self.offset_m}.")

    def target(self, start: np.ndarray, reference: np.ndarray | None) -> np.ndarray:
        """Where the object should be: its start or the reference block's position + offset,
        never below the table."""
        base = start if self.relative_to == START else reference
        if base is None:
            raise ValueError(f"goal relative to {self.relative_to!r} needs its position.")
        target = np.asarray(base, float) + self.offset_m
        target[2] = max(target[2], CUBE_HALF_M)
        return target


@dataclass(frozen=True)
class PushGoal:
    """PushT template: move the T block by (dx, dy) m and turn it by dyaw rad."""

    dx_m: float
    dy_m: float
    dyaw_rad: float

    def target(self, start: tuple[float, float, float]) -> tuple[float, float, float]:
        return (start[0] + self.dx_m, start[1] + self.dy_m, start[2] + self.dyaw_rad)


Goal = PlaceGoal | PushGoal


@dataclass(frozen=True)
class TabletopWeights:
    object: float = 2.0
    reach: float = 1.0
    release: float = 0.2  # bonus for fully open fingers with the object at its target
    release_radius_m: float = 0.015  # the bonus fades to 0 this far from the target


@dataclass(frozen=True)
class PushWeights:
    reach: float = 0.1
    behind: float = 0.8  # the push-from point: this share of the bounding radius behind the block
    aim_m: float = 0.005  # closer than this to its target position, only the yaw is left


def tabletop_reward(
    target: np.ndarray,
    obj: np.ndarray,
    ee: np.ndarray,
    opening_m: float,
    release: bool,
    weights: TabletopWeights = TabletopWeights(),
) -> float:
    """Reward of one tabletop state (positions in m); higher is better, 0 is the best."""
    to_target = float(np.linalg.norm(np.subtract(obj, target)))
    reward = -weights.object * to_target - weights.reach * float(
        np.linalg.norm(np.subtract(ee, obj))
    )
    if release:
        at_target = max(0.0, 1.0 - to_target / weights.release_radius_m)
        reward += weights.release * at_target * (opening_m / MAX_OPENING_M - 1.0)
    return reward


def pose_error(target: tuple[float, float, float], pose: tuple[float, float, float]) -> float:
    """Position error (m) + 0.06 m per radian of yaw error: the PushT expert's weighting."""
    yaw = abs(math.remainder(pose[2] - target[2], 2 * math.pi))
    return math.hypot(pose[0] - target[0], pose[1] - target[1]) + YAW_WEIGHT_M_PER_RAD * yaw


def push_reward(
    target: tuple[float, float, float],
    pose: tuple[float, float, float],
    pusher: np.ndarray,
    weights: PushWeights = PushWeights(),
) -> float:
    """Reward of one PushT state; higher is better, 0 is the best.

    The reach term draws the pusher to the point behind the block, seen from the target
    (without it, sampled pushes from the block's near side win and the MPC stalls half the
    time); once only the yaw is off, to anywhere on the block's bounding circle."""
    dx, dy = target[0] - pose[0], target[1] - pose[1]
    to_go = math.hypot(dx, dy)
    if to_go > weights.aim_m:
        back = weights.behind * T_RADIUS_M / to_go
        reach = math.hypot(pusher[0] - pose[0] + dx * back, pusher[1] - pose[1] + dy * back)
    else:
        reach = max(0.0, math.hypot(pusher[0] - pose[0], pusher[1] - pose[1]) - T_RADIUS_M)
    return -pose_error(target, pose) - weights.reach * reach


# -- success checks (from the reference goal of an instruction) -----------------------------------
PLACE_TOL_M = 0.02  # the object's centre within this of its target
PUSH_TOL_M = 0.015
PUSH_TOL_RAD = math.radians(10.0)


def place_reached(target: np.ndarray, obj: np.ndarray, released: bool, goal: PlaceGoal) -> bool:
    """The object is at its target and, if the goal releases it, let go and at rest."""
    near = float(np.linalg.norm(np.subtract(obj, target))) < PLACE_TOL_M
    return near and (released or not goal.release)


def push_reached(target: tuple[float, float, float], pose: tuple[float, float, float]) -> bool:
    yaw = abs(math.remainder(pose[2] - target[2], 2 * math.pi))
    return math.hypot(pose[0] - target[0], pose[1] - target[1]) < PUSH_TOL_M and yaw < PUSH_TOL_RAD


# -- the LLM fills a template ---------------------------------------------------------------------
def schema(template: str, objects: tuple[str, ...] = ()) -> dict[str, Any]:
    """The JSON schema of a template's parameters (`objects`: the tabletop scene's blocks)."""
    if template == "tabletop":
        if not objects:
            raise ValueError("the tabletop schema needs the scene's `objects`.")
        return {
            "type": "object",
            "properties": {
                "object": {"type": "string", "enum": list(objects)},
                "relative_to": {"type": "string", "enum": [START, *objects]},
                "dx_cm": {"type": "number"},
                "dy_cm": {"type": "number"},
                "dz_cm": {"type": "number"},
                "release": {"type": "boolean"},
            },
            "required": ["object", "relative_to", "dx_cm", "dy_cm", "dz_cm", "release"],
        }
    if template == "pusht":
        return {
            "type": "object",
            "properties": {
                "dx_cm": {"type": "number"},
                "dy_cm": {"type": "number"},
                "dyaw_deg": {"type": "number"},
            },
            "required": ["dx_cm", "dy_cm", "dyaw_deg"],
        }
    raise ValueError(f"`template` must be one of {TEMPLATES}. Got {template!r}.")


_DIRECTIONS = (
    "Directions as seen from above: right is +x, left is -x, forward (away from you) is +y, "
    "backward is -y, up is +z; counter-clockwise turns are positive degrees."
)
SYSTEM = {
    "tabletop": (
        "You set the parameters of a reward for a robot gripper on a table with 4 cm blocks. "
        "object: the block to move. relative_to: 'start' (offsets from where the object is now) "
        "or another block (offsets from that block; on top of a block is dz_cm 4). dx_cm, dy_cm, "
        "dz_cm: the offset in centimetres. release: true to let go of the object at the target, "
        f"false to keep holding it. {_DIRECTIONS} Answer with the JSON object only."
    ),
    "pusht": (
        "You set the parameters of a reward for a robot that pushes a T-shaped block on a table. "
        "dx_cm, dy_cm: how far to move the block in centimetres; dyaw_deg: how far to turn it in "
        f"degrees. {_DIRECTIONS} Answer with the JSON object only."
    ),
}
# worked examples, none of them a benchmarked instruction
EXAMPLES = {
    "tabletop": [
        (
            "raise the blue block by 5 cm",
            {
                "object": "blue_block",
                "relative_to": START,
                "dx_cm": 0,
                "dy_cm": 0,
                "dz_cm": 5,
                "release": False,
            },
        ),
        (
            "stack the red block on top of the green block",
            {
                "object": "red_block",
                "relative_to": "green_block",
                "dx_cm": 0,
                "dy_cm": 0,
                "dz_cm": 4,
                "release": True,
            },
        ),
        (
            "set the green block down 6 cm forward of where it is",
            {
                "object": "green_block",
                "relative_to": START,
                "dx_cm": 0,
                "dy_cm": 6,
                "dz_cm": 0,
                "release": True,
            },
        ),
    ],
    "pusht": [
        ("slide the T block 3 cm backward", {"dx_cm": 0, "dy_cm": -3, "dyaw_deg": 0}),
        ("rotate the T clockwise by 20 degrees", {"dx_cm": 0, "dy_cm": 0, "dyaw_deg": -20}),
        ("push the T 2 cm left and 2 cm forward", {"dx_cm": -2, "dy_cm": 2, "dyaw_deg": 0}),
    ],
}


def messages(
    template: str, instruction: str, objects: tuple[str, ...] = ()
) -> list[dict[str, str]]:
    """The chat that asks for a template's parameters, with worked examples."""
    scene = f"Blocks: {', '.join(objects)}.\n" if objects else ""
    chat = [{"role": "system", "content": SYSTEM[template]}]
    for text, reply in EXAMPLES[template]:
        chat.append({"role": "user", "content": f"{scene}Instruction: {text}"})
        chat.append({"role": "assistant", "content": json.dumps(reply)})
    chat.append({"role": "user", "content": f"{scene}Instruction: {instruction}"})
    return chat


class TemplateError(ValueError):
    """The LLM's parameters do not make a goal (e.g. an object relative to itself)."""


def goal_from_reply(template: str, reply: dict[str, Any]) -> Goal:
    """A template's goal from the template parameters (clipped to the allowed ranges)."""

    def cm(key: str) -> float:
        return max(-MAX_OFFSET_CM, min(MAX_OFFSET_CM, float(reply[key]))) / 100.0

    try:
        if template == "tabletop":
            return PlaceGoal(
                str(reply["object"]),
                str(reply["relative_to"]),
                (cm("dx_cm"), cm("dy_cm"), cm("dz_cm")),
                bool(reply["release"]),
            )
        turn = max(-MAX_TURN_DEG, min(MAX_TURN_DEG, float(reply["dyaw_deg"])))
        return PushGoal(cm("dx_cm"), cm("dy_cm"), math.radians(turn))
    except (KeyError, TypeError, ValueError) as e:
        raise TemplateError(
            f"template parameters {reply} do not make a {template} goal: {e}"
        ) from None


def fill_template(
    llm: LLMBackend, template: str, instruction: str, objects: tuple[str, ...] = ()
) -> tuple[Goal, dict[str, Any]]:
    """Ask the LLM for a template's parameters (schema-constrained); (goal, its reply)."""
    completion = llm.chat(
        messages(template, instruction, objects),
        max_tokens=96,
        json_schema=schema(template, objects),
    )
    try:
        reply = json.loads(completion.text)
    except json.JSONDecodeError as e:
        raise TemplateError(f"the LLM's parameters {completion.text!r} are not JSON: {e}") from None
    return goal_from_reply(template, reply), reply


def goal_record(goal: Goal) -> dict[str, Any]:
    """A JSON-able record of a goal, in the template's units (cm, degrees)."""
    if isinstance(goal, PlaceGoal):
        dx, dy, dz = (round(v * 100, 2) for v in goal.offset_m)
        return {
            "object": goal.object,
            "relative_to": goal.relative_to,
            "dx_cm": dx,
            "dy_cm": dy,
            "dz_cm": dz,
            "release": goal.release,
        }
    record = asdict(goal)
    return {
        "dx_cm": round(record["dx_m"] * 100, 2),
        "dy_cm": round(record["dy_m"] * 100, 2),
        "dyaw_deg": round(math.degrees(record["dyaw_rad"]), 1),
    }

"""Language corrections while a plan runs (Yell At Your Robot): parse, queue, apply, log.

A correction is turned into a structured edit by simple rules first and, when no rule matches,
by a small constrained-output LLM call:

    "a bit more to the left"     -> nudge (-0.02, 0, 0) m
    "pick the blue one instead"  -> substitute new="blue" (swapped with the object in use)
    "stop"                       -> stop (halt and hold where the gripper is)
    "skip" / "next"              -> skip the current skill
    "no, put the red block on the green block"
                                 -> replace the current call with pick / place as said

Directions are in the table frame as seen from the top camera: right = +x, forward (away from
the viewer) = +y, up = +z. "a bit" / "a little" is 2 cm, "a lot" 5 cm, and "3 cm" means 3 cm.
Every applied correction is appended to a JSONL log (time, text, edit, state, plan before and
after, the calls already run, and the run's context such as its instruction), the data a
high-level policy is trained on (`correction_bank.py`).
"""

from __future__ import annotations

import json
import queue
import re
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from robocompose.hierarchical.base import LLMBackend, Skill, SkillCall

KINDS = ("nudge", "substitute", "stop", "skip", "replace")
LLM_KINDS = KINDS[:4]  # "replace" is read by the rules only: it names a whole call
SMALL_STEP_M = 0.02  # "a bit", "a little", "slightly", and a bare direction
LARGE_STEP_M = 0.05  # "a lot", "much"
MAX_NUDGE_M = 0.10  # one correction never moves a target further than this per axis
DIRECTIONS: dict[str, tuple[float, float, float]] = {
    "left": (-1.0, 0.0, 0.0),
    "right": (1.0, 0.0, 0.0),
    "forward": (0.0, 1.0, 0.0),
    "forwards": (0.0, 1.0, 0.0),
    "further": (0.0, 1.0, 0.0),
    "back": (0.0, -1.0, 0.0),
    "backward": (0.0, -1.0, 0.0),
    "backwards": (0.0, -1.0, 0.0),
    "closer": (0.0, -1.0, 0.0),
    "up": (0.0, 0.0, 1.0),
    "higher": (0.0, 0.0, 1.0),
    "down": (0.0, 0.0, -1.0),
    "lower": (0.0, 0.0, -1.0),
}
_AMOUNT = re.compile(r"(\d+(?:\.\d+)?)\s*(mm|millimet|cm|centimet|inch|in\b|m\b|met)")
_UNIT_M = {
    "mm": 0.001,
    "millimet": 0.001,
    "cm": 0.01,
    "centimet": 0.01,
    "inch": 0.0254,
    "in": 0.0254,
    "m": 1.0,
    "met": 1.0,
}
_STOP = re.compile(r"^\s*(stop|halt|freeze|hold( on| it)?|wait|abort|emergency)\b")
_SKIP = re.compile(r"^\s*(skip( (it|this|that))?|next( one| step)?|move on)\s*[.!]*\s*$")
# a step said in words: "no, pick up the green block", "put the red cube on the blue one",
# "drop the red block in the red bin"; the verb decides the skill (pick or place)
_THING = r"(?:the )?(\w+)(?: (block|cube|one|bin))?"
_STEP = re.compile(
    rf"^(?:(?:no|wait|instead|rather)\b[ .!]*)?(?:first |now |then )?"
    rf"(?:(pick up|pick|grab|take)|(put|place|stack|set|drop)) {_THING}"
    rf"(?: (?:on top of|onto|on|into|in) {_THING})?(?: first| next| now)?\s*[.!]*$"
)


@dataclass(frozen=True)
class CorrectionEdit:
    """A correction as a structured edit of the running plan."""

    kind: str  # one of KINDS
    offset_m: tuple[float, float, float] = (0.0, 0.0, 0.0)  # nudge: added to the target
    new: str | None = None  # substitute: the object to use instead
    old: str | None = None  # substitute: the object it replaces (None: the one in use)
    source: str = "rules"  # "rules" or the LLM's model name
    skill: str | None = None  # replace: the call to run instead (its skill and arguments)
    args: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"`kind` must be one of {KINDS}. Got {self.kind!r}.")
        if len(self.offset_m) != 3 or any(abs(v) > MAX_NUDGE_M + 1e-9 for v in self.offset_m):
            raise ValueError(
                f"`offset_m` must be 3 values within +-{MAX_NUDGE_M} m. Got {self.offset_m}."
            )
        if self.kind == "substitute" and not self.new:
            raise ValueError("a `substitute` edit needs `new`, the object to use instead.")
        if (self.kind == "replace") != (self.skill is not None and self.args is not None):
            raise ValueError(
                "`skill` and `args` are set for a `replace` edit, and only for one. Got "
                f"kind={self.kind!r}, skill={self.skill!r}, args={self.args!r}."
            )


class CorrectionNotUnderstood(ValueError):
    """Neither the rules nor the LLM could map the text to an edit."""


def _normalise(text: str) -> str:
    return " ".join(text.lower().replace("'", "").replace(",", " ").split())


def _step_m(text: str) -> float:
    amount = _AMOUNT.search(text)
    if amount:
        return min(float(amount.group(1)) * _UNIT_M[amount.group(2)], MAX_NUDGE_M)
    if re.search(r"\b(a lot|much|way|far)\b", text):
        return LARGE_STEP_M
    return SMALL_STEP_M


def _mentionable(objects: Sequence[str]) -> set[str]:
    """What a person may call the objects: "blue_block", "blue block" and "blue"."""
    names = set()
    for name in objects:
        names |= {name.lower(), name.lower().replace("_", " "), name.lower().split("_")[0]}
    return names


def resolve_object(said: str, like: str | None, objects: Sequence[str]) -> str | None:
    """The scene object `said` names ("blue" -> "blue_block" when replacing a block)."""
    said = said.lower().replace(" ", "_")
    if said in objects:
        return said
    matches = [o for o in objects if o.lower().split("_")[0] == said]
    kind = like.rsplit("_", 1)[-1] if like and "_" in like else None
    same_kind = [o for o in matches if kind and o.endswith(f"_{kind}")]
    return (same_kind or matches or [None])[0]


def parse_step(said: str, objects: Sequence[str]) -> CorrectionEdit | None:
    """A pick or place call said in words (normalised text), or None when it names no such
    call of the scene's objects. "on the red one" after "the green block" means a block."""
    match = _STEP.match(said)
    if match is None:
        return None
    picking, _, obj_word, obj_noun, target_word, target_noun = match.groups()
    obj = resolve_object(obj_word, f"x_{_noun(obj_noun, 'block')}", objects)
    if obj is None or (picking is None) == (target_word is None):
        return None
    if picking:
        return CorrectionEdit("replace", skill="pick", args={"obj": obj})
    target = resolve_object(target_word, f"x_{_noun(target_noun, obj.rsplit('_', 1)[-1])}", objects)
    if target is None:
        return None
    return CorrectionEdit("replace", skill="place", args={"obj": obj, "target": target})


def _noun(said: str | None, default: str) -> str:
    """The kind of thing a noun names: a bin, else a block ("cube", "one": the default)."""
    return "bin" if said == "bin" else default if said in (None, "one") else "block"


def parse_rules(text: str, objects: Sequence[str]) -> CorrectionEdit | None:
    """The edit the fixed rules read in `text`, or None when no rule matches."""
    said = _normalise(text)
    if _STOP.search(said):
        return CorrectionEdit("stop")
    if _SKIP.search(said):
        return CorrectionEdit("skip")
    step = parse_step(said, objects)
    if step is not None:
        return step
    names = _mentionable(objects)
    named = [n for n in sorted(names, key=len, reverse=True) if re.search(rf"\b{n}\b", said)]
    if named and re.search(r"\b(instead|rather|not the|other one|wrong)\b", said):
        negated = re.search(r"\b(?:not the|instead of(?: the)?) (\w+)", said)
        old = negated.group(1) if negated and negated.group(1) in names else None
        new = [n for n in named if n != old]
        if new:
            return CorrectionEdit("substitute", new=new[0], old=old)
    words = re.findall(r"[a-z]+", said)
    units = list({DIRECTIONS[w] for w in words if w in DIRECTIONS})  # "further forward": once
    if units:
        step = _step_m(said)
        offset = tuple(
            round(max(-MAX_NUDGE_M, min(MAX_NUDGE_M, step * sum(u[i] for u in units))), 6)
            for i in range(3)
        )
        return CorrectionEdit("nudge", offset_m=offset)  # type: ignore[arg-type]
    return None


def _schema(objects: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "kind": {"type": "string", "enum": list(LLM_KINDS)},
            "dx_cm": {"type": "number"},
            "dy_cm": {"type": "number"},
            "dz_cm": {"type": "number"},
            "new_object": {"type": "string", "enum": [*objects, "none"]},
        },
        "required": ["kind", "dx_cm", "dy_cm", "dz_cm", "new_object"],
    }


_SYSTEM = (
    "You turn a person's correction of a robot arm into one JSON edit. kind: nudge (move the "
    "target; dx_cm right+/left-, dy_cm forward+/back-, dz_cm up+/down-; 'a bit' is 2 cm), "
    "substitute (use new_object instead), stop (halt now), skip (drop the current step). "
    "Answer with the JSON object only."
)


def parse_llm(text: str, objects: Sequence[str], llm: LLMBackend) -> CorrectionEdit:
    """The edit a constrained LLM call reads in `text` (the fallback after the rules)."""
    completion = llm.chat(
        [
            {"role": "system", "content": _SYSTEM},
            {"role": "user", "content": f"Objects: {', '.join(objects)}.\nCorrection: {text}"},
        ],
        max_tokens=80,
        json_schema=_schema(objects),
    )
    try:
        reply = json.loads(completion.text)
        kind = reply["kind"]
        offset = tuple(
            max(-MAX_NUDGE_M, min(MAX_NUDGE_M, float(reply.get(k, 0.0)) / 100.0))
            for k in ("dx_cm", "dy_cm", "dz_cm")
        )
        new = reply.get("new_object")
        return CorrectionEdit(
            kind,
            offset_m=offset if kind == "nudge" else (0.0, 0.0, 0.0),  # type: ignore[arg-type]
            new=new if kind == "substitute" and new != "none" else None,
            source=completion.model,
        )
    except (ValueError, KeyError, TypeError) as e:
        raise CorrectionNotUnderstood(
            f"correction {text!r}: the LLM's edit {completion.text!r} is not valid ({e})."
        ) from None


def parse_correction(
    text: str, objects: Sequence[str], llm: LLMBackend | None = None
) -> CorrectionEdit:
    """Rules first; the LLM when they do not match; a clear error when neither can."""
    edit = parse_rules(text, objects)
    if edit is not None:
        return edit
    if llm is None:
        raise CorrectionNotUnderstood(
            f"correction {text!r} matches no rule (directions, 'X instead', stop, skip) and no "
            "LLM is set to interpret it."
        )
    return parse_llm(text, objects, llm)


# -- applying an edit to calls -------------------------------------------------------------------
def object_params(skill: Skill, objects: Iterable[str]) -> list[str]:
    """Names of `skill`'s parameters that take an object of the scene."""
    scene = set(objects)
    return [
        p.name
        for p in skill.params
        if p.type == "str" and (p.choices is None or scene & set(p.choices))
    ]


def position_params(skill: Skill) -> dict[str, int | None]:
    """`skill`'s parameters a nudge moves: name -> axis (x/y/z floats), or None for a vec2."""
    axes = {"x": 0, "y": 1, "z": 2}
    out: dict[str, int | None] = {}
    for p in skill.params:
        if p.type == "float" and p.name.split("_")[0] in axes:
            out[p.name] = axes[p.name.split("_")[0]]
        elif p.type == "vec2":
            out[p.name] = None
    return out


def nudge(call: SkillCall, skill: Skill, offset_m: Sequence[float]) -> SkillCall | None:
    """`call` with its position arguments moved by `offset_m`, or None if it has none."""
    params = {p.name: p for p in skill.params}
    moved = dict(call.args)
    for name, axis in position_params(skill).items():
        if name not in moved:
            continue
        if axis is None:
            moved[name] = [round(float(moved[name][i]) + offset_m[i], 6) for i in (0, 1)]
            continue
        value = round(float(moved[name]) + offset_m[axis], 6)  # no float dust in the log
        low, high = params[name].low, params[name].high
        moved[name] = min(high, max(low, value)) if low is not None and high is not None else value
    return None if moved == call.args else replace(call, args=moved)


def swap_objects(call: SkillCall, old: str, new: str) -> SkillCall:
    """`call` with the objects `old` and `new` exchanged in its string arguments."""
    swapped = {k: new if v == old else old if v == new else v for k, v in call.args.items()}
    return replace(call, args=swapped)


def object_in_use(
    calls: Sequence[SkillCall], skills: dict[str, Skill], objects: Sequence[str]
) -> str | None:
    """The first object argument among `calls` (the current call first): what "instead" replaces."""
    for call in calls:
        if call.skill not in skills:
            continue
        for name in object_params(skills[call.skill], objects):
            if call.args.get(name) in objects:
                return call.args[name]
    return None


# -- the queue and the log -----------------------------------------------------------------------
@dataclass
class CorrectionQueue:
    """Corrections waiting to be applied: `put` from any thread, `poll` from the run loop."""

    _items: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)

    def put(self, text: str) -> None:
        if not text.strip():
            raise ValueError("a correction must be non-empty text.")
        self._items.put((time.time(), text.strip()))

    def poll(self) -> tuple[float, str] | None:
        try:
            return self._items.get_nowait()
        except queue.Empty:
            return None


@dataclass
class Corrections:
    """Where corrections come from and go: the queue, the optional LLM fallback, the log."""

    queue: CorrectionQueue = field(default_factory=CorrectionQueue)
    log: CorrectionLog | None = None
    llm: Any = None  # LLMBackend for corrections the rules do not read


def read_lines_into(stream: TextIO, corrections: CorrectionQueue) -> threading.Thread:
    """A daemon thread that puts every non-empty line of `stream` (stdin) on the queue."""

    def pump() -> None:
        for line in stream:
            if line.strip():
                corrections.put(line)

    thread = threading.Thread(target=pump, name="corrections-reader", daemon=True)
    thread.start()
    return thread


@dataclass
class CorrectionLog:
    """Append-only JSONL of corrections (applied or not understood), one line each.

    `context` is added to every record: the run's instruction, task and seed, so a record is a
    training example on its own (`Runner` sets it)."""

    path: Path
    context: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, **fields: Any) -> dict[str, Any]:
        """Write one correction (the fields of `entry`) and return its record."""
        record = self.entry(**fields) | json.loads(json.dumps(self.context, default=_jsonable))
        with self.path.open("a") as f:
            f.write(json.dumps(record, default=_jsonable) + "\n")
        return record

    @staticmethod
    def entry(
        *,
        received_s: float,
        text: str,
        edit: CorrectionEdit | None,
        error: str | None,
        state: dict[str, Any],
        plan_before: Sequence[SkillCall],
        plan_after: Sequence[SkillCall],
        done: Sequence[SkillCall] = (),
        start_state: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One correction as a plain JSON record: what was said, read, and changed; `done` are
        the calls of this plan that had run (its plan_before's first call is the current one),
        from the world `start_state` the plan began in."""
        record = {
            "time": received_s,
            "text": text,
            "edit": asdict(edit) if edit else None,
            "error": error,
            "state": state,
            "done": [str(c) for c in done],
            "plan_before": [str(c) for c in plan_before],
            "plan_after": [str(c) for c in plan_after],
            "start_state": start_state or {},
        }
        return json.loads(json.dumps(record, default=_jsonable))


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)

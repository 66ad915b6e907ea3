"""Prompts of the planners: API listing, scene summary, few-shot examples (Code as Policies style).

Everything the LLM reads about the robot is generated, never hand-written, so it cannot drift
from what runs: the listing renders each `Skill` as a Python signature with a docstring built from
its description and `Param` specs (types, choices, ranges), and each perception query from its own
spec the same way. Few-shot examples are comment + code (or comment + JSON) pairs on
scenes of their own, and an example is left out when it calls a function the API lacks. Prompts
stay short: the local models have 2-4k tokens of context.

    skill_list(registry) -> [Skill]                    # a name -> Skill mapping or Skills
    api_listing(skills, queries) -> str                # signatures + docstrings
    scene_summary(world_summary) -> str                # a world snapshot (dict) or text
    code_messages(...) / define_messages(...) / skill_messages(...) -> chat messages
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from robocompose.hierarchical.base import Message, Param, Skill
from robocompose.hierarchical.goal.strips import summary
from robocompose.hierarchical.sandbox.names import MODULES, SAFE_BUILTINS

Registry = Mapping[str, Skill] | Iterable[Skill]
# what the sandbox lets a program name without defining it: anything else is asked of the LLM
BUILTIN_NAMES = frozenset(SAFE_BUILTINS)
MODULE_NAMES = frozenset(MODULES)


def skill_list(registry: Registry) -> list[Skill]:
    """The skills of a registry: a name -> Skill mapping (e.g. SkillRegistry) or Skills."""
    skills = list(registry.values()) if isinstance(registry, Mapping) else list(registry)
    bad = [s for s in skills if not isinstance(s, Skill)]
    if bad:
        raise TypeError(f"a skill registry holds `Skill` objects. Got {type(bad[0]).__name__}.")
    return skills


# -- API listing ------------------------------------------------------------------------------
_PY_TYPES = {"str": "str", "float": "float", "int": "int", "vec2": "list[float]"}


def param_doc(param: Param) -> str:
    """`name`: description; one of ... / in [low, high]."""
    parts = [param.description] if param.description else []
    if param.choices is not None:
        parts.append("one of " + ", ".join(param.choices))
    elif param.low is not None or param.high is not None:
        low = "-inf" if param.low is None else f"{param.low:g}"
        high = "inf" if param.high is None else f"{param.high:g}"
        parts.append(f"in [{low}, {high}]" + (" each" if param.type == "vec2" else ""))
    return f"{param.name}: " + "; ".join(parts) if parts else param.name


def _signature(name: str, params: Sequence[Param], returns: str = "") -> str:
    args = ", ".join(f"{p.name}: {_PY_TYPES.get(p.type, p.type)}" for p in params)
    return f"{name}({args})" + (f" -> {returns}" if returns else "")


def _listing(
    name: str, description: str, params: Sequence[Param], returns: str = "", declared: str = ""
) -> str:
    doc = description.strip().rstrip(".") + "."
    if params:
        doc += " " + ". ".join(param_doc(p) for p in params) + "."
    if declared:  # the skill's declared preconditions and effects (`goal.strips.summary`)
        doc += " " + declared
    return f'def {_signature(name, params, returns)}:\n    """{doc}"""'


def api_listing(skills: Sequence[Skill], queries: Iterable[Any] = ()) -> str:
    """The functions a plan may call, as Python signatures with one-line docstrings.

    `queries` are perception functions with `name`, `description`, `params` and `returns`
    (the registry's `Query`)."""
    lines = ["# Skills: each call moves the robot."]
    lines += [_listing(s.name, s.description, s.params, "", summary(s.operators)) for s in skills]
    queries = list(queries)
    if queries:
        lines.append("# Perception: each call reads the scene and moves nothing.")
        lines += [_listing(q.name, q.description, q.params, q.returns) for q in queries]
    return "\n".join(lines)


# -- scene ------------------------------------------------------------------------------------
def _xyz(values: Sequence[float]) -> str:
    return "(" + ", ".join(f"{v:.2f}" for v in values) + ")"  # cm: position() is exact


def scene_summary(world_summary: str | Mapping[str, Any]) -> str:
    """A few lines about the scene: blocks (colour, position, support), bins, what is held.

    Takes a world snapshot (`SimWorld.snapshot()`) or text already written by the caller."""
    if isinstance(world_summary, str):
        return world_summary.strip()
    lines = []
    objects = world_summary.get("objects")
    if isinstance(objects, Mapping):
        for name, info in objects.items():
            where = f" at {_xyz(info['position'])}" if "position" in info else ""
            support = info.get("on")
            on = f" on {support}" if support else (" held" if "on" in info else "")
            bin_name = info.get("in_bin")
            lines.append(f"{name}{where}{on}" + (f" in {bin_name}" if bin_name else ""))
    bins = world_summary.get("bins")
    if isinstance(bins, Mapping):
        lines += [f"{name} at {_xyz(info['position'])}" for name, info in bins.items()]
    if "holding" in world_summary:
        lines.append(f"holding: {world_summary['holding'] or 'nothing'}")
    if not lines:
        return json.dumps(world_summary, default=str, separators=(",", ":"))
    return "\n".join(lines)


# -- few-shot examples ------------------------------------------------------------------------
@dataclass(frozen=True)
class Example:
    """One worked example: a scene, an instruction, and its program and skill list."""

    scene: str
    instruction: str
    code: str
    calls: tuple[tuple[str, dict[str, Any]], ...]


EXAMPLES = (
    Example(
        scene="purple_block at (0.10, 0.05, 0.02) on table\n"
        "orange_block at (-0.08, 0.12, 0.02) on table\n"
        "yellow_block at (0.02, -0.11, 0.02) on table\nholding: nothing",
        instruction="set the orange cube on top of the yellow one",
        code='pick("orange_block")\nplace("orange_block", "yellow_block")',
        calls=(
            ("pick", {"obj": "orange_block"}),
            ("place", {"obj": "orange_block", "target": "yellow_block"}),
        ),
    ),
    Example(
        scene="purple_block at (0.06, -0.03, 0.02) on table\n"
        "orange_block at (-0.12, 0.04, 0.02) on table\n"
        "yellow_bin at (0.12, 0.12, 0.00)\nholding: nothing",
        instruction="drop every block into the yellow bin",
        code='for block in objects():\n    pick(block)\n    place(block, "yellow_bin")',
        calls=(
            ("pick", {"obj": "purple_block"}),
            ("place", {"obj": "purple_block", "target": "yellow_bin"}),
            ("pick", {"obj": "orange_block"}),
            ("place", {"obj": "orange_block", "target": "yellow_bin"}),
        ),
    ),
)


def called_names(code: str) -> set[str]:
    """Names called directly (`f(...)`) in `code`."""
    return {
        node.func.id
        for node in ast.walk(ast.parse(code))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }


def usable_examples(
    skills: Sequence[Skill], api_names: Iterable[str] | None = None
) -> list[Example]:
    """Examples whose skill calls fit `skills` and (unless None) whose program calls only
    `api_names`."""
    params = {s.name: {p.name for p in s.params} for s in skills}
    api = None if api_names is None else set(api_names) | BUILTIN_NAMES
    return [
        ex
        for ex in EXAMPLES
        if (api is None or called_names(ex.code) <= api)
        and all(name in params and set(args) == params[name] for name, args in ex.calls)
    ]


# -- messages ---------------------------------------------------------------------------------
# The listing opens every system message, so a local backend reuses its evaluated prefix across
# the code, definition and skill-list calls.
CODE_SYSTEM = (
    "The functions above are a robot arm's whole API. Write Python that calls only them, "
    "plain Python, `math` and `np`; no imports. Reply with code only."
)
SKILL_SYSTEM = (
    "The skills above are a robot arm's whole API. Reply with a JSON list of skill calls, "
    '[{"skill": name, "args": {...}}, ...], each with all of its arguments.'
)


@dataclass(frozen=True)
class DefineExample:
    """A worked definition request: a call site, the function's name, its definition."""

    call_site: str
    name: str
    code: str


DEFINE_EXAMPLES = (
    DefineExample(
        'put_on("orange_block", "purple_block")',
        "put_on",
        "def put_on(top, bottom):\n    pick(top)\n    place(top, bottom)",
    ),
    DefineExample(
        'clear_table(["purple_block", "orange_block"], "yellow_bin")',
        "clear_table",
        "def clear_table(blocks, bin_name):\n    for block in blocks:\n        pick(block)\n"
        "        place(block, bin_name)",
    ),
)


def usable_define_examples(api_names: Iterable[str]) -> list[DefineExample]:
    """Definition examples that call only `api_names` (and builtins)."""
    api = set(api_names) | BUILTIN_NAMES
    return [ex for ex in DEFINE_EXAMPLES if called_names(ex.code) <= api]


def _system(listing: str, role: str) -> Message:
    return {"role": "system", "content": f"{listing}\n\n{role}"}


def task_text(scene: str, instruction: str) -> str:
    return f"# scene:\n{_comment(scene)}\n# task: {instruction.strip()}"


def _comment(text: str) -> str:
    return "\n".join("# " + line if line else "#" for line in text.strip().splitlines())


def _with_feedback(text: str, feedback: str | None) -> str:
    if not feedback:
        return text
    return (
        f"{text}\n# The last attempt failed:\n{_comment(feedback)}\n"
        "# Continue from the scene above so that the task gets done."
    )


def code_messages(
    listing: str,
    examples: Sequence[Example],
    scene: str,
    instruction: str,
    feedback: str | None = None,
) -> list[Message]:
    """Chat for the main program: the API as system text, examples as user/assistant turns."""
    messages = [_system(listing, CODE_SYSTEM)]
    for ex in examples:
        messages.append({"role": "user", "content": task_text(ex.scene, ex.instruction)})
        messages.append({"role": "assistant", "content": ex.code})
    messages.append(
        {"role": "user", "content": _with_feedback(task_text(scene, instruction), feedback)}
    )
    return messages


def _define_request(call_site: str, name: str) -> str:
    return f"# the program calls: {call_site.strip()}\n# define the function `{name}`"


def define_messages(
    listing: str, examples: Sequence[DefineExample], name: str, call_site: str
) -> list[Message]:
    """Chat asking for the definition of `name`, shown where the program calls it."""
    messages = [_system(listing, CODE_SYSTEM)]
    for ex in examples:
        messages.append({"role": "user", "content": _define_request(ex.call_site, ex.name)})
        messages.append({"role": "assistant", "content": ex.code})
    messages.append({"role": "user", "content": _define_request(call_site, name)})
    return messages


def calls_json(calls: Iterable[tuple[str, Mapping[str, Any]]]) -> str:
    return json.dumps([{"skill": name, "args": dict(args)} for name, args in calls])


def skill_messages(
    listing: str,
    examples: Sequence[Example],
    scene: str,
    instruction: str,
    feedback: str | None = None,
) -> list[Message]:
    """Chat for a JSON skill list; the examples answer with JSON."""
    messages = [_system(listing, SKILL_SYSTEM)]
    for ex in examples:
        messages.append({"role": "user", "content": task_text(ex.scene, ex.instruction)})
        messages.append({"role": "assistant", "content": calls_json(ex.calls)})
    messages.append(
        {"role": "user", "content": _with_feedback(task_text(scene, instruction), feedback)}
    )
    return messages

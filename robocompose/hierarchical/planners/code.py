"""Code planner (Code as Policies): the LLM writes a program over the skill and perception API.

    planner = CodePlanner(backend, registry)  # skills + the registry's perception queries
    plan = planner.plan(instruction, world.snapshot(), feedback=None)
    plan.code, plan.functions_defined, plan.completions, plan.problems

Hierarchical code generation: the program is parsed, and every function it calls that is neither
in the API, a Python builtin, nor defined in the program is asked of the LLM (prompt: the API and
the call site), and the new definitions are checked the same way, recursively, up to
`max_depth` levels of nesting and `max_define_calls` LLM calls in all. The final program is the
definitions followed by the main program. Nothing is executed here: the runner executes the
program through the sandbox, which is where untrusted code is checked. The planner only tidies
benign noise: prose and fences around the code, `import math` / `import numpy as np` (both are
in scope already), and stub redefinitions of API functions (they would shadow the real skill).

`plan.problems` is empty when the program is ready to run; otherwise it says what is wrong (no
code in the reply, a syntax error, functions left undefined by a bound), ready to go back to the
LLM as repair feedback.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from robocompose.hierarchical.base import Completion, LLMBackend, Plan
from robocompose.hierarchical.planners.prompts import (
    BUILTIN_NAMES,
    MODULE_NAMES,
    Example,
    Registry,
    api_listing,
    code_messages,
    define_messages,
    scene_summary,
    skill_list,
    usable_define_examples,
    usable_examples,
)

MAX_SCAN_LINES = 200  # a reply longer than this is not searched line by line for code
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_CODE_LANGS = {"", "python", "py", "python3"}
_IN_SCOPE_IMPORTS = {("math", None), ("numpy", "np")}


class NoCodeError(ValueError):
    """The LLM's reply holds no Python that parses."""


@dataclass(frozen=True)
class CodePlannerConfig:
    """Bounds of one planning call. Depth 1 = the main program's helpers only."""

    max_depth: int = 2
    max_define_calls: int = 4
    max_tokens: int = 384
    define_max_tokens: int = 256
    examples: bool = True

    def __post_init__(self) -> None:
        if self.max_depth < 0:
            raise ValueError(f"`max_depth` must be >= 0. Got {self.max_depth}.")
        if self.max_define_calls < 0:
            raise ValueError(f"`max_define_calls` must be >= 0. Got {self.max_define_calls}.")
        for name in ("max_tokens", "define_max_tokens"):
            if getattr(self, name) < 16:
                raise ValueError(f"`{name}` must be >= 16. Got {getattr(self, name)}.")


@dataclass(frozen=True)
class CodePlan(Plan):
    """A program for the sandbox, the functions the LLM defined for it, and every completion."""

    code: str
    functions_defined: tuple[str, ...] = ()
    completions: tuple[Completion, ...] = ()
    problems: tuple[str, ...] = ()
    undefined: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return "code"

    @property
    def body(self) -> str:
        return self.code


# -- extracting code from a reply --------------------------------------------------------------
def _parses(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError):
        return None


def _trivial(tree: ast.Module) -> bool:
    """Only bare names or constants (a stray word of prose like "Sure" parses as a name)."""
    return all(
        isinstance(node, ast.Expr) and isinstance(node.value, ast.Name | ast.Constant)
        for node in tree.body
    )


def _longest_parsable(lines: list[str]) -> str | None:
    """The longest run of lines that parses as a non-trivial program (prose around it dropped)."""
    lines = lines[:MAX_SCAN_LINES]
    for size in range(len(lines), 0, -1):
        for start in range(len(lines) - size + 1):
            code = textwrap.dedent("\n".join(lines[start : start + size])).strip()
            tree = _parses(code) if code else None
            if tree is not None and tree.body and not _trivial(tree):
                return code
    return None


def extract_code(reply: str) -> str:
    """The Python program in an LLM reply: fenced blocks (joined) or the longest parsable run."""
    blocks = [body for lang, body in _FENCE.findall(reply) if lang.lower() in _CODE_LANGS]
    codes = [c for c in (_longest_parsable(b.splitlines()) for b in blocks) if c]
    if codes:
        return "\n\n".join(codes)
    code = _longest_parsable(reply.splitlines())
    if code is None:
        snippet = reply.strip().replace("\n", " ")[:120]
        raise NoCodeError(f"the reply holds no Python program that parses: {snippet!r}")
    return code


# -- names ------------------------------------------------------------------------------------
def bound_names(tree: ast.AST) -> set[str]:
    """Every name the code binds anywhere: functions, variables, parameters, loop targets."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


def undefined_calls(tree: ast.AST, source: str, known: set[str]) -> list[tuple[str, str]]:
    """(name, call-site line) of each function called but not known, in order of appearance."""
    known = known | bound_names(tree)
    lines = source.splitlines()
    found: dict[str, str] = {}
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id not in known
    ]
    for call in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
        found.setdefault(call.func.id, lines[call.lineno - 1].strip())
    return list(found.items())


def _node_lines(node: ast.stmt) -> tuple[int, int]:
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return first - 1, node.end_lineno or node.lineno


def _drop(source: str, nodes: list[ast.stmt]) -> str:
    drop = {i for node in nodes for i in range(*_node_lines(node))}
    return "\n".join(line for i, line in enumerate(source.splitlines()) if i not in drop).strip()


def _segment(source: str, node: ast.stmt) -> str:
    start, end = _node_lines(node)
    return textwrap.dedent("\n".join(source.splitlines()[start:end]))


def tidy(code: str, api_names: set[str]) -> str:
    """Drop `import math` / `import numpy as np` and top-level redefinitions of API functions."""
    tree = ast.parse(code)
    noise = [
        node
        for node in tree.body
        if isinstance(node, ast.Import)
        and all((a.name, a.asname) in _IN_SCOPE_IMPORTS for a in node.names)
        or isinstance(node, ast.FunctionDef)
        and node.name in api_names
    ]
    return _drop(code, noise) if noise else code


# -- the planner ------------------------------------------------------------------------------
@dataclass
class _Generation:
    definitions: list[str] = field(default_factory=list)
    defined: list[str] = field(default_factory=list)
    completions: list[Completion] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    undefined: list[str] = field(default_factory=list)


class CodePlanner:
    """Writes programs over `registry`'s skills and the `perception` functions.

    Args:
        backend: the LLM.
        registry: a name -> Skill mapping (or Skills): what the program may make the robot do.
        queries: perception functions the program may call to read the scene (`name`,
            `description`, `params`, `returns`; default: the registry's `queries`); the
            sandbox must expose the same names.
        config: bounds of hierarchical generation and completion lengths.
    """

    def __init__(
        self,
        backend: LLMBackend,
        registry: Registry,
        queries: Iterable[Any] | None = None,
        config: CodePlannerConfig | None = None,
    ) -> None:
        self.backend = backend
        self.skills = skill_list(registry)
        if queries is None:
            queries = getattr(registry, "queries", {}).values()
        self.queries = list(queries)
        self.config = config or CodePlannerConfig()
        self.api_names = {s.name for s in self.skills} | {q.name for q in self.queries}
        self.listing = api_listing(self.skills, self.queries)
        self.examples = usable_examples(self.skills, self.api_names) if self.config.examples else []
        self.define_examples = (
            usable_define_examples(self.api_names) if self.config.examples else []
        )
        self._known = self.api_names | BUILTIN_NAMES | MODULE_NAMES

    def plan(
        self,
        instruction: str,
        world_summary: str | Mapping[str, Any],
        feedback: str | None = None,
        examples: Sequence[Example] | None = None,
    ) -> CodePlan:
        """Ask for a program for `instruction` in the scene, then define what it left undefined.
        `examples` replace the few-shot examples for this call (e.g. corrected plans)."""
        if not instruction.strip():
            raise ValueError("`instruction` must not be empty.")
        messages = code_messages(
            self.listing,
            self.examples if examples is None else examples,
            scene_summary(world_summary),
            instruction,
            feedback,
        )
        completion = self.backend.chat(messages, max_tokens=self.config.max_tokens)
        try:
            program = extract_code(completion.text)
        except NoCodeError as e:
            return CodePlan("", completions=(completion,), problems=(str(e),))
        return self.complete(program, completions=(completion,))

    def complete(self, program: str, completions: tuple[Completion, ...] = ()) -> CodePlan:
        """Hierarchical generation on a program: tidy it and define every function it calls
        that nothing defines (within the bounds). `completions` are earlier ones to keep."""
        try:
            main = tidy(program, self.api_names)
        except SyntaxError as e:
            return CodePlan(
                program,
                completions=completions,
                problems=(f"line {e.lineno}: syntax error: {e.msg}.",),
            )
        if not main:
            return CodePlan(
                "", completions=completions, problems=("the program only redefined API functions.",)
            )
        gen = _Generation(completions=list(completions))
        self._define(main, gen, asked_before=len(completions))
        return CodePlan(
            code="\n\n".join([*gen.definitions, main]),
            functions_defined=tuple(gen.defined),
            completions=tuple(gen.completions),
            problems=tuple(gen.problems),
            undefined=tuple(gen.undefined),
        )

    def _define(self, main: str, gen: _Generation, asked_before: int) -> None:
        """Breadth-first: define the main program's unknown calls, then theirs, within bounds."""
        known = set(self._known) | bound_names(ast.parse(main))
        queue = [(name, site, 1) for name, site in undefined_calls(ast.parse(main), main, known)]
        while queue:
            name, site, depth = queue.pop(0)
            if name in known or name in gen.undefined:
                continue
            if depth > self.config.max_depth:
                gen.undefined.append(name)
                gen.problems.append(
                    f"function `{name}` (called as `{site}`) is undefined: definitions may nest "
                    f"only {self.config.max_depth} levels deep."
                )
                continue
            if len(gen.completions) - asked_before >= self.config.max_define_calls:
                gen.undefined.append(name)
                gen.problems.append(
                    f"function `{name}` (called as `{site}`) is undefined: the budget of "
                    f"{self.config.max_define_calls} definition requests is used up."
                )
                continue
            source = self._ask_definition(name, site, gen)
            if source is None:
                gen.undefined.append(name)
                continue
            tree = ast.parse(source)
            new = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
            known |= set(new)
            gen.defined += new
            gen.definitions.append(source)
            queue += [(n, s, depth + 1) for n, s in undefined_calls(tree, source, known)]

    def _ask_definition(self, name: str, site: str, gen: _Generation) -> str | None:
        """The new top-level function definitions of the LLM's reply, or None (problem noted)."""
        completion = self.backend.chat(
            define_messages(self.listing, self.define_examples, name, site),
            max_tokens=self.config.define_max_tokens,
        )
        gen.completions.append(completion)
        try:
            source = extract_code(completion.text)
        except NoCodeError as e:
            gen.problems.append(f"defining `{name}`: {e}")
            return None
        tree = ast.parse(source)
        taken = self.api_names | set(gen.defined)
        defs: list[ast.FunctionDef] = []
        for node in tree.body:  # the first definition of each new name
            if isinstance(node, ast.FunctionDef) and node.name not in taken:
                taken.add(node.name)
                defs.append(node)
        if name not in {d.name for d in defs}:
            gen.problems.append(
                f"defining `{name}`: the reply defines no function `{name}` "
                f"(it defines {[d.name for d in defs] or 'nothing'})."
            )
            return None
        return "\n\n".join(_segment(source, d) for d in defs)

"""The static half of the sandbox: an allow-list over the program's syntax tree, then loop budgets.

`check_program` refuses anything not on the allow-list (imports, classes, try, with, private names
and attributes, attributes outside `names.METHODS` and the `math`/`np` members, builtins that reach
code, files or internals) and names every problem with its line, so the LLM can repair the
program. A program that passes comes back instrumented: every loop iteration, comprehension item
and function call ticks a step counter in the child, which stops runaway loops with a clear error
before the CPU limit has to kill them.
"""

from __future__ import annotations

import ast
import re
from collections import deque
from collections.abc import Iterable

from robocompose.hierarchical.sandbox.names import (
    ATTRIBUTE_REASONS,
    FORBIDDEN_NAMES,
    METHODS,
    MODULES,
    SAFE_BUILTINS,
)

TICK = "__sandbox_tick__"  # counts one step; injected names start with "_" so programs cannot
ITER = "__sandbox_iter__"  # reach them: the check refuses every such name in the program
FILENAME = "<program>"
MAX_PROBLEMS = 10

_STATEMENTS = (
    ast.Module, ast.FunctionDef, ast.Return, ast.Delete, ast.Assign, ast.AugAssign, ast.AnnAssign,
    ast.For, ast.While, ast.If, ast.Raise, ast.Assert, ast.Expr, ast.Pass, ast.Break, ast.Continue,
)  # fmt: skip
_EXPRESSIONS = (
    ast.BoolOp, ast.NamedExpr, ast.BinOp, ast.UnaryOp, ast.Lambda, ast.IfExp, ast.Dict, ast.Set,
    ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Compare, ast.Call,
    ast.FormattedValue, ast.JoinedStr, ast.Constant, ast.Attribute, ast.Subscript, ast.Starred,
    ast.Name, ast.List, ast.Tuple, ast.Slice,
)  # fmt: skip
_PARTS = (
    ast.expr_context, ast.boolop, ast.operator, ast.unaryop, ast.cmpop, ast.comprehension,
    ast.arguments, ast.arg, ast.keyword,
)  # fmt: skip
ALLOWED_NODES = _STATEMENTS + _EXPRESSIONS + _PARTS

_REFUSED = {
    ast.Import: "`import` is not allowed: only the API, `math` and `np` are in scope",
    ast.ImportFrom: "`from ... import` is not allowed: only the API, `math` and `np` are in scope",
    ast.ClassDef: "class definitions are not allowed; use functions, lists and dicts",
    ast.Try: "try/except is not allowed: errors must reach the planner, not be swallowed",
    ast.With: "`with` blocks are not allowed",
    ast.Global: "`global` is not allowed; pass values as arguments and return them",
    ast.Nonlocal: "`nonlocal` is not allowed; pass values as arguments and return them",
    ast.AsyncFunctionDef: "async code is not allowed",
    ast.AsyncFor: "async code is not allowed",
    ast.AsyncWith: "async code is not allowed",
    ast.Await: "async code is not allowed",
    ast.Yield: "generators (`yield`) are not allowed; return a list",
    ast.YieldFrom: "generators (`yield from`) are not allowed; return a list",
    ast.Match: "`match` is not allowed; use if/elif",
}
if hasattr(ast, "TryStar"):
    _REFUSED[ast.TryStar] = _REFUSED[ast.Try]

# A constant format spec such as ".2f" or ">8": at most 3 digits of width, no nested fields.
_SAFE_SPEC = re.compile(r"[<>^=]?[+\- ]?#?0?\d{0,3}[,_]?(\.\d{1,2})?[bcdeEfFgGnosxX%]?")


class SandboxRefusal(ValueError):
    """The static check refused a program; `problems` holds one line per finding."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def check_program(code: str, api_names: Iterable[str], max_code_chars: int = 20_000) -> ast.Module:
    """Parse `code`, refuse it (SandboxRefusal) unless every construct is allowed, and return the
    tree instrumented with step counters, ready for `compile(tree, FILENAME, "exec")`."""
    tree = _parse(code, max_code_chars)
    api = frozenset(api_names)
    problems = _Checker(api, _bound_names(tree)).run(tree)
    if problems:
        raise SandboxRefusal(problems)
    try:
        return ast.fix_missing_locations(_Instrument().visit(tree))
    except RecursionError:
        raise SandboxRefusal(["the program is nested too deeply"]) from None


def _parse(code: str, max_code_chars: int | None) -> ast.Module:
    if not isinstance(code, str):
        raise SandboxRefusal([f"the program must be a str. Got {type(code).__name__}."])
    if max_code_chars is not None and len(code) > max_code_chars:
        raise SandboxRefusal(
            [f"the program has {len(code)} characters; at most {max_code_chars} are allowed"]
        )
    try:
        return ast.parse(code, filename=FILENAME)
    except SyntaxError as e:
        raise SandboxRefusal([f"line {e.lineno}: syntax error: {e.msg}"]) from None
    except (RecursionError, MemoryError):
        raise SandboxRefusal(["the program is nested too deeply to parse"]) from None
    except ValueError as e:  # e.g. null bytes
        raise SandboxRefusal([f"the program cannot be parsed: {e}"]) from None


def _bound_names(tree: ast.AST) -> frozenset[str]:
    """Every name the program binds anywhere: assignments, loop targets, functions, parameters."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return frozenset(bound)


class _Checker:
    """Walks every node once and collects problems instead of stopping at the first."""

    def __init__(self, api: frozenset[str], bound: frozenset[str]) -> None:
        self.api, self.bound = api, bound
        self.visible = api | bound | frozenset(SAFE_BUILTINS) | MODULES.keys()
        self.problems: list[str] = []

    def run(self, tree: ast.Module) -> list[str]:
        """Breadth-first like `ast.walk`, but the inside of a refused construct is not reported."""
        queue = deque([tree])
        while queue:
            if len(self.problems) >= MAX_PROBLEMS:
                self.problems.append("... (more problems not listed)")
                break
            node = queue.popleft()
            if self._node(node):
                queue.extend(ast.iter_child_nodes(node))
        return self.problems

    def _refuse(self, node: ast.AST, message: str) -> None:
        line = getattr(node, "lineno", None)
        self.problems.append(f"line {line}: {message}" if line else message)

    def _node(self, node: ast.AST) -> bool:
        """Check one node; False when it is refused as a whole (its children are not looked at)."""
        if not isinstance(node, ALLOWED_NODES):
            name = type(node).__name__
            self._refuse(node, _REFUSED.get(type(node), f"`{name}` is not allowed"))
            return False
        if isinstance(node, ast.Name):
            self._name(node, node.id, loading=isinstance(node.ctx, ast.Load))
        elif isinstance(node, ast.arg):
            self._name(node, node.arg, loading=False)
        elif isinstance(node, ast.FunctionDef):
            self._name(node, node.name, loading=False)
            if node.decorator_list:
                self._refuse(node, f"decorators on `{node.name}` are not allowed")
        elif isinstance(node, ast.Attribute):
            self._attribute(node)
        elif isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            self._format_spec(node)
        return True

    def _name(self, node: ast.AST, name: str, loading: bool) -> None:
        if name.startswith("_"):
            private = "names starting with '_' are private"
            self._refuse(node, f"name `{name}` is not allowed ({private})")
        elif name in FORBIDDEN_NAMES:
            self._refuse(node, f"`{name}` is not allowed ({FORBIDDEN_NAMES[name]})")
        elif not loading and name in self.api:
            self._refuse(node, f"`{name}` is an API function and cannot be redefined or assigned")
        elif not loading and (name in SAFE_BUILTINS or name in MODULES):
            self._refuse(node, f"`{name}` is provided by the sandbox and cannot be reassigned")
        elif loading and name not in self.visible:
            self._refuse(
                node,
                f"name `{name}` is not defined (not in the API, the allowed builtins, "
                "`math`, `np`, or the program)",
            )

    def _attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if attr.startswith("_"):
            self._refuse(
                node, f"attribute `{attr}` is not allowed (names starting with '_' are private)"
            )
            return
        if not isinstance(node.ctx, ast.Load):
            self._refuse(node, f"assigning or deleting attribute `{attr}` is not allowed")
            return
        members = _namespace_members(node.value)
        if members is not None:
            if attr not in members:
                owner = ast.unparse(node.value)
                self._refuse(
                    node,
                    f"`{owner}.{attr}` is not available in the sandbox (it has: "
                    f"{', '.join(sorted(members))})",
                )
        elif attr not in METHODS:
            reason = ATTRIBUTE_REASONS.get(attr, "not a method of lists, dicts, str or arrays")
            self._refuse(node, f"attribute `{attr}` is not allowed ({reason})")

    def _format_spec(self, node: ast.FormattedValue) -> None:
        spec = node.format_spec
        parts = spec.values if isinstance(spec, ast.JoinedStr) else [spec]
        text = "".join(p.value for p in parts if isinstance(p, ast.Constant))
        constant = all(isinstance(p, ast.Constant) and isinstance(p.value, str) for p in parts)
        if not constant or not _SAFE_SPEC.fullmatch(text):
            self._refuse(
                node,
                "f-string format spec is not allowed (only constant specs such as `.2f` or `>8` "
                "with a width of at most 3 digits)",
            )


def _namespace_members(value: ast.expr) -> frozenset[str] | None:
    """Members of `math`, `np` or `np.linalg` when `value` names one of them, else None."""
    if isinstance(value, ast.Name) and value.id in MODULES:
        members, nested = MODULES[value.id]
        return frozenset(members) | nested.keys()
    if (
        isinstance(value, ast.Attribute)
        and isinstance(value.value, ast.Name)
        and value.value.id in MODULES
    ):
        nested = MODULES[value.value.id][1]
        if value.attr in nested:
            return frozenset(nested[value.attr])
    return None


class _Instrument(ast.NodeTransformer):
    """Inserts the step counter: loop iterables are wrapped, while bodies, function bodies and
    lambdas tick once per pass, so recursion without loops counts too."""

    def _tick(self, at: ast.AST) -> ast.Call:
        return ast.copy_location(ast.Call(ast.Name(TICK, ast.Load()), [], []), at)

    def _counted(self, iterable: ast.expr) -> ast.Call:
        return ast.copy_location(ast.Call(ast.Name(ITER, ast.Load()), [iterable], []), iterable)

    def visit_For(self, node: ast.For) -> ast.For:
        self.generic_visit(node)
        node.iter = self._counted(node.iter)
        return node

    def visit_comprehension(self, node: ast.comprehension) -> ast.comprehension:
        self.generic_visit(node)
        node.iter = self._counted(node.iter)
        return node

    def visit_While(self, node: ast.While) -> ast.While:
        self.generic_visit(node)
        node.body.insert(0, ast.copy_location(ast.Expr(self._tick(node)), node))
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        self.generic_visit(node)
        node.body.insert(0, ast.copy_location(ast.Expr(self._tick(node)), node))
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.Lambda:
        self.generic_visit(node)
        node.body = ast.copy_location(ast.BoolOp(ast.Or(), [self._tick(node), node.body]), node)
        return node

"""No import cycles inside robocompose: the layers of every package run one way.

Every import of a robocompose module is an edge, wherever it stands: at module level, under
`if TYPE_CHECKING:` (a type named from another module is a dependency a reader has to follow)
and inside a function (it runs, only later). `from package import name` is an edge to the
submodule `package.name` when there is one, else to the package. Not edges: a module's implicit
import of its parent packages (Python runs their `__init__` first), and imports of a module whose
name is held in data (`importlib.import_module(FAMILY_MODULES[i])`): those are a registry's
entry points to plugins it must not import up front (policy families, CLI verbs, drivers).

The source is parsed with `ast`; nothing is imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "robocompose"

# module -> imported module -> "file:line" of each import statement
Graph = dict[str, dict[str, list[str]]]


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> its source file, for every module of `package` under `root`."""
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement under `body`, in functions, classes and blocks too."""
    for node in body:
        for child in ast.walk(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The dotted names `node` imports, with relative imports resolved."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        here = module.split(".") if is_package else module.split(".")[:-1]
        parent = here[: len(here) - node.level + 1]
        base = ".".join(parent + ([node.module] if node.module else []))
    return [f"{base}.{alias.name}" for alias in node.names] + [base]


def import_graph(root: Path, package: str) -> Graph:
    modules = module_files(root, package)
    graph: Graph = {name: {} for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in _imports(ast.parse(path.read_text(), str(path)).body):
            names = _targets(name, is_package, node)
            if isinstance(node, ast.ImportFrom):
                # `from pkg import sub`: the submodule when it exists, else the package itself
                found = [n for n in names[:-1] if n in modules] or [names[-1]]
            else:
                found = names
            for target in found:
                while target and target not in modules:
                    target = target.rpartition(".")[0]  # `import pkg.mod.attr` -> pkg.mod
                if target and target != name:
                    where = f"{path.relative_to(root)}:{node.lineno}"
                    graph[name].setdefault(target, []).append(where)
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def describe(graph: Graph, component: list[str]) -> str:
    lines = [" <-> ".join(component)]
    for a in component:
        for b, where in sorted(graph[a].items()):
            if b in component:
                lines.append(f"  {a} -> {b} ({', '.join(where)})")
    return "\n".join(lines)


def test_robocompose_has_no_import_cycle() -> None:
    graph = import_graph(ROOT, PACKAGE)
    assert len(graph) > 100  # the whole package was read
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(describe(graph, c) for c in found)


def test_every_kind_of_import_counts(tmp_path: Path) -> None:
    """The checker sees a cycle closed by a type-only import, one closed inside a function, and
    a relative `from . import sub`; a chain that runs one way is no cycle."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "config.py": "import typing\nif typing.TYPE_CHECKING:\n    from pkg.api import X\n",
        "api.py": "from pkg import config\n",
        "lazy.py": "def f():\n    from pkg.sub.deep import g\n",
        "sub/__init__.py": "",
        "sub/deep.py": "from .. import lazy\n",
        "base.py": "import pkg.sub.deep\n",
        "top.py": "from pkg.base import nothing_named_so\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.top"] == {"pkg.base": ["pkg/top.py:1"]}
    assert cycles(graph) == [["pkg.api", "pkg.config"], ["pkg.lazy", "pkg.sub.deep"]]

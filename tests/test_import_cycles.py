"""No import cycles inside robocompose, and no import that runs up a layer: the package's layers
(`LAYERS`, lowest first) import from their own layer and those below only.

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

# robocompose's layers, lowest first, by the name under the package (a subpackage or a module at
# its root; "__init__" is the package's own): a module imports from its own layer and lower ones.
LAYERS: tuple[tuple[str, ...], ...] = (
    # helpers that import nothing of the package's but each other
    ("__init__", "choices", "devices", "interrupt", "notices", "ports", "records", "stats"),
    ("sim",),  # tasks, scripted experts, demo datasets, the rollout harness
    ("config", "config_help", "shipped"),  # Hydra's task presets and shipped names are sim's tasks
    ("policies",),  # families, training (handed the evaluation by the train verb), checkpoints
    ("evaluation", "chunk_log"),  # the one way a policy is evaluated, and its chunk logs
    ("launch",),  # who runs the episodes (here or Ray), for the sweep, the search and eval
    ("composition",),  # composed policies, evaluated as any policy is
    ("compare", "rollout_config"),  # what the rollout verbs share
    ("hierarchical", "sweep", "viz"),  # applications of the layers below, independent
    ("language_to_rewards",),  # an LLM writes a reward, an MPC runs it: hierarchical's LLMs, world
    ("real_robot",),  # serving and deployment (`deploy viewer=rerun` streams with viz.live)
    ("verbs",),  # every verb: drives the packages below
    ("cli", "__main__"),  # the command line over the verb table
)


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


def _top(module: str) -> str:
    """The name under the package that `module` belongs to ("__init__": the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def unlayered(graph: Graph, layers: tuple[tuple[str, ...], ...]) -> list[str]:
    """Names under the package that `layers` does not place."""
    placed = {name for layer in layers for name in layer}
    return sorted({_top(m) for m in graph} - placed)


def upward_imports(graph: Graph, layers: tuple[tuple[str, ...], ...]) -> list[str]:
    """ "file:line: a (layer) -> b (higher layer)" for each import that runs up a layer."""
    level = {name: i for i, layer in enumerate(layers) for name in layer}
    found = []
    for a, targets in sorted(graph.items()):
        for b, where in sorted(targets.items()):
            if level[_top(b)] > level[_top(a)]:
                up = f"{a} ({_top(a)}) -> {b} ({_top(b)})"
                found += [f"{w}: {up}" for w in where]
    return found


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


def test_no_import_runs_up_a_layer() -> None:
    graph = import_graph(ROOT, PACKAGE)
    missing = unlayered(graph, LAYERS)
    assert not missing, f"in no layer of LAYERS (place each): {missing}"
    found = upward_imports(graph, LAYERS)
    assert not found, (
        "imports up a layer (move the code to the layer it belongs to):\n" + "\n".join(found)
    )


def test_an_import_up_a_layer_fails_wherever_it_stands(tmp_path: Path) -> None:
    """A lazy import and a type-only one from a lower layer up are found, named file:line; a
    registry's `importlib.import_module` of a name held in data and imports down are not."""
    pkg = tmp_path / "pkg"
    (pkg / "low").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "low/__init__.py": "",
        "low/a.py": "import typing\nif typing.TYPE_CHECKING:\n    from pkg.top import T\n",
        "low/b.py": "import importlib\nNAMES = ['pkg.top']\nimportlib.import_module(NAMES[0])\n",
        "mid.py": "from pkg.low import a\n\ndef f():\n    from pkg import top\n",
        "top.py": "from pkg import mid\nimport pkg.low.b\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    graph = import_graph(tmp_path, "pkg")
    layers = (("__init__", "low"), ("mid",), ("top",))
    assert unlayered(graph, layers) == []
    assert upward_imports(graph, layers) == [
        "pkg/low/a.py:3: pkg.low.a (low) -> pkg.top (top)",
        "pkg/mid.py:4: pkg.mid (mid) -> pkg.top (top)",
    ]
    assert unlayered(graph, (("low", "mid", "top"),)) == ["__init__"]


def reachable(graph: Graph, start: str) -> dict[str, str]:
    """Every module `start` imports, directly or through others -> the module that imports it."""
    seen: dict[str, str] = {}
    pending = [start]
    while pending:
        module = pending.pop()
        for target in graph.get(module, {}):
            if target not in seen and target != start:
                seen[target] = module
                pending.append(target)
    return seen


PLANNING = ("goal", "planners", "llm", "skills", "run", "sandbox")
BENCHMARK_DATA = ("robocompose.hierarchical.instructions", "robocompose.hierarchical.adapter")


def test_planning_code_never_imports_benchmark_data_or_adapter_training() -> None:
    """The planners read requests, not the benchmark's sentences; the adapter is a file to them."""
    graph = import_graph(ROOT, PACKAGE)
    found = []
    for module in graph:
        parts = module.split(".")
        if parts[1:2] == ["hierarchical"] and parts[2:3] and parts[2] in PLANNING:
            for target, via in reachable(graph, module).items():
                if target.startswith(BENCHMARK_DATA):
                    found.append(f"{module} reaches {target} (imported by {via})")
    assert not found, "\n".join(found)

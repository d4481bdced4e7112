"""The import direction of docs/architecture.md, checked on the source (AST) and at run time.

    nn -> training -> estimators, sktime -> tasks, cli, bench

A module may import from its own package and from the packages its row allows; anything
else is a layering error (e.g. the core importing a face, a face importing a data loader).
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

# The package under test, wherever it is imported from: the checkout, or an installed copy (the install
# check runs the tests from a copy of the checkout without the package).
PACKAGE = Path(importlib.util.find_spec("ssmts").origin).resolve().parent

# What each part of ssmts may import (besides itself). Top-level modules count as parts.
ALLOWED = {
    "nn": set(),
    "training": {"nn"},
    "data": {"nn"},
    "estimators": {"nn", "training"},
    "sktime": {"nn", "training", "estimators"},
    "plot": {"nn"},
    "baselines": {"data"},
    "tasks": {"nn", "training", "estimators", "data", "baselines", "plot"},
    "cli": {"nn", "training", "estimators", "sktime", "data", "tasks", "plot", "baselines", "bench"},
    "bench": {"nn", "training", "estimators", "sktime", "data", "tasks", "plot", "baselines"},
    "__main__": {"cli"},
    "__init__": {"estimators"},
    "_version": set(),
    "_lazy": set(),
    "_warnings": set(),
    "_files": set(),
}


def _part(module: str) -> str:
    """'ssmts.nn.ssm' -> 'nn'; 'ssmts' -> '__init__'."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "__init__"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _ssmts_imports(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source if source is not None else path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] == "ssmts"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
                # "from . import zero_shot" names submodules of the package itself
                found.append((node.lineno, target))
            elif node.module and node.module.split(".")[0] == "ssmts":
                found.append((node.lineno, node.module))
    return found


def _sources():
    return sorted(p for p in PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_follow_the_layers(path):
    own = _part(_module_name(path)) if path != PACKAGE / "__init__.py" else "__init__"
    allowed = ALLOWED[own] | {own, "_version", "_lazy", "_warnings", "_files"}  # leaves every layer may read
    bad = [(line, target) for line, target in _ssmts_imports(path) if _part(target) not in allowed]
    assert not bad, f"{path.relative_to(PACKAGE)} imports across the layers: {bad} (docs/architecture.md)"


def test_every_part_has_a_row():
    parts = {
        p.name if p.is_dir() else p.stem
        for p in PACKAGE.iterdir()
        if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py"
    }
    assert parts <= set(ALLOWED), f"add a row for {sorted(parts - set(ALLOWED))} to ALLOWED and the architecture page"


def test_import_ssmts_nn_loads_no_sklearn_pandas_or_sktime():
    code = (
        "import sys, ssmts.nn, ssmts.nn.heads, ssmts.nn.analysis, ssmts.training; "
        "print(sorted(m for m in ('sklearn', 'pandas', 'sktime') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_checker_sees_a_violation():
    """The AST walk resolves relative imports: a face imported from the core is caught."""
    imports = _ssmts_imports(PACKAGE / "nn" / "probe.py", source="from ..estimators import SSMClassifier\n")
    assert imports == [(1, "ssmts.estimators")] and _part(imports[0][1]) not in ALLOWED["nn"]


def _warn_calls_without_caller_stacklevel(source: str) -> list[int]:
    """Lines of `warnings.warn(...)` calls whose stacklevel is not `caller_stacklevel()`."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "warnings.warn":
            levels = [k.value for k in node.keywords if k.arg == "stacklevel"]
            if len(node.args) > 2 or not levels or ast.unparse(levels[0]) != "caller_stacklevel()":
                bad.append(node.lineno)
    return bad


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_warning_names_the_users_line(path):
    """A fixed stacklevel names the right line only at one call depth (sktime's and scikit-learn's
    wrappers add frames); every warning asks ssmts._warnings.caller_stacklevel instead."""
    bad = _warn_calls_without_caller_stacklevel(path.read_text(encoding="utf-8"))
    assert not bad, f"{path.relative_to(PACKAGE)}: warnings.warn without stacklevel=caller_stacklevel() at lines {bad}"


@pytest.mark.parametrize(
    "source",
    [
        "import warnings\nwarnings.warn('x')\n",
        "import warnings\nwarnings.warn('x', stacklevel=2)\n",
        "import warnings\nwarnings.warn('x', FutureWarning, 2)\n",
    ],
)
def test_the_warning_checker_sees_a_fixed_or_missing_stacklevel(source):
    assert _warn_calls_without_caller_stacklevel(source) == [2]
    assert (
        _warn_calls_without_caller_stacklevel("import warnings\nwarnings.warn('x', stacklevel=caller_stacklevel())\n")
        == []
    )


# ---------------------------------------------------------------- no import circles
def _import_graph(sources: dict[str, str], packages: set[str]) -> dict[str, set[str]]:
    """{module: the ssmts modules it imports} from the modules' sources ({name: source}; `packages`: the
    names that are packages), every import counted (at the top, in functions, under TYPE_CHECKING).
    `from pkg import name` names the submodule pkg.name where there is one, else pkg itself; relative
    imports are resolved against the importing module's package."""
    graph = {}
    for module, source in sources.items():
        package = module if module in packages else module.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names if alias.name.split(".")[0] == "ssmts"}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                elif node.module and node.module.split(".")[0] == "ssmts":
                    target = node.module
                else:
                    continue
                for alias in node.names:
                    submodule = f"{target}.{alias.name}"
                    targets.add(submodule if submodule in sources else target)
        graph[module] = {t for t in targets if t in sources and t != module}
    return graph


def _import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles of the graph: one per strongly connected component of more than one module (Tarjan),
    given as a closed path through it."""
    index, low, stack, on_stack, components, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(set(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    cycles = []
    for component in components:  # a closed path: breadth-first from the first member back to itself
        start = min(component)
        paths, seen = {start: [start]}, {start}
        frontier = [start]
        closed = None
        while frontier and closed is None:
            following = []
            for node in frontier:
                for nxt in sorted(graph[node] & component):
                    if nxt == start:
                        closed = paths[node] + [start]
                        break
                    if nxt not in seen:
                        seen.add(nxt)
                        paths[nxt] = paths[node] + [nxt]
                        following.append(nxt)
                if closed:
                    break
            frontier = following
        cycles.append(closed)
    return cycles


def test_no_module_of_ssmts_imports_itself_in_a_circle():
    """Two modules that import each other (even inside a function) hold one idea between them, or a
    piece that belongs elsewhere: move the shared piece, so that each module can be read on its own."""
    paths = {_module_name(path): path for path in _sources()}
    sources = {module: path.read_text(encoding="utf-8") for module, path in paths.items()}
    packages = {module for module, path in paths.items() if path.name == "__init__.py"}
    cycles = _import_cycles(_import_graph(sources, packages))
    assert not cycles, "import circles between modules of ssmts:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_cycle_checker_sees_a_circle_through_a_function_level_relative_import():
    sources = {
        "ssmts.nn.ssm": "from .checks import require_tensor\n",
        "ssmts.nn.checks": "def f():\n    from . import dense\n",
        "ssmts.nn.dense": "from ssmts.nn.ssm import SSM\n",
        "ssmts.nn.kernels": "from .checks import require_tensor\n",
    }
    graph = _import_graph(sources, packages=set())
    assert graph["ssmts.nn.checks"] == {"ssmts.nn.dense"}
    assert _import_cycles(graph) == [["ssmts.nn.checks", "ssmts.nn.dense", "ssmts.nn.ssm", "ssmts.nn.checks"]]
    assert _import_cycles({**graph, "ssmts.nn.dense": set()}) == []

"""No import circle between the modules of ``spotpatch_agent``, and nothing above ``protocol/`` imported by it
(issue 30, acceptance 2; the package-level table of docs/architecture.md is tests/architecture/test_import_graph.py).

Every module is parsed with :mod:`ast` (nothing is imported or run). A node is one module
(``spotpatch_agent.worktree.journal``; a package's ``__init__.py`` is the package's own name). An edge ``a → b``
means ``a`` names ``b`` in an import, wherever it is written:

- at the top, inside a function (the lazy imports of the cold start, a PEP 562 ``__getattr__`` loader) and
  under ``if TYPE_CHECKING:`` — a lazy or type-only import still ties the two modules together (the type
  checker follows it, a rename breaks it, and "imported lazily: it imports this module" is a circle);
- ``import a.b`` and ``from a.b import x``, relative imports resolved; ``from a import b`` is an edge to the
  submodule ``a.b`` when there is one, else to ``a``;
- ``importlib.import_module("spotpatch_agent.…")`` and ``__import__`` with a constant string (a computed name
  is not followed);
- not: the parent packages an import runs on the way (``import a.b.c`` does not count as importing ``a.b``'s
  ``__init__``: every package whose ``__init__`` re-exports a submodule would otherwise be a circle).

A circle (``a`` imports ``b``, ``b`` imports ``a``, directly or through others) means the piece both need
belongs in a module below both: move it there (``provider/sanitize.py``, ``init/repo.py``, ``PageText`` in
``tools/context.py`` did that), do not hide the import.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "spotpatch_agent"
#: What ``protocol/`` may import besides the standard library and itself: pydantic and its own two packages.
PROTOCOL_THIRD_PARTY = {"pydantic", "pydantic_core", "typing_extensions"}


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """``{dotted module name: file}`` for every module under ``package`` (its ``__init__`` as the package)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _base(name: str, path: Path, node: ast.ImportFrom) -> str:
    """The module a ``from … import`` names, relative levels resolved against module ``name`` at ``path``."""
    if not node.level:
        return node.module or ""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join([*package, *([node.module] if node.module else [])])


def imported_names(name: str, path: Path, source: str) -> list[tuple[str, int]]:
    """Every ``(dotted name, line)`` the module ``name`` (at ``path``) imports, wherever in ``source``: for
    ``from a import b, c`` both ``a.b`` and ``a.c`` (each is the submodule when there is one, else ``a``:
    :func:`resolve`)."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _base(name, path, node)
            found += [(base if alias.name == "*" else f"{base}.{alias.name}", node.lineno) for alias in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called in ("import_module", "__import__"):
                found.append((node.args[0].value, node.lineno))
    return found


def resolve(target: str, known: dict[str, Path]) -> str | None:
    """The longest known module that ``target`` names (``a.b.func`` → ``a.b``), or None (not ours)."""
    parts = target.split(".")
    while parts:
        if ".".join(parts) in known:
            return ".".join(parts)
        parts.pop()
    return None


def module_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """``{module: the other modules of the package it imports}``."""
    known = modules(package)
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for target, _line in imported_names(name, path, path.read_text(encoding="utf-8")):
            resolved = resolve(target, known)
            if resolved is not None and resolved != name:
                graph[name].add(resolved)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (each a set of import circles), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
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
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_import_cycle_between_modules() -> None:
    graph = module_graph()
    problems = []
    for component in circles(graph):
        edges = [f"{a} → {b}" for a in component for b in sorted(graph[a]) if b in component]
        problems.append("circle of " + ", ".join(component) + ":\n      " + "\n      ".join(edges))
    assert not problems, (
        "import circles between modules (lazy and type-only imports count; move what both need into a module "
        "below both):\n  " + "\n  ".join(problems))


def upward_imports(package: Path = PACKAGE) -> list[str]:
    """Every import of ``protocol/`` that is not the standard library, pydantic (with pydantic_core and
    typing_extensions), ``protocol/`` itself or the package's ``__init__`` (its version constants)."""
    known = modules(package)
    found = set()
    for name, path in known.items():
        if name != "spotpatch_agent.protocol" and not name.startswith("spotpatch_agent.protocol."):
            continue
        for target, line in imported_names(name, path, path.read_text(encoding="utf-8")):
            top = target.split(".")[0]
            if top != "spotpatch_agent":
                if top not in sys.stdlib_module_names and top not in PROTOCOL_THIRD_PARTY:
                    found.add(f"{path.relative_to(package.parent)}:{line} imports {top}")
                continue
            resolved = resolve(target, known)
            if resolved not in (None, "spotpatch_agent", "spotpatch_agent.protocol") \
                    and not resolved.startswith("spotpatch_agent.protocol."):
                found.add(f"{path.relative_to(package.parent)}:{line} imports {resolved}")
    return sorted(found)


def test_protocol_imports_nothing_above_it() -> None:
    """``protocol/`` is the wire contract everything else stands on: nothing it imports may import it back."""
    init = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    assert not [n for n in ast.walk(init) if isinstance(n, (ast.Import, ast.ImportFrom))], \
        "spotpatch_agent/__init__.py must hold only the version constants (protocol/ imports them)"
    upward = upward_imports()
    assert not upward, ("protocol/ imports from above it (move what it needs down into protocol/, and re-export "
                        "it from the old place if others import it there):\n  " + "\n  ".join(upward))


# ---------------------------------------------------------------- the walker's own rules


def _probe_package(tmp_path: Path, files: dict[str, str]) -> Path:
    package = tmp_path / "spotpatch_agent"
    for rel, text in {"__init__.py": "", **files}.items():
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        (package / rel).write_text(text, encoding="utf-8")
    return package


def test_the_walker_sees_lazy_type_only_relative_and_import_module_edges(tmp_path: Path) -> None:
    package = _probe_package(tmp_path, {
        "a/__init__.py": "",
        "a/one.py": ("from __future__ import annotations\nfrom typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n    from spotpatch_agent.a.two import X\n"),
        "a/two.py": "def later():\n    from . import three\n",
        "a/three.py": "def __getattr__(name):\n    from spotpatch_agent.a import one\n",
        "b.py": "import importlib\nM = importlib.import_module('spotpatch_agent.a.two')\nfrom .a.one import f\n",
    })
    graph = module_graph(package)
    assert graph["spotpatch_agent.a.one"] == {"spotpatch_agent.a.two"}
    assert graph["spotpatch_agent.a.two"] == {"spotpatch_agent.a.three"}
    assert graph["spotpatch_agent.a.three"] == {"spotpatch_agent.a.one"}  # the module, not the package
    assert graph["spotpatch_agent.b"] == {"spotpatch_agent.a.two", "spotpatch_agent.a.one"}
    assert circles(graph) == [["spotpatch_agent.a.one", "spotpatch_agent.a.three", "spotpatch_agent.a.two"]]


def test_importing_a_submodule_is_no_edge_to_its_package(tmp_path: Path) -> None:
    package = _probe_package(tmp_path, {
        "a/__init__.py": "from spotpatch_agent.a.one import f\n",
        "a/one.py": "from spotpatch_agent.a.two import g\n",
        "a/two.py": "g = 1\n",
    })
    assert circles(module_graph(package)) == []


def test_an_upward_import_from_protocol_is_found(tmp_path: Path) -> None:
    package = _probe_package(tmp_path, {
        "checks/__init__.py": "",
        "checks/plan.py": "def rule(): ...\n",
        "protocol/__init__.py": "from spotpatch_agent import PROTOCOL_VERSION\nimport json, pydantic\n",
        "protocol/config.py": ("from typing_extensions import TypeAliasType\nfrom . import base\n"
                               "def check():\n    from spotpatch_agent.checks.plan import rule\n"),
        "protocol/base.py": "import httpx\n",
    })
    assert upward_imports(package) == ["spotpatch_agent/protocol/base.py:1 imports httpx",
                                       "spotpatch_agent/protocol/config.py:4 imports spotpatch_agent.checks.plan"]

"""The module table of docs/architecture.md ("Modules", column "today") is the package's real import graph.

Every module of ``spotpatch_agent`` is parsed with :mod:`ast` (nothing is imported or run). The graph is
package-level: a node is a subpackage (``engine``, ``worktree`` …) or a top-level module (``cli``,
``errors`` …) of ``spotpatch_agent``; an edge ``a → b`` means some module of ``a`` imports some module of
``b``. Moving code between the modules of one package therefore never changes it. What counts as an import:

- ``import spotpatch_agent.x…`` and ``from spotpatch_agent.x… import …``, relative imports resolved, and
  ``from spotpatch_agent import x`` when ``x`` is a node;
- wherever it is written: at the top, inside a function (the lazy imports of the cold-start path), and
  under ``if TYPE_CHECKING:`` — a type-only import still couples the two packages (a rename breaks it,
  the type checker follows it), so it is an arrow like any other;
- not: imports within one node, ``from spotpatch_agent import __version__`` (the package's ``__init__``
  holds only the version constants and imports nothing), and ``importlib.import_module`` strings.

The table's grammar (column "today", the last one): a comma-separated list of nodes, each optionally in
backticks, optionally dotted (``policy.redact`` counts as ``policy``) and optionally followed by a note in
parentheses; or ``none``; or ``as allowed`` (then the "allowed" column, read the same way after its ``→``).
Every node needs a row, and every row names a node.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "spotpatch_agent"
DOC = REPO / "docs" / "architecture.md"
HOW_TO_FIX = (
    "Fix docs/architecture.md, section 'Modules': in the row of the importing module (first column, e.g. "
    "`engine/` or `cli.py`), the last column ('today') lists every package or top-level module it imports, "
    "comma-separated, an optional note in parentheses after each (see the grammar in "
    "tests/architecture/test_import_graph.py). Add a missing arrow there, or remove the import that should not exist; "
    "remove an arrow the code no longer has. A new top-level module or subpackage needs its own row."
)


def node_names() -> set[str]:
    """The graph's nodes: every subpackage and top-level module of ``spotpatch_agent``."""
    names = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    names |= {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    return names


def _module_parts(path: Path) -> list[str]:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imported(node: ast.Import | ast.ImportFrom, path: Path, nodes: set[str]) -> list[str]:
    """The nodes of ``spotpatch_agent`` one import statement of ``path`` names."""
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    else:
        if node.level:
            package = _module_parts(path)
            if path.name != "__init__.py":
                package = package[:-1]
            base = package[: len(package) - (node.level - 1)]
            module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            module = node.module or ""
        targets = [module]
        if module == "spotpatch_agent":  # from spotpatch_agent import engine
            targets = [f"{module}.{alias.name}" for alias in node.names if alias.name in nodes]
    found = []
    for target in targets:
        parts = target.split(".")
        if parts[0] == "spotpatch_agent" and len(parts) > 1:
            found.append(parts[1])
    return found


def real_graph() -> dict[str, set[str]]:
    """``{node: the other nodes it imports}`` for every node, from the source."""
    nodes = node_names()
    graph: dict[str, set[str]] = {name: set() for name in nodes}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = _module_parts(path)
        if len(parts) < 2:  # spotpatch_agent/__init__.py
            continue
        source = parts[1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[source].update(t for t in _imported(node, path, nodes) if t != source)
    return graph


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def _row_node(cell: str) -> str:
    m = re.fullmatch(r"`([A-Za-z_][A-Za-z0-9_]*)(?:\.py|/)`", cell)
    assert m, f"docs/architecture.md module table: the first cell {cell!r} must be `name.py` or `name/`"
    return m.group(1)


def _split_items(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses, notes in parentheses removed."""
    items, depth, current = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
        elif depth == 0 and ch != ")":
            current += ch
    items.append(current)
    return [item.strip() for item in items if item.strip()]


def _listed(text: str, row: str, nodes: set[str]) -> set[str]:
    text = text.strip().removeprefix("→").strip()
    if text in ("none", "nothing internal"):
        return set()
    listed = set()
    for item in _split_items(text):
        m = re.fullmatch(r"`?([A-Za-z_][A-Za-z0-9_]*)(?:\.[A-Za-z0-9_.]+)?(?:\.py|/)?`?", item)
        assert m and m.group(1) in nodes, (
            f"docs/architecture.md module table, row {row!r}: cannot read {item!r} as a package or top-level "
            f"module of spotpatch_agent (one of {sorted(nodes)}). {HOW_TO_FIX}")
        listed.add(m.group(1))
    return listed


def documented_graph() -> dict[str, set[str]]:
    """``{node: the nodes its row's 'today' column lists}`` from the module table of docs/architecture.md."""
    nodes = node_names()
    text = DOC.read_text(encoding="utf-8")
    section = text.split("\n## Modules\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    header = next(line for line in section.splitlines() if line.startswith("| module"))
    columns = _cells(header)
    assert columns[-1] == "today" and any(c.startswith("allowed") for c in columns), columns
    allowed_at = next(i for i, c in enumerate(columns) if c.startswith("allowed"))
    graph: dict[str, set[str]] = {}
    for line in rows:
        cells = _cells(line)
        assert len(cells) == len(columns), f"docs/architecture.md module table: {line[:80]!r} has {len(cells)} cells"
        node = _row_node(cells[0])
        assert node in nodes, f"docs/architecture.md module table: row {cells[0]} names no module of spotpatch_agent"
        assert node not in graph, f"docs/architecture.md module table: two rows for {cells[0]}"
        today = cells[-1]
        graph[node] = _listed(cells[allowed_at] if today == "as allowed" else today, cells[0], nodes)
    return graph


def test_the_module_table_lists_exactly_the_real_package_imports() -> None:
    real, documented = real_graph(), documented_graph()
    problems = [f"no row for `{name}` (imports: {', '.join(sorted(real[name])) or 'none'})"
                for name in sorted(set(real) - set(documented))]
    for name in sorted(set(real) & set(documented)):
        problems += [f"missing arrow {name} → {dep}" for dep in sorted(real[name] - documented[name])]
        problems += [f"arrow {name} → {dep} is in the table but not in the code" for dep in
                     sorted(documented[name] - real[name])]
    assert not problems, "docs/architecture.md module table differs from the import graph:\n  " + "\n  ".join(
        problems) + "\n" + HOW_TO_FIX


def test_the_parser_sees_imports_everywhere_a_module_can_hold_them(tmp_path: Path) -> None:
    # The walker's own rules on a module written for it (the real tree is checked above).
    source = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "import spotpatch_agent.policy.redact\n"
        "from spotpatch_agent import __version__, errors\n"
        "from ..worktree import git\n"
        "from . import loop\n"
        "if TYPE_CHECKING:\n"
        "    from spotpatch_agent.provider.base import ProviderAdapter\n"
        "def later():\n"
        "    from spotpatch_agent.checks.runner import check_env\n"
    )
    path = PACKAGE / "engine" / "_probe_module.py"  # never written: only its place matters
    nodes = node_names()
    found = sorted({t for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.Import, ast.ImportFrom))
                    for t in _imported(n, path, nodes)})
    assert found == ["checks", "engine", "errors", "policy", "provider", "worktree"]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every elementary cycle's nodes found by a depth-first walk (each cycle reported once, from its
    smallest node)."""
    found: list[list[str]] = []

    def walk(start: str, node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                found.append([*path, start])
            elif nxt > start and nxt not in path:
                walk(start, nxt, [*path, nxt])

    for start in sorted(graph):
        walk(start, start, [start])
    return found


def test_no_cycle_between_packages() -> None:
    """design.md §2 layers the packages; a cycle (package A imports B, B imports A, directly or through
    others, type-only imports included) means one of them belongs below the other. Break it by moving what
    both need into the lower one (as `context.quote` did for the prompt quoting engine and suggestion share,
    and `protocol.read_paths` for the `readPaths` rule the config validator and the check sandbox share)."""
    assert [" → ".join(c) for c in _cycles(real_graph())] == []


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []

"""The worktree package stays in rooms that do one thing (issue 21): no module over 550 lines, no facade."""

from __future__ import annotations

import ast
from pathlib import Path

import spotpatch_agent.worktree as worktree

PACKAGE = Path(worktree.__file__).parent
MAX_LINES = 550


def test_no_worktree_module_is_over_550_lines() -> None:
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in PACKAGE.glob("*.py")}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_the_package_init_is_only_its_docstring() -> None:
    # Modules are imported by their own names: the package re-exports nothing and imports nothing.
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    assert len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr) and "create" in (ast.get_docstring(tree) or "")

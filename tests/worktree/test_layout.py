"""The worktree package stays in rooms that do one thing (issue 21): no facade (module sizes:
tests/architecture/test_module_size.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import spotpatch_agent.worktree as worktree

PACKAGE = Path(worktree.__file__).parent


def test_the_package_init_is_only_its_docstring() -> None:
    # Modules are imported by their own names: the package re-exports nothing and imports nothing.
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    assert len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr) and "create" in (ast.get_docstring(tree) or "")

"""One PEP 562 loader (issue 30): packages get their lazy ``__getattr__`` from
``spotpatch_agent/protocol/lazy.py``'s ``lazy_exports``; no module writes its own (there were six, one dead)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "spotpatch_agent"
HOME = PACKAGE / "protocol" / "lazy.py"


def own_loaders(path: Path) -> list[int]:
    """Lines of ``path`` defining a module-level ``__getattr__`` function (an assignment from the helper is fine)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.lineno for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "__getattr__"]


def test_no_module_writes_its_own_lazy_loader() -> None:
    found = [f"{p.relative_to(PACKAGE.parent)}:{line}" for p in sorted(PACKAGE.rglob("*.py")) if p != HOME
             for line in own_loaders(p)]
    assert not found, "use spotpatch_agent.protocol.lazy.lazy_exports instead of a hand-written __getattr__:\n" + \
        "\n".join(found)


def test_the_helper_loads_keeps_and_refuses_like_a_module() -> None:
    import spotpatch_agent.checks as checks

    checks.__dict__.pop("check_env", None)
    loaded = checks.check_env
    assert checks.__dict__["check_env"] is loaded, "kept in the package's namespace after the first use"
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        checks.nope  # noqa: B018 - the attribute access is the test


def test_the_scan_sees_a_hand_written_loader(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("x = 1\n\ndef __getattr__(name):\n    raise AttributeError(name)\n")
    assert own_loaders(module) == [3]

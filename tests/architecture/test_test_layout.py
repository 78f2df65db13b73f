"""The Python tests' own layout (issue 30; the rule in tests/support/__init__.py).

- No module under ``tests/`` imports a test module (``test_*.py``): a shared helper lives in a support module
  (``tests/<folder>/_support.py``, ``_<topic>.py``, or ``tests/support/<topic>.py``), so editing one test file
  cannot break another. Before, 17 test modules were imported by others (45 import statements; editing
  ``tests/e2e/test_serve_job.py`` broke 12 files).
- A test file is named after what it checks, not after the issue or the review that found the bug: no
  ``breaker``, ``issue`` or ``break_<N>`` in its name.

The scan reads every ``import``/``from … import`` (absolute and relative, at any depth, also inside a function)
and every ``importlib.import_module``/``__import__`` call with a constant name.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
#: Words a test file's name must not carry: they name where a bug was found, not what the test checks.
HISTORY_NAME = re.compile(r"breaker|issue|break_\d+", re.IGNORECASE)


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, root: Path) -> list[tuple[int, str]]:
    """``(line, dotted name)`` of every module ``path`` imports, ``from x import y`` giving ``x`` and ``x.y``
    (``y`` may be a module); relative imports resolved against ``path``'s package."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called in ("import_module", "__import__"):
                found.append((node.lineno, node.args[0].value))
    return found


def imports_of_test_modules(root: Path) -> list[str]:
    """``path:line: module`` for each import of a test module by any module under ``root/tests``."""
    out = []
    for path in sorted((root / "tests").rglob("*.py")):
        for line, module in imported_modules(path, root):
            parts = module.split(".")
            if parts[0] == "tests" and parts[-1].startswith("test_"):
                out.append(f"{path.relative_to(root)}:{line}: {module}")
    return sorted(set(out))


def history_names(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in sorted((root / "tests").rglob("test_*.py"))
            if HISTORY_NAME.search(p.name)]



def test_no_imports_of_test_modules_another_test_module() -> None:
    found = imports_of_test_modules(ROOT)
    assert not found, ("move the shared helper into a support module (tests/support/__init__.py says where) "
                       "instead of importing a test module:\n" + "\n".join(found))


def test_test_files_are_named_after_what_they_check() -> None:
    found = history_names(ROOT)
    assert not found, "name the file after what it checks, not breaker/issue N:\n" + "\n".join(found)


def test_the_scan_sees_every_import_form_and_every_history_name(tmp_path: Path) -> None:
    files = {
        "tests/__init__.py": "",
        "tests/a/__init__.py": "",
        "tests/a/test_one.py": "X = 1\n",
        "tests/a/_support.py": "Y = 1\n",
        "tests/a/test_abs.py": "from tests.a.test_one import X\n",
        "tests/a/test_plain.py": "import tests.a.test_one\n",
        "tests/a/test_rel.py": "from .test_one import X\n",
        "tests/a/test_rel_pkg.py": "from . import test_one\n",
        "tests/a/test_parent.py": "from ..a.test_one import X\n",
        "tests/a/test_pkg_attr.py": "from tests.a import test_one\n",
        "tests/a/test_lazy.py": "def f():\n    from tests.a.test_one import X\n    return X\n",
        "tests/a/test_dyn.py": "import importlib\nM = importlib.import_module('tests.a.test_one')\n",
        "tests/a/test_fine.py": "from tests.a._support import Y\nfrom ._support import Y as Z\nimport pytest\n",
        "tests/a/test_sandbox_breaker.py": "",
        "tests/a/test_issue_12.py": "",
        "tests/a/test_break_25_scan.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    importers = {line.split(":")[0] for line in imports_of_test_modules(tmp_path)}
    assert importers == {f"tests/a/test_{n}.py" for n in
                         ("abs", "plain", "rel", "rel_pkg", "parent", "pkg_attr", "lazy", "dyn")}
    assert history_names(tmp_path) == ["tests/a/test_break_25_scan.py", "tests/a/test_issue_12.py",
                                       "tests/a/test_sandbox_breaker.py"]

"""The path policy is used through its public names only (issue 21).

No module outside ``spotpatch_agent/policy/`` (package or tests) may import or reach a private name
(``_x``) of a policy module: the listing once rebuilt its filter by string-editing the policy's private
regex. What the other packages need is public (``is_readable_name``, ``readable_names``, …).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
POLICY = "spotpatch_agent.policy"


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _resolve(module: str | None, level: int, current: str, is_package: bool) -> str:
    """The absolute module of a ``from … import`` in module ``current``."""
    if level == 0:
        return module or ""
    base = current.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def private_policy_uses(source: str, module: str, *, is_package: bool = False) -> list[str]:
    """Each use of a policy module's private name in ``source`` (the code of ``module``), as
    ``"line: policy.module._name"``: ``from policy.m import _x``, ``m._x`` / ``policy.m._x`` for a policy
    module bound by any import form, and ``getattr``/``setattr`` (``monkeypatch.setattr`` too) of such a
    module with a private string name."""
    tree = ast.parse(source)
    aliases: dict[str, str] = {}  # local name -> policy module it is bound to
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source_module = _resolve(node.module, node.level, module, is_package)
            for alias in node.names:
                full = f"{source_module}.{alias.name}"
                if not (full == POLICY or full.startswith(POLICY + ".")):
                    continue
                if _private(alias.name) and source_module.startswith(POLICY):
                    found.append(f"{node.lineno}: {full}")
                else:
                    aliases[alias.asname or alias.name] = full
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == POLICY or alias.name.startswith(POLICY + "."):
                    if alias.asname:
                        aliases[alias.asname] = alias.name
                    for part in alias.name.split(".")[2:]:
                        if _private(part):
                            found.append(f"{node.lineno}: {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            owner = _dotted(node.value)
            if owner is None:
                continue
            head, _, rest = owner.partition(".")
            target = aliases.get(head, head) + (f".{rest}" if rest else "")
            if target == POLICY or target.startswith(POLICY + "."):
                found.append(f"{node.lineno}: {target}.{node.attr}")
        elif isinstance(node, ast.Call) and len(node.args) >= 2:
            func = _dotted(node.func) or ""
            if func.rpartition(".")[2] not in ("getattr", "setattr", "delattr", "hasattr"):
                continue
            owner = _dotted(node.args[0])
            name = node.args[1]
            if owner is None or not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                continue
            head, _, rest = owner.partition(".")
            target = aliases.get(head, head) + (f".{rest}" if rest else "")
            if (target == POLICY or target.startswith(POLICY + ".")) and _private(name.value):
                found.append(f"{node.lineno}: {target}.{name.value}")
    return found


@pytest.mark.parametrize(
    "source",
    [
        "from spotpatch_agent.policy.paths import _PROTECTED_READ\n",
        "from spotpatch_agent.policy.paths import BOM, _KEY_SUFFIXES as keys\n",
        "def f():\n    from spotpatch_agent.policy.paths import _FAST_PATH\n",
        "from spotpatch_agent.policy import paths\nx = paths._PROTECTED_READ.pattern\n",
        "from spotpatch_agent.policy import paths as p\np._protected_pattern(False)\n",
        "import spotpatch_agent.policy.paths\nspotpatch_agent.policy.paths._DRIVE\n",
        "import spotpatch_agent.policy.paths as pp\npp._DRIVE.match('c:')\n",
        "from spotpatch_agent import policy\npolicy.paths._DRIVE\n",
        "from ..policy.paths import _DRIVE\n",
        "from spotpatch_agent.policy import redact\nmonkeypatch.setattr(redact, '_SECRET', 1)\n",
        "from spotpatch_agent.policy import paths\ngetattr(paths, '_DRIVE')\n",
        "from spotpatch_agent.policy import _internal\n",
    ],
)
def test_the_scan_finds_each_form_of_private_use(source: str) -> None:
    assert private_policy_uses(source, "spotpatch_agent.tools.context"), source


@pytest.mark.parametrize(
    "source",
    [
        "from spotpatch_agent.policy.paths import BOM, readable_names\n",
        "from spotpatch_agent.policy import paths\npaths.is_protected('a')\npaths.__all__\n",
        "from spotpatch_agent.tools import context\ncontext._listing\n",
        "import re\nre._pattern_type\n",
        "getattr(thing, '_x')\n",
    ],
)
def test_the_scan_accepts_public_use(source: str) -> None:
    assert private_policy_uses(source, "spotpatch_agent.tools.context") == []


def test_no_module_outside_the_policy_uses_its_private_names() -> None:
    found: list[str] = []
    files = [*(REPO / "spotpatch_agent").rglob("*.py"), *(REPO / "tests").rglob("*.py")]
    assert len(files) > 100
    for path in files:
        if (REPO / "spotpatch_agent" / "policy") in path.parents:
            continue
        module = _module_name(path)
        source = path.read_text(encoding="utf-8")
        found += [f"{path.relative_to(REPO)}:{use}" for use in
                  private_policy_uses(source, module, is_package=path.name == "__init__.py")]
    assert found == []

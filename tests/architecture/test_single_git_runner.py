"""Every git command of the package goes through ``spotpatch_agent/git_runner.py`` (issue 21).

The scan reads each module's syntax tree, so a comment or a docstring that mentions ``subprocess.run(["git"…])``
never counts, and every spelling of a process start counts however it was imported (``import subprocess as
sp``, ``from anyio import run_process as rp``, ``os.execvp``, ``loop.subprocess_exec``…). A module other than
the runner that starts a process and names git — a ``"git"`` literal anywhere in its code, or a name with
``git`` in it among the call's arguments — fails the test, naming file:line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import spotpatch_agent

PACKAGE = Path(spotpatch_agent.__file__).parent
RUNNER = PACKAGE / "git_runner.py"

#: module → functions of it that start a process.
SPAWNERS: dict[str, frozenset[str]] = {
    "subprocess": frozenset({"run", "Popen", "call", "check_call", "check_output", "getoutput",
                             "getstatusoutput"}),
    "anyio": frozenset({"run_process", "open_process"}),
    "asyncio": frozenset({"create_subprocess_exec", "create_subprocess_shell"}),
    "asyncio.subprocess": frozenset({"create_subprocess_exec", "create_subprocess_shell"}),
    "os": frozenset({"system", "popen", "posix_spawn", "posix_spawnp", "fork", "forkpty",
                     *(f"exec{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
                     *(f"spawn{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe"))}),
    "pty": frozenset({"spawn"}),
}
#: Methods that start a process whatever object they are called on (asyncio event loops).
SPAWN_METHODS = frozenset({"subprocess_exec", "subprocess_shell"})


@dataclass(frozen=True)
class Finding:
    line: int
    what: str
    node: ast.AST | None = None


def _docstrings(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _is_git_literal(node: ast.AST) -> bool:
    if not isinstance(node, ast.Constant) or not isinstance(node.value, str | bytes):
        return False
    value = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
    name = value.strip().replace("\\", "/").rsplit("/", 1)[-1].lower()
    return name in ("git", "git.exe") or value.strip().lower().startswith("git ")


def spawn_calls(tree: ast.AST) -> list[Finding]:
    """Places in ``tree`` that start a process, whatever the import spelling: a call of a spawner, and a
    spawner passed on or bound without being called (``anyio.to_thread.run_sync(subprocess.run, argv)``,
    ``loop.run_in_executor(None, sp.check_output, argv)``, ``partial(Popen, argv)``, ``start = os.execvp``)."""
    modules: dict[str, str] = {}  # local name → spawner module
    functions: dict[str, str] = {}  # local name → "module.function"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in SPAWNERS:
                    modules[alias.asname or alias.name.split(".")[0]] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            for alias in node.names:
                if node.module in SPAWNERS and alias.name in SPAWNERS[node.module]:
                    functions[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                elif f"{node.module}.{alias.name}" in SPAWNERS:
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in functions and isinstance(node.ctx, ast.Load):
            found.append(Finding(node.lineno, functions[node.id], node))
        elif isinstance(node, ast.Attribute):
            if node.attr in SPAWN_METHODS:
                found.append(Finding(node.lineno, node.attr, node))
                continue
            owner = ast.unparse(node.value)
            module = modules.get(owner.split(".")[0])
            if module is not None:
                full = module + owner[len(owner.split(".")[0]) :]
                if node.attr in SPAWNERS.get(full, ()):
                    found.append(Finding(node.lineno, f"{full}.{node.attr}", node))
    return found


def git_mentions(tree: ast.AST) -> list[Finding]:
    """``"git"`` literals of ``tree`` (docstrings aside; comments are not in the tree)."""
    skip = _docstrings(tree)
    return [Finding(node.lineno, repr(node.value)) for node in ast.walk(tree)  # type: ignore[attr-defined]
            if id(node) not in skip and _is_git_literal(node)]


def _names_git(call: ast.Call) -> bool:
    for node in ast.walk(call):
        if isinstance(node, ast.Name) and "git" in node.id.lower():
            return True
        if isinstance(node, ast.Attribute) and "git" in node.attr.lower():
            return True
    return False


def _context(tree: ast.AST, node: ast.AST) -> ast.AST:
    """The innermost call around ``node`` (the spawn itself, or the call it is passed to), else its statement."""
    parents = {id(child): parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    current: ast.AST | None = node
    while current is not None:
        parent = parents.get(id(current))
        if isinstance(parent, ast.Call) or isinstance(parent, ast.stmt):
            return parent
        current = parent
    return node


def git_spawns(source: str, filename: str = "<source>") -> list[str]:
    """``file:line`` of every process start in ``source`` that may run git (see the module docstring)."""
    tree = ast.parse(source, filename)
    literals = git_mentions(tree)
    out = []
    for spawn in spawn_calls(tree):
        assert spawn.node is not None
        if literals or _names_git(_context(tree, spawn.node)):
            why = f"git literal at line {literals[0].line}" if literals else "argument names git"
            out.append(f"{filename}:{spawn.line}: {spawn.what} ({why})")
    return out


def test_only_the_runner_starts_git() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == RUNNER:
            continue
        offenders += git_spawns(path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE.parent)))
    assert offenders == [], "git started outside spotpatch_agent/git_runner.py:\n" + "\n".join(offenders)


def test_the_runner_is_what_the_scan_would_flag() -> None:
    # The scan sees the runner's own process starts: were it not the one exempt module, it would fail.
    flagged = git_spawns(RUNNER.read_text(encoding="utf-8"), "git_runner.py")
    assert any("anyio.open_process" in line for line in flagged)
    assert any("subprocess.Popen" in line for line in flagged)


FLAGGED = {
    "plain": 'import subprocess\nsubprocess.run(["git", "status"])\n',
    "alias": 'import subprocess as sp\n\ndef f():\n    return sp.check_output(("git", "ls-files"))\n',
    "from-import": ('from anyio import run_process as rp\n\nasync def f(argv):\n    await rp(argv)\n'
                    'PREFIX = ("git", "-c", "x=y")\n'),
    "argv-elsewhere": ('import anyio\nfrom a.b import GIT_ARGV\n\n'
                       'async def f():\n    await anyio.open_process([*GIT_ARGV])\n'),
    "asyncio": 'import asyncio\n\nasync def f():\n    await asyncio.create_subprocess_exec("/usr/bin/git", "log")\n',
    "os-exec": 'import os\nos.execvp("git", ["git", "gc"])\n',
    "loop": 'async def f(loop):\n    await loop.subprocess_exec(proto, "git", "fsck")\n',
    "shell": 'import subprocess\nsubprocess.run("git status", shell=True)\n',
    "abs-path": 'import subprocess\nsubprocess.run(["/usr/bin/git", "status"])\n',
    "which": 'import shutil, subprocess\nsubprocess.Popen([shutil.which("git"), "log"])\n',
    "constant": 'import asyncio\nGIT = "git"\n\nasync def f():\n    await asyncio.create_subprocess_exec(GIT, "log")\n',
    # A spawner handed to a thread or executor rather than called where it is named.
    "to-thread": 'import anyio, subprocess\nfrom x import GIT_ARGV\n\nasync def f():\n'
                 '    await anyio.to_thread.run_sync(subprocess.run, GIT_ARGV)\n',
    "executor": 'import subprocess as sp\n\nasync def f(loop, git_argv):\n'
                '    await loop.run_in_executor(None, sp.check_output, git_argv)\n',
    "partial": 'from functools import partial\nfrom subprocess import Popen\nstart = partial(Popen, ["git", "gc"])\n',
    "bound": 'import os\nstart = os.execvp\nstart("git", ["git", "gc"])\n',
}

NOT_FLAGGED = {
    "comment": ('import subprocess\n# subprocess.run(["git", "status"]) is not how we do it\n'
                'subprocess.run(["node", "-v"])\n'),
    "docstring": '"""Never ``subprocess.run(["git"])``."""\nimport subprocess\nsubprocess.run(["npm", "ci"])\n',
    "git-without-spawn": 'COMM = b"git"\nNAMES = ("git",)\n',
    "runner-call": 'from spotpatch_agent.git_runner import run_git_sync\nrun_git_sync(["--version"])\n',
}


def test_scan_flags_every_spelling_of_a_git_process() -> None:
    for name, source in FLAGGED.items():
        assert git_spawns(source, name), name
    assert git_spawns(FLAGGED["alias"], "m.py") == ["m.py:4: subprocess.check_output (git literal at line 4)"]


def test_scan_ignores_comments_docstrings_and_other_programs() -> None:
    for name, source in NOT_FLAGGED.items():
        assert git_spawns(source, name) == [], name

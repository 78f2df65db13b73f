"""The two programs ``init`` runs besides git (which goes through ``git_runner``): the bundled ``vite.config``
editor under Node, and the app's package manager for the install. Each is bounded in time, gets no stdin, and
its failure becomes an :class:`InitError` that says what it said (docs/adopt.md)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from spotpatch_agent.init.app import InitError, PackageManager
from spotpatch_agent.init.assets import Assets
from spotpatch_agent.init.repo import say

#: Longest the package manager's install may take.
INSTALL_TIMEOUT_SEC = 600
EDITOR_TIMEOUT_SEC = 60


def run_editor(assets: Assets, app: Path, config: Path | None) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        raise InitError("Node.js is not on PATH: a Vite app needs it (install Node.js 20 or newer).")
    created = app / ("vite.config.ts" if (app / "tsconfig.json").is_file() else "vite.config.js")
    argv = [node, str(assets.editor), *(["--create", str(created)] if config is None else [str(config)])]
    try:
        done = subprocess.run(argv, cwd=app, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=EDITOR_TIMEOUT_SEC, check=False)
        answer = json.loads(done.stdout)
    except (ValueError, subprocess.TimeoutExpired, OSError):
        answer = None
    if not isinstance(answer, dict) or answer.get("status") not in ("unchanged", "edit", "refuse"):
        answer = {"status": "refuse", "reason": "the config editor gave no answer",
                  "paste": "import spotpatch from 'vite-plugin-spotpatch'\n// first in plugins:\n"
                           "plugins: [spotpatch(), …],"}
    answer["path"] = str(created if config is None else config)
    return answer


def install(pm: PackageManager, app: Path, spec: str) -> None:
    executable = shutil.which(pm.name)
    if executable is None:
        raise InitError(f"This app uses {pm.name} ({pm.evidence}), and {pm.name} is not on PATH: {pm.install_hint()}, "
                        "then run init again.")
    say(f"Installing the plugin with {pm.name}: {pm.name} {' '.join(pm.add_dev(spec))}")
    try:
        done = subprocess.run([executable, *pm.add_dev(spec)], cwd=app, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=INSTALL_TIMEOUT_SEC, check=False)
    except subprocess.TimeoutExpired:
        raise InitError(f"{pm.name} did not finish within {INSTALL_TIMEOUT_SEC} s (is the registry reachable?): every "
                        "file init changed was restored.") from None
    if done.returncode != 0:
        output = (done.stderr or "") + (done.stdout or "")
        lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
        detail = _summary(lines)
        network = any(w in output for w in ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ENETUNREACH",
                                            "network", "fetch failed")) or not _registry_answers(executable, pm, app)
        hint = " The package registry looks unreachable: check the network (or the registry configured for " \
               f"{pm.name}), then run init again." if network else ""
        raise InitError(f"{pm.name} could not install the plugin (exit {done.returncode}): {detail[:300]}.{hint} "
                        "Every file init changed was restored.")




def uninstall(name: str, app: Path, package: str) -> None:
    """``package`` removed from the app with the package manager ``name`` (undo, when package.json or the
    lockfile changed since init: the user's own dependencies stay)."""
    executable = shutil.which(name)
    if executable is None:
        raise InitError(f"{name} is not on PATH, and undo needs it to remove {package} from package.json (it changed "
                        "since init): nothing was undone.")
    # npm: the manifest and the lockfile only (works offline; the plugin's own folder is removed after, and a
    # copy hoisted for a workspace's other apps stays theirs).
    argv = ["uninstall", "--package-lock-only", package] if name == "npm" else ["remove", package]
    say(f"  {name} {' '.join(argv)}   (package.json changed since init: your own dependencies stay)")
    try:
        done = subprocess.run([executable, *argv], cwd=app, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=INSTALL_TIMEOUT_SEC, check=False)
    except subprocess.TimeoutExpired:
        raise InitError(f"{name} did not finish within {INSTALL_TIMEOUT_SEC} s: nothing else was undone.") from None
    if done.returncode != 0:
        lines = [ln.strip() for ln in ((done.stderr or "") + (done.stdout or "")).splitlines() if ln.strip()]
        raise InitError(f"{name} could not remove {package} (exit {done.returncode}): {_summary(lines)[:300]}. "
                        "Nothing else was undone.")


def _summary(lines: list[str]) -> str:
    """The package manager's error in one line: npm's ``code X`` with the sentence after it, else the first
    error line, else the last line."""
    errors = [ln for ln in lines if "ERR" in ln or "error" in ln.lower()]
    if not errors:
        return lines[-1] if lines else "no output"
    text = [e.removeprefix("npm error").removeprefix("npm ERR!").strip() for e in errors]
    text = [t for t in text if t and not t.startswith(("A complete log", "For a full report", "/"))]
    return "; ".join(text[:2]) if text else errors[0]


def _registry_answers(executable: str, pm: PackageManager, app: Path) -> bool:
    """npm only: whether its registry answers `npm ping` (an unreachable registry often surfaces as another
    error: npm 11 reports ERESOLVE when it cannot fetch a package's metadata). True when unknown."""
    if pm.name != "npm":
        return True
    try:
        done = subprocess.run([executable, "ping"], cwd=app, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0

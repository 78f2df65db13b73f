"""The demo's ``typecheck`` check (issue 8): TypeScript for the demo project, installed by the demo itself.

:func:`prepare_typecheck` gives the demo project a ``node_modules`` holding exactly
:data:`DEMO_NODE_PACKAGES` (TypeScript and the React type packages the app's sources import) and returns
the check the demo's trusted config gets — the one ``checks suggest`` proposes for the app:
``npm run --silent typecheck`` (``tsc --noEmit``). The job's worktree lives under the project's
``node_modules/.spotpatch/``, so npm puts the project's ``node_modules/.bin`` on the check's PATH.

The packages are installed once from the npm registry with the user's own npm into a cache,
``$XDG_CACHE_HOME/spotpatch/demo-node_modules/<key>/`` (default ``~/.cache``; ``<key>`` names the pinned
versions), and copied into each fresh demo project. The check is skipped — the demo still runs — when npm
is not on PATH, the install fails (no registry), ``SPOTPATCH_DEMO_OFFLINE=1`` forbids the install and no
cached copy exists, or TypeScript already fails on the unchanged app.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import anyio

from spotpatch_agent.checks.runner import CheckRun, SandboxUnavailable, run_check_process
from spotpatch_agent.checks.suggest import suggest_checks
from spotpatch_agent.policy.credentials import looks_like_credential
from spotpatch_agent.policy.redact import redact_cut
from spotpatch_agent.protocol.models import CheckConfig, Limits

#: Exact versions (the demo must typecheck the same way everywhere).
DEMO_NODE_PACKAGES = ("typescript@5.9.3", "@types/react@18.3.32", "@types/react-dom@18.3.7")
#: Set to ``1`` to never call npm's registry (a cached install is still used).
OFFLINE_ENV = "SPOTPATCH_DEMO_OFFLINE"
#: Seconds the one-time ``npm install`` may take.
INSTALL_TIMEOUT_SEC = 120
#: Marker written last into a complete cache entry.
COMPLETE = ".spotpatch-complete"


@dataclass(frozen=True)
class TypecheckSetup:
    """``check`` is None when skipped; ``message`` says what happened (shown to the user either way);
    ``baseline`` is the check's run on the unchanged project."""

    check: CheckConfig | None
    message: str
    baseline: CheckRun | None = None


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "spotpatch" / "demo-node_modules"


def cache_key(packages: tuple[str, ...] = DEMO_NODE_PACKAGES) -> str:
    """``typescript-5.9.3-<hash of every pinned package>`` (the first package names the entry)."""
    digest = hashlib.sha256("\n".join(packages).encode()).hexdigest()[:12]
    return f"{packages[0].replace('@', '-')}-{digest}"


def _npm_env() -> dict[str, str]:
    """The user's environment without provider keys or other credentials (npm's own config is kept)."""
    return {k: v for k, v in os.environ.items()
            if not looks_like_credential(k) or k.lower().startswith("npm_config_")}


def _install(npm: str, entry: Path, packages: tuple[str, ...] = DEMO_NODE_PACKAGES) -> str | None:
    """Install the pinned packages into the cache ``entry`` (atomic: a staging dir renamed at the end).
    Returns None on success, else a one-line reason."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=entry.parent))
    try:
        (staging / "package.json").write_text('{"name": "spotpatch-demo-deps", "private": true}\n', "utf-8")
        try:
            done = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--no-save", "--no-package-lock", "--ignore-scripts",
                 "--prefer-offline", "--fetch-retries=1", "--fetch-retry-mintimeout=2000",
                 "--fetch-retry-maxtimeout=5000", "--fetch-timeout=30000", "--loglevel=error",
                 "--prefix", str(staging), *packages],
                cwd=staging, env=_npm_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                errors="replace", timeout=INSTALL_TIMEOUT_SEC, check=False,
            )
        except subprocess.TimeoutExpired:
            return f"npm install did not finish within {INSTALL_TIMEOUT_SEC} s"
        except OSError as exc:
            return f"npm could not be started ({exc.strerror})"
        if done.returncode != 0 or not (staging / "node_modules" / "typescript" / "bin" / "tsc").is_file():
            return "npm install failed" + _npm_error(done.stderr or done.stdout)
        (staging / COMPLETE).write_text("\n".join(packages) + "\n", "utf-8")
        try:
            staging.rename(entry)
        except OSError:
            if not (entry / COMPLETE).is_file():  # another demo won the race: theirs is as good
                raise
        return None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _npm_error(text: str) -> str:
    """`` (CODE): first message`` from npm's error lines (no stack frames, no log path), or ``""``."""
    code = re.search(r"npm (?:error|ERR!) code (\S+)", text)
    details = (m.group(1).strip() for m in re.finditer(r"npm (?:error|ERR!) (.+)", text))
    detail = next((d for d in details if not re.match(r"(code|syscall|errno|path|at |A complete log|\{|\})", d)), "")
    return (f" ({code.group(1)})" if code else "") + (f": {redact_cut(detail, 200, ellipsis='')}" if detail else "")


def install_node_modules(project: Path, packages: tuple[str, ...] = DEMO_NODE_PACKAGES) -> str | None:
    """Copy the cached ``packages`` into ``project/node_modules`` (installing them first when needed).
    Returns None on success, else why the typecheck is skipped."""
    entry = cache_root() / cache_key(packages)
    if not (entry / COMPLETE).is_file():
        npm = shutil.which("npm")
        if os.environ.get(OFFLINE_ENV) == "1":
            return f"{OFFLINE_ENV}=1 and TypeScript is not cached yet"
        if npm is None:
            return "npm is not on PATH (install Node.js to see the check)"
        print(f"Installing {', '.join(packages)} with npm (once; cached in {_home_relative(entry)})…",
              flush=True)
        reason = _install(npm, entry, packages)
        if reason is not None:
            return reason
    shutil.copytree(entry / "node_modules", project / "node_modules", symlinks=True, dirs_exist_ok=True)
    return None


def _home_relative(path: Path) -> str:
    try:
        return "~/" + path.relative_to(Path.home()).as_posix()
    except ValueError:
        return str(path)


def prepare_typecheck(project: Path, limits: Limits, *, sandbox: str = "required",
                      packages: tuple[str, ...] = DEMO_NODE_PACKAGES) -> TypecheckSetup:
    """Install TypeScript into the demo ``project`` and prove the check passes on the unchanged app (run
    like the job runs it: confined, or unconfined when ``sandbox`` is ``warn`` and no sandbox exists).
    Never raises for npm, the registry, TypeScript or a missing sandbox: a problem becomes a skip with its reason."""
    if shutil.which("npm") is None:
        return TypecheckSetup(None, "typecheck check skipped: npm is not on PATH (install Node.js to see it).")
    try:
        reason = install_node_modules(project, packages)
    except OSError as exc:
        reason = f"the TypeScript cache could not be used ({exc.strerror})"
    if reason is not None:
        return TypecheckSetup(None, f"typecheck check skipped: {reason}. The demo runs without checks.")
    suggested = [c for c in suggest_checks(project).checks if c["id"] == "typecheck"]
    check = CheckConfig.model_validate({**suggested[0], "timeoutSec": 120})
    try:
        baseline = anyio.run(partial(run_check_process, check, project, limits,
                                     sandbox="warn" if sandbox == "warn" else "required"))
    except SandboxUnavailable as exc:
        return TypecheckSetup(None, f"typecheck check skipped: {exc.message}")
    if not baseline.ok:
        return TypecheckSetup(None, f"typecheck check skipped: it already fails on the unchanged app "
                                    f"({baseline.outcome()}):\n{baseline.output}", baseline)
    version = packages[0].rsplit("@", 1)[1]
    how = "confined" if baseline.sandbox == "confined" else "UNCONFINED"
    return TypecheckSetup(check, f"typecheck check: {' '.join([check.command, *check.args])} (TypeScript {version}); "
                                 f"passes on the unchanged app in {baseline.duration_ms} ms ({how}).", baseline)

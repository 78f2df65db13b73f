"""Which Vite app ``spotpatch-agent init`` sets up, with which package manager, and whether its Vite is new
enough (docs/adopt.md). File-system reads only: nothing here runs a program or writes a file."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spotpatch_agent.checks.suggest import LOCKFILES as SUGGEST_LOCKFILES

#: The config file names Vite itself looks for, in its own order.
VITE_CONFIGS = ("vite.config.js", "vite.config.mjs", "vite.config.ts", "vite.config.cjs", "vite.config.mts",
                "vite.config.cts")
#: Folders never searched for apps (dependencies, build output, tool caches, virtualenvs).
_SKIP_DIRS = {"node_modules", "dist", "build", "out", "coverage", "venv", "__pycache__"}
#: How deep below the folder ``init`` runs in apps are searched for (a monorepo's ``apps/web``, ``packages/x/site``).
SEARCH_DEPTH = 3


class InitError(Exception):
    """A set-up problem ``init`` stops on: ``message`` says what and how to fix it (no absolute path).
    ``paste`` (optional) holds lines the user can paste instead."""

    def __init__(self, message: str, *, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


@dataclass(frozen=True)
class PackageManager:
    name: str  # npm | pnpm | yarn | bun
    #: What told us: the lockfile's name, ``package.json "packageManager"``, or ``default``.
    evidence: str
    #: The folder holding the lockfile (the workspace root in a monorepo), or the app.
    root: Path

    def add_dev(self, spec: str) -> list[str]:
        """The argv (without the executable) that adds ``spec`` as a dev dependency of the app."""
        return {
            "npm": ["install", "--save-dev", "--no-audit", "--no-fund", spec],
            "pnpm": ["add", "--save-dev", spec],
            "yarn": ["add", "--dev", spec],
            "bun": ["add", "--dev", spec],
        }[self.name]

    def run_dev(self) -> str:
        """The command that starts the dev server, as the user types it."""
        return {"npm": "npm run dev", "pnpm": "pnpm dev", "yarn": "yarn dev", "bun": "bun run dev"}[self.name]

    def install_hint(self) -> str:
        if self.name in ("pnpm", "yarn"):
            return f"install {self.name} (`corepack enable {self.name}`, or `npm install -g {self.name}`)"
        if self.name == "bun":
            return "install bun (https://bun.sh)"
        return "install Node.js (it brings npm)"


#: Lockfile → package manager: the table `checks suggest` already uses (one list for both commands).
LOCKFILES = SUGGEST_LOCKFILES


def read_package_json(folder: Path) -> dict[str, Any] | None:
    """``folder/package.json`` as an object, None when absent; :class:`InitError` when it is not JSON."""
    file = folder / "package.json"
    if not file.is_file():
        return None
    try:
        data = json.loads(file.read_text(encoding="utf-8-sig"))  # npm accepts a byte order mark
    except (ValueError, UnicodeDecodeError) as exc:
        raise InitError(f"{_shown(file, folder)} is not valid JSON ({_first_line(exc)}): fix it first.") from None
    if not isinstance(data, dict):
        raise InitError("package.json does not hold a JSON object: fix it first.")
    return data


def _dependencies(package: dict[str, Any]) -> dict[str, str]:
    found: dict[str, str] = {}
    for key in ("dependencies", "devDependencies", "optionalDependencies", "peerDependencies"):
        section = package.get(key)
        if isinstance(section, dict):
            found.update({k: v for k, v in section.items() if isinstance(v, str)})
    return found


def vite_config(app: Path) -> Path | None:
    """The app's ``vite.config.*`` (Vite's own order), or None."""
    return next((app / name for name in VITE_CONFIGS if (app / name).is_file()), None)


def is_vite_app(folder: Path) -> bool:
    """A ``package.json`` that depends on ``vite`` (or a ``vite.config.*`` beside one)."""
    try:
        package = read_package_json(folder)
    except InitError:
        return False
    return package is not None and ("vite" in _dependencies(package) or vite_config(folder) is not None)


def find_apps(start: Path) -> list[Path]:
    """``start`` when it is a Vite app, else the Vite apps below it (up to :data:`SEARCH_DEPTH` levels, hidden
    folders and :data:`_SKIP_DIRS` skipped), sorted."""
    if is_vite_app(start):
        return [start]
    found: list[Path] = []

    def walk(folder: Path, depth: int) -> None:
        try:
            children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())
        except OSError:
            return
        for child in children:
            if child.name.startswith(".") or child.name in _SKIP_DIRS:
                continue
            if is_vite_app(child):
                found.append(child)
            elif depth > 1:
                walk(child, depth - 1)

    walk(start, SEARCH_DEPTH)
    return found


def explain_not_an_app(start: Path) -> str:
    """Why ``start`` (and nothing below it) is not a Vite app, with the fix."""
    name = start.name or "this folder"
    package = read_package_json(start)
    if package is None:
        return (f"No package.json in {name}, and no Vite app below it: run `spotpatch-agent init` in your Vite app's "
                "folder (or pass --project DIR). To start a new one: npm create vite@latest")
    return (f"{name} is not a Vite app: its package.json does not depend on vite and there is no vite.config.*. "
            "SpotPatch is a Vite plugin; run init in the folder of the app that `vite` serves (or pass --project DIR).")


def detect_package_manager(app: Path, stop: Path | None) -> PackageManager:
    """The app's package manager: the nearest lockfile from ``app`` up to ``stop`` (the git top level; the
    workspace root of a monorepo holds the lockfile), else ``packageManager`` in a package.json on the way,
    else npm."""
    folder = app
    while True:
        for lockfile, name in LOCKFILES:
            if (folder / lockfile).is_file():
                return PackageManager(name, lockfile, folder)
        package = None
        try:
            package = read_package_json(folder)
        except InitError:
            pass
        declared = package.get("packageManager") if package else None
        if isinstance(declared, str) and (match := re.match(r"(npm|pnpm|yarn|bun)@", declared)):
            return PackageManager(match.group(1), 'package.json "packageManager"', folder)
        if stop is None or folder == stop or folder.parent == folder or not folder.is_relative_to(stop):
            return PackageManager("npm", "default", app)
        folder = folder.parent


def installed_vite_version(app: Path) -> str | None:
    """The version of the ``vite`` the app resolves (``node_modules/vite`` here or in a parent folder)."""
    for folder in (app, *app.parents):
        manifest = folder / "node_modules" / "vite" / "package.json"
        if manifest.is_file():
            try:
                version = json.loads(manifest.read_text(encoding="utf-8")).get("version")
            except (ValueError, UnicodeDecodeError, OSError):
                return None
            return version if isinstance(version, str) else None
    return None


def declared_vite_range(app: Path) -> str | None:
    package = read_package_json(app) or {}
    return _dependencies(package).get("vite")


def parse_version(text: str) -> tuple[int, int, int] | None:
    match = re.match(r"\s*[v=]?(\d+)(?:\.(\d+))?(?:\.(\d+))?", text)
    if not match:
        return None
    return int(match.group(1)), int(match.group(2) or 0), int(match.group(3) or 0)


def satisfies(version: tuple[int, int, int], peer_range: str) -> bool:
    """``version`` against a peer range of caret alternatives (``^6.4.2 || ^7.3.2 || ^8.0.5``), what the plugin's
    package.json declares; anything else in the range is answered True (npm decides then)."""
    for alternative in peer_range.split("||"):
        alternative = alternative.strip()
        if not alternative.startswith("^"):
            return True
        low = parse_version(alternative[1:])
        if low is None:
            return True
        if version[0] == low[0] and version >= low:
            return True
    return False


def check_vite(app: Path, peer_range: str) -> str | None:
    """A sentence when the app's Vite is older than the plugin's peer range, else None. The installed version
    when there is one (checked exactly); else the major version the app's declared range starts at (an
    install may bring any later minor of that major, so the major alone decides)."""
    installed = installed_vite_version(app)
    declared = declared_vite_range(app)
    if installed:
        version = parse_version(installed)
        if version is None or satisfies(version, peer_range):
            return None
        what = f"Vite {installed}"
    else:
        # Only a caret, tilde or exact version says which major an install brings; any other range (">=5 <9",
        # "*", "latest", a tag or a URL) is npm's to resolve, and the installed version is checked next time.
        simple = declared is not None and re.fullmatch(r"[\^~=v]?\d+(\.\d+){0,2}(-[\w.]+)?", declared.strip())
        low = parse_version(declared.lstrip("^~=v")) if declared and simple else None
        majors = [v[0] for alt in peer_range.split("||") if (v := parse_version(alt.strip().lstrip("^")))]
        if low is None or not majors or low[0] in majors or low[0] > max(majors):
            return None
        what = f'Vite "{declared}" (package.json)'
    return (f"This app uses {what}; the SpotPatch plugin needs Vite {peer_range}. Upgrade Vite first "
            "(npm install --save-dev vite@latest), then run init again.")


def _shown(file: Path, base: Path) -> str:
    try:
        return file.relative_to(base).as_posix()
    except ValueError:
        return file.name


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__

"""``spotpatch-agent checks suggest``: propose a ``checks`` config from ``package.json`` and ``tsconfig.json``.

A discovery helper only (issue 8; docs/design.md §9, §12): it reads two files, never runs anything, never
writes config. The user pastes the printed ``{"checks": [...]}`` into ``spotpatch.config.json`` or the
Vite plugin options — checks come from trusted config only.

Rules:

- scripts named like a type check, lint, test or check (:data:`SCRIPT_KINDS`, in that order) become a
  check run through the package manager found from the lockfile (``pnpm-lock.yaml`` → pnpm,
  ``yarn.lock`` → yarn, ``bun.lock``/``bun.lockb`` → bun, else npm; a ``packageManager`` field wins);
- a script is skipped, with its reason, when it watches or serves (``--watch``, ``vite`` alone, ``dev``,
  ``serve``…), rewrites files (``--fix``, ``--write``, a build) or is npm's placeholder test;
- with no type-check script but a ``tsconfig.json``, a ``typecheck`` check runs the project's own
  TypeScript: ``npx --no-install tsc --noEmit -p tsconfig.json`` (never downloads).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: (kind, human name, script names in preference order). One check per kind at most.
SCRIPT_KINDS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("typecheck", "Type check", ("typecheck", "type-check", "check-types", "check:types", "types:check",
                                 "tsc", "types")),
    ("lint", "Lint", ("lint", "eslint", "lint:check", "lint:js", "lint:ts")),
    ("test", "Tests", ("test", "test:unit", "unit", "test:ci", "vitest:run")),
    ("check", "Check", ("check", "verify", "validate", "format:check", "fmt:check")),
)
#: Script names that start a long-running process or only build: never a check.
EXCLUDED_NAMES = re.compile(r"^(dev|start|serve|preview|watch|build|prepare|postinstall|preinstall|install)(:|$)")
#: Script bodies that watch, serve or write files (the reason is shown on stderr).
EXCLUDED_BODIES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(^|\s)(--watch|-w|--watchAll|watch)(\s|=|$)"), "watches files"),
    (re.compile(r"(^|\s|&&\s*)(vite|next|nuxt|astro|webpack serve|webpack-dev-server|nodemon|live-server)"
                r"(\s+(dev|serve|preview|start))?\s*($|&&)"), "starts a server"),
    (re.compile(r"(^|\s)(vite|next|nuxt|astro|ng)\s+(dev|serve|preview|start)\b"), "starts a server"),
    (re.compile(r"(^|\s)(--fix|--write|--apply|--update|--updateSnapshot|--update-snapshot|-u)(\s|=|$)"),
     "rewrites files"),
    (re.compile(r"no test specified"), "is npm's placeholder"),
)
LOCKFILES = (("pnpm-lock.yaml", "pnpm"), ("yarn.lock", "yarn"), ("bun.lock", "bun"), ("bun.lockb", "bun"),
             ("package-lock.json", "npm"), ("npm-shrinkwrap.json", "npm"))
TSC_CHECK = ["npx", "--no-install", "tsc", "--noEmit", "-p", "tsconfig.json"]


@dataclass
class Suggestion:
    """``checks``: wire-shaped check configs (``{id, name, command, args, required}``); ``notes``: one
    line per decision, for stderr."""

    checks: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def config_json(self) -> str:
        """The ``{"checks": [...]}`` JSON to paste (2-space indent, trailing newline)."""
        return json.dumps({"checks": self.checks}, indent=2) + "\n"


def package_manager(root: Path, package: dict[str, Any]) -> tuple[str, str]:
    """(manager, why): from ``packageManager`` (``"pnpm@9.1.0"``), else the first lockfile found, else npm."""
    declared = package.get("packageManager")
    if isinstance(declared, str):
        name = declared.split("@", 1)[0]
        if name in ("npm", "pnpm", "yarn", "bun"):
            return name, f'package.json "packageManager" is {declared!r}'
    for lockfile, manager in LOCKFILES:
        if (root / lockfile).is_file():
            return manager, f"found {lockfile}"
    return "npm", "no lockfile found"


def run_script_argv(manager: str, script: str) -> list[str]:
    """The argv that runs ``script`` once, quietly, through ``manager``."""
    if manager == "npm":
        return ["npm", "run", "--silent", script]
    return [manager, "run", script]


def excluded_reason(name: str, body: str) -> str | None:
    """Why the script ``name`` (running ``body``) must not be a check, or None when it may be."""
    if EXCLUDED_NAMES.match(name):
        return "builds (writes output files)" if name.startswith("build") else "starts a long-running process"
    for pattern, reason in EXCLUDED_BODIES:
        if pattern.search(body):
            return reason
    return None


def _read_package(root: Path, notes: list[str]) -> dict[str, Any] | None:
    path = root / "package.json"
    if not path.is_file():
        notes.append("No package.json: no script checks.")
        return None
    try:
        package = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        notes.append("package.json is not valid JSON: no script checks.")
        return None
    if not isinstance(package, dict):
        notes.append("package.json is not a JSON object: no script checks.")
        return None
    return package


def suggest_checks(root: Path) -> Suggestion:
    """Read ``root/package.json`` and ``root/tsconfig.json`` and propose checks (see the module docstring).
    Never raises for a missing or malformed file; reads nothing else."""
    result = Suggestion()
    package = _read_package(root, result.notes)
    raw = package.get("scripts") if package is not None else None
    scripts = {k: v for k, v in raw.items() if isinstance(v, str)} if isinstance(raw, dict) else {}
    if package is not None and not scripts:
        result.notes.append("package.json has no scripts.")
    manager, why = package_manager(root, package or {})
    if scripts:
        result.notes.append(f"Package manager: {manager} ({why}).")
    for kind, human, names in SCRIPT_KINDS:
        for name in (n for n in names if n in scripts):
            body = scripts[name]
            reason = excluded_reason(name, body)
            if reason is not None:
                result.notes.append(f"Skipped script {name!r} ({body}): it {reason}.")
                continue
            argv = run_script_argv(manager, name)
            result.checks.append({"id": name, "name": human if name == kind else f"{human} ({name})",
                                  "command": argv[0], "args": argv[1:], "required": True})
            result.notes.append(f"Check {name!r}: runs the script {name!r} ({body}).")
            if re.search(r"(^|\s)tsc(\s|$)", body) and not re.search(r"--noEmit|(^|\s)-b(\s|$)|--build", body):
                result.notes.append(f"  Note: {name!r} runs tsc without --noEmit; a check that writes files fails "
                                    "the job unless tsconfig.json sets noEmit.")
            break
    known = {n for _, _, names in SCRIPT_KINDS for n in names}
    for name, body in scripts.items():
        if name not in known and EXCLUDED_NAMES.match(name):
            result.notes.append(f"Skipped script {name!r}: it {excluded_reason(name, body)}.")
    has_typecheck = any(c["id"] in SCRIPT_KINDS[0][2] for c in result.checks)
    if (root / "tsconfig.json").is_file() and not has_typecheck:
        result.checks.insert(0, {"id": "typecheck", "name": "Type check", "command": TSC_CHECK[0],
                                 "args": TSC_CHECK[1:], "required": True})
        result.notes.append("Check 'typecheck': tsconfig.json found and no type-check script; runs the project's "
                            "own TypeScript through npx --no-install (never downloads: install typescript first).")
    if not result.checks:
        result.notes.append("Nothing to suggest: add a typecheck, lint or test script to package.json.")
    return result

"""``checks suggest``: a proposed checks config from package.json scripts and tsconfig.json (issue 8)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spotpatch_agent.checks.suggest import excluded_reason, suggest_checks
from spotpatch_agent.protocol.models import TrustedConfig

SCRIPTS = {
    "dev": "vite",
    "start": "node server.js",
    "serve": "vite preview",
    "build": "vite build",
    "watch": "tsc -w",
    "typecheck": "tsc --noEmit",
    "lint": "eslint .",
    "test": "vitest run",
    "format": "prettier --write .",
}


def project(tmp_path: Path, scripts: dict[str, str] | None, *, lockfile: str | None = None,
            tsconfig: bool = False, extra: dict[str, object] | None = None) -> Path:
    root = tmp_path / "p"
    root.mkdir()
    if scripts is not None:
        (root / "package.json").write_text(json.dumps({"name": "p", "scripts": scripts, **(extra or {})}))
    if lockfile:
        (root / lockfile).write_text("")
    if tsconfig:
        (root / "tsconfig.json").write_text("{}")
    return root


def argvs(root: Path) -> dict[str, list[str]]:
    return {c["id"]: [c["command"], *c["args"]] for c in suggest_checks(root).checks}


@pytest.mark.parametrize(("lockfile", "runner"), [
    (None, ["npm", "run", "--silent"]),
    ("package-lock.json", ["npm", "run", "--silent"]),
    ("pnpm-lock.yaml", ["pnpm", "run"]),
    ("yarn.lock", ["yarn", "run"]),
    ("bun.lockb", ["bun", "run"]),
])
def test_package_manager_comes_from_the_lockfile(tmp_path: Path, lockfile: str | None, runner: list[str]) -> None:
    root = project(tmp_path, SCRIPTS, lockfile=lockfile)
    assert argvs(root) == {"typecheck": [*runner, "typecheck"], "lint": [*runner, "lint"], "test": [*runner, "test"]}


def test_package_manager_field_wins_over_lockfiles(tmp_path: Path) -> None:
    root = project(tmp_path, {"lint": "eslint ."}, lockfile="package-lock.json", extra={"packageManager": "pnpm@9.1.0"})
    assert argvs(root) == {"lint": ["pnpm", "run", "lint"]}


def test_the_suggestion_is_a_valid_trusted_config_in_kind_order(tmp_path: Path) -> None:
    suggestion = suggest_checks(project(tmp_path, SCRIPTS, lockfile="pnpm-lock.yaml"))
    config = TrustedConfig.model_validate(json.loads(suggestion.config_json()))
    assert [(c.id, c.name, c.required) for c in config.checks] == [
        ("typecheck", "Type check", True), ("lint", "Lint", True), ("test", "Tests", True)]


def test_watch_dev_server_build_and_rewriting_scripts_are_never_checks(tmp_path: Path) -> None:
    scripts = {"dev": "vite", "test": "vitest --watch", "lint": "eslint . --fix", "type-check": "tsc --noEmit -w",
               "check": "prettier --write .", "tsc": "tsc --noEmit", "serve": "vite preview"}
    suggestion = suggest_checks(project(tmp_path, scripts))
    assert [c["id"] for c in suggestion.checks] == ["tsc"]
    notes = "\n".join(suggestion.notes)
    for name in ("dev", "test", "lint", "type-check", "check", "serve"):
        assert f"Skipped script {name!r}" in notes


@pytest.mark.parametrize(("name", "body", "excluded"), [
    ("dev", "vite", True), ("start", "next start", True), ("serve", "http-server", True),
    ("preview", "vite preview", True), ("watch", "tsc --noEmit", True), ("build", "tsc -b", True),
    ("build:app", "vite build", True), ("test", "jest --watchAll", True), ("test", "vitest watch", True),
    ("test", "vitest run -u", True), ("test", "echo \"Error: no test specified\" && exit 1", True),
    ("lint", "next lint", False), ("test", "vitest run", False), ("test", "jest", False),
    ("lint", "eslint . --max-warnings=0", False), ("check", "prettier --check .", False),
    ("typecheck", "vue-tsc --noEmit", False), ("test", "vite", True), ("test", "npm run build && vitest run", False),
])
def test_excluded_reason(name: str, body: str, excluded: bool) -> None:
    assert (excluded_reason(name, body) is not None) is excluded


def test_tsconfig_only_suggests_the_projects_own_tsc(tmp_path: Path) -> None:
    root = project(tmp_path, None, tsconfig=True)
    suggestion = suggest_checks(root)
    assert argvs(root) == {"typecheck": ["npx", "--no-install", "tsc", "--noEmit", "-p", "tsconfig.json"]}
    assert any("No package.json" in n for n in suggestion.notes)


def test_a_typecheck_script_is_preferred_over_the_tsconfig_fallback(tmp_path: Path) -> None:
    root = project(tmp_path, {"type-check": "tsc --noEmit", "test": "vitest run"}, tsconfig=True)
    assert argvs(root) == {"type-check": ["npm", "run", "--silent", "type-check"],
                           "test": ["npm", "run", "--silent", "test"]}


def test_tsconfig_plus_other_scripts_adds_typecheck_first(tmp_path: Path) -> None:
    root = project(tmp_path, {"lint": "eslint ."}, tsconfig=True)
    assert list(argvs(root)) == ["typecheck", "lint"]


def test_tsc_without_no_emit_is_kept_with_a_warning(tmp_path: Path) -> None:
    suggestion = suggest_checks(project(tmp_path, {"typecheck": "tsc"}))
    assert [c["id"] for c in suggestion.checks] == ["typecheck"]
    assert any("without --noEmit" in n for n in suggestion.notes)


@pytest.mark.parametrize("content", ["", "not json", "[]", '{"scripts": ["lint"]}', '{"scripts": {"lint": 3}}'])
def test_nothing_to_suggest_never_raises(tmp_path: Path, content: str) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "package.json").write_text(content)
    suggestion = suggest_checks(root)
    assert suggestion.checks == [] and json.loads(suggestion.config_json()) == {"checks": []}
    assert suggestion.notes[-1].startswith("Nothing to suggest")


def test_empty_directory(tmp_path: Path) -> None:
    suggestion = suggest_checks(tmp_path)
    assert suggestion.checks == [] and any("No package.json" in n for n in suggestion.notes)


def test_cli_prints_json_on_stdout_and_the_reasons_on_stderr_and_writes_nothing(tmp_path: Path) -> None:
    root = project(tmp_path, SCRIPTS, lockfile="yarn.lock", tsconfig=True)
    before = sorted(p.name for p in root.iterdir())
    done = subprocess.run([sys.executable, "-m", "spotpatch_agent", "checks", "suggest", "--root", str(root)],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 0, done.stderr
    config = json.loads(done.stdout)
    assert [c["id"] for c in config["checks"]] == ["typecheck", "lint", "test"]
    assert config["checks"][0] == {"id": "typecheck", "name": "Type check", "command": "yarn",
                                   "args": ["run", "typecheck"], "required": True}
    assert "Skipped script 'dev'" in done.stderr and "Nothing was run or written" in done.stderr
    assert sorted(p.name for p in root.iterdir()) == before


def test_cli_rejects_a_missing_root(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "spotpatch_agent", "checks", "suggest", "--root",
                           str(tmp_path / "missing")], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "not a directory" in done.stderr and done.stdout == ""

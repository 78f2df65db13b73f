"""The demo's typecheck set-up (spotpatch_agent/demo/typecheck.py), without the registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotpatch_agent.demo import typecheck
from spotpatch_agent.demo.runner import APP_DIR
from spotpatch_agent.protocol.models import Limits


def test_cache_key_names_the_pinned_typescript() -> None:
    assert typecheck.cache_key().startswith("typescript-5.") and typecheck.cache_key() == typecheck.cache_key()
    assert all("@" in p.lstrip("@") for p in typecheck.DEMO_NODE_PACKAGES)  # exact versions only


def test_npm_errors_are_one_line_without_stack_or_log_path() -> None:
    text = ("npm error code ECONNREFUSED\nnpm error syscall connect\nnpm error errno ECONNREFUSED\n"
            "npm error FetchError: request to http://127.0.0.1:9/typescript failed, reason: connect ECONNREFUSED\n"
            "npm error     at ClientRequest.<anonymous> (/usr/lib/x.js:1:1)\n"
            "npm error A complete log of this run can be found in: /root/.npm/_logs/x.log\n")
    assert typecheck._npm_error(text) == (
        " (ECONNREFUSED): FetchError: request to http://127.0.0.1:9/typescript failed, reason: connect ECONNREFUSED")
    assert typecheck._npm_error("") == ""


def test_offline_without_cache_is_a_skip_with_its_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(typecheck.OFFLINE_ENV, "1")
    project = tmp_path / "p"
    project.mkdir()
    assert "not cached yet" in (typecheck.install_node_modules(project) or "")
    setup = typecheck.prepare_typecheck(project, Limits())
    assert setup.check is None and setup.message.startswith("typecheck check skipped:")
    assert not (project / "node_modules").exists()


def test_npm_missing_is_a_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    setup = typecheck.prepare_typecheck(tmp_path, Limits())
    assert setup.check is None and "npm is not on PATH" in setup.message


def test_demo_app_typechecks_without_vite_installed() -> None:
    """The check installs only TypeScript and the React types: the app's tsconfig must need nothing else."""
    config = json.loads((APP_DIR / "tsconfig.json").read_text())
    assert config["include"] == ["src"] and config["compilerOptions"]["types"] == []
    assert config["compilerOptions"]["noEmit"] is True  # a check that writes files would fail the job
    assert json.loads((APP_DIR / "package.json").read_text())["scripts"]["typecheck"] == "tsc --noEmit"
    assert (APP_DIR / ".gitignore").read_text().split()[0] == "node_modules"  # the worktree goes under it

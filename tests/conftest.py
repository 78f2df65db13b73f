"""Shared fixtures: real git repositories in temp dirs, with a test-only identity (no global git config)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "SpotPatch Test",
    "GIT_AUTHOR_EMAIL": "test@spotpatch.invalid",
    "GIT_COMMITTER_NAME": "SpotPatch Test",
    "GIT_COMMITTER_EMAIL": "test@spotpatch.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


@pytest.fixture(autouse=True)
def _redactor_secrets_per_test():
    """Secrets a test registers in the process-wide redactor are dropped after it: key fragments (issue 25)
    of one test's fixed canary (``sk-test-0123456789abcdef``) would otherwise mask another test's text."""
    from spotpatch_agent.policy.redact import REDACTOR

    saved = REDACTOR.snapshot()
    yield
    REDACTOR.restore(saved)


@pytest.fixture(autouse=True)
def _git_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in GIT_IDENTITY.items():
        monkeypatch.setenv(key, value)


def git(cwd: Path, *args: str) -> str:
    """Run a git command in ``cwd`` for test set-up; returns stdout; raises on failure."""
    env = {**os.environ, **GIT_IDENTITY}
    out = subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)
    return out.stdout.decode()


def make_repo(root: Path, files: dict[str, str | bytes]) -> Path:
    """Create a git repo at ``root`` holding ``files`` (relative POSIX path -> content) in one commit."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return root


@pytest.fixture
def repo_factory(tmp_path: Path):
    """``repo_factory(files, name="repo")`` -> path of a fresh one-commit git repo under tmp_path."""

    def factory(files: dict[str, str | bytes], name: str = "repo") -> Path:
        return make_repo(tmp_path / name, files)

    return factory

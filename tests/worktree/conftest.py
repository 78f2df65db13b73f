"""Fixtures of the worktree suite: asyncio backend, a private system temp dir, repo snapshots."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.worktree._changes import make_job  # noqa: F401 - the job fixture of the change tests


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def private_tempdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``tempfile.gettempdir()`` -> a per-test dir outside every test repo (no litter in /tmp)."""
    systmp = tmp_path / "systmp"
    systmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(systmp))
    return systmp

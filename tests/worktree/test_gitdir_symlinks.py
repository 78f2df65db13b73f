"""Issue 25: nothing SpotPatch keeps under ``<git-dir>/spotpatch/`` (the write lock, the crash journal, its
quarantine) is written or read through a symlink planted there (worktree/gitdir_files.py): the write is
refused with a reason naming the entry relative to the git directory, and nothing outside changes."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from spotpatch_agent.errors import ErrorCode, SpotPatchError
from spotpatch_agent.worktree.journal import DiskJournal, journal_dir
from spotpatch_agent.worktree.lock import ProjectWriteLock
from spotpatch_agent.worktree.recovery import recover_pending
from tests.worktree._journal import FILES, apply_plan, crash_after

pytestmark = pytest.mark.anyio


def tree(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


def plant(root: Path, rel: str, outside: Path) -> Path:
    """``<root>/.git/<rel>`` made a symlink to the directory ``outside``."""
    outside.mkdir(parents=True, exist_ok=True)
    link = root / ".git" / rel
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(outside, link)
    return link


async def test_the_write_lock_is_refused_through_a_symlinked_spotpatch_dir(repo_factory, tmp_path: Path) -> None:
    root = repo_factory(FILES)
    outside = tmp_path / "outside"
    plant(root, "spotpatch", outside)
    lock = ProjectWriteLock(root / ".git")
    with pytest.raises(SpotPatchError) as caught:
        lock.try_acquire()
    assert caught.value.code == ErrorCode.REPO_BLOCKED
    assert "<git dir>/spotpatch is a symlink" in caught.value.message and str(tmp_path) not in caught.value.message
    assert tree(outside) == []


async def test_the_journal_is_never_written_through_a_symlink(repo_factory, tmp_path: Path) -> None:
    root = repo_factory(FILES)
    outside = tmp_path / "outside"
    plant(root, "spotpatch/journal", outside)
    with pytest.raises(OSError, match="spotpatch/journal is a symlink"):
        DiskJournal(root / ".git").begin(apply_plan(root))
    assert tree(outside) == []


async def test_recovery_never_reads_a_journal_through_a_symlink(repo_factory, tmp_path: Path, caplog) -> None:
    root = repo_factory(FILES)
    plan = apply_plan(root)
    crash_after(root, plan, 2)  # a real half-done Apply's journal …
    outside = tmp_path / "outside"
    journal_dir(root / ".git").rename(outside)  # … moved out, and linked back in
    plant(root, "spotpatch/journal", outside)
    written = (root / "a.txt").read_bytes()
    with caplog.at_level(logging.ERROR, logger="spotpatch"):
        assert await recover_pending(root) == []
    assert (root / "a.txt").read_bytes() == written == b"ALPHA\n"  # nothing acted on
    assert tree(outside) == ["job_1.journal"]
    assert "spotpatch/journal is a symlink" in caplog.text and str(tmp_path) not in caplog.text


async def test_a_journal_is_never_moved_aside_through_a_symlinked_quarantine(repo_factory, tmp_path: Path) -> None:
    root = repo_factory(FILES)
    directory = journal_dir(root / ".git")
    directory.mkdir(parents=True)
    (directory / "job_9.journal").write_bytes(b"not a journal")  # untrusted: would be moved to quarantine
    outside = tmp_path / "outside"
    plant(root, "spotpatch/quarantine", outside)
    [report] = await recover_pending(root)
    assert report.outcome == "needs-attention"
    assert tree(outside) == []
    assert (directory / "job_9.journal").read_bytes() == b"not a journal"  # kept where it was


async def test_a_job_is_refused_with_the_reason_while_configure_still_serves(repo_factory, tmp_path: Path,
                                                                            monkeypatch) -> None:
    from spotpatch_agent.engine.service import EngineService
    from spotpatch_agent.protocol.models import JobCreateParams, TrustedConfig

    root = repo_factory({"src/App.tsx": "export const App = 1;\n"})
    outside = tmp_path / "outside"
    plant(root, "spotpatch", outside)
    monkeypatch.setenv("SP_GITDIR_KEY", "sk-gitdir-canary-0123456789")
    config = TrustedConfig.model_validate({"providers": [{
        "id": "p", "displayName": "P", "baseUrl": "http://127.0.0.1:9/v1", "apiKeyEnv": "SP_GITDIR_KEY",
        "models": [{"id": "m", "model": "x", "displayName": "M"}]}]})
    service = EngineService(send_event=lambda e: None)
    async with service.running():
        await service.configure(root, config)  # crash recovery is skipped (logged), the engine serves
        ann = {"annotationId": "a", "pageUrl": "/", "targets": [
            {"index": 1, "instruction": "x", "source": {"file": "src/App.tsx", "line": 1}}]}
        with pytest.raises(SpotPatchError) as caught:
            await service.job_create(JobCreateParams.model_validate({"annotation": ann, "modelProfileId": "m"}))
    assert caught.value.code == ErrorCode.REPO_BLOCKED and "<git dir>/spotpatch is a symlink" in caught.value.message
    assert tree(outside) == []


def test_the_ownership_marker_is_never_written_or_read_through_a_symlink(tmp_path: Path) -> None:
    import json

    from spotpatch_agent.worktree.marker import MARKER_NAME, read_marker, write_marker

    admin = tmp_path / "repo" / ".git" / "worktrees" / "job-1"
    admin.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    os.symlink(victim, admin / (MARKER_NAME + ".tmp"))
    with pytest.raises(OSError):
        write_marker(admin, "job_1")
    assert victim.read_text() == "keep me\n"
    (admin / (MARKER_NAME + ".tmp")).unlink()
    write_marker(admin, "job_1")
    assert read_marker(admin)["jobId"] == "job_1"  # type: ignore[index]
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps({"owner": "spotpatch", "jobId": "job_forged"}))
    (admin / MARKER_NAME).unlink()
    os.symlink(forged, admin / MARKER_NAME)
    assert read_marker(admin) is None


async def test_a_symlinked_lock_file_is_refused(repo_factory, tmp_path: Path) -> None:
    root = repo_factory(FILES)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    (root / ".git" / "spotpatch").mkdir()
    os.symlink(victim, root / ".git" / "spotpatch" / "write.lock")
    with pytest.raises(SpotPatchError, match=r"<git dir>/spotpatch/write.lock is a symlink;"):
        ProjectWriteLock(root / ".git").try_acquire()
    assert victim.read_text() == "keep\n"

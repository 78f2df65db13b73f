"""Executor behaviour: deadlines kill git, read/write gate, terminal integrity failures (docs/design.md §5, §6)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import anyio
import pytest

from spotpatch_agent.errors import JobFailure
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import Limits
from spotpatch_agent.tools._git import tool_git
from spotpatch_agent.tools.context import WorktreeContext
from tests.tools.conftest import call

pytestmark = pytest.mark.anyio


def _fake_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put a `git` that records its pid and hangs first on PATH; returns the pid file."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    pid_file = tmp_path / "git.pid"
    script = bin_dir / "git"
    script.write_text(f"#!/bin/sh\necho $$ > '{pid_file}'\nexec sleep 30\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return pid_file


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_cancel_kills_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pid_file = _fake_git(tmp_path, monkeypatch)
    with anyio.move_on_after(1):
        await tool_git(tmp_path, "ls-files")
    pid = int(pid_file.read_text())
    assert _gone(pid)


async def test_tool_deadline_is_terminal(make_executor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, executor = make_executor({"src/a.ts": "a\n"}, tool_timeout_sec=1)
    pid_file = _fake_git(tmp_path, monkeypatch)
    with pytest.raises(JobFailure) as info:
        await executor.execute("list_files", call(glob="**", maxResults=5))
    assert info.value.code is ErrorCode.LIMIT_EXCEEDED
    assert _gone(int(pid_file.read_text()))


async def test_concurrent_reads_and_a_write(make_executor) -> None:
    root, executor = make_executor({"src/a.ts": "value = 1\n", "src/b.ts": "other\n"})
    results = {}

    async def run(key: str, name: str, arguments: str) -> None:
        results[key] = await executor.execute(name, arguments)

    async with anyio.create_task_group() as tg:
        for n in range(5):
            tg.start_soon(run, f"read{n}", "read_file", call(path="src/b.ts", startLine=None, endLine=None))
        tg.start_soon(run, "write", "replace_text", call(path="src/a.ts", oldText="value = 1", newText="value = 2"))
        tg.start_soon(run, "search", "search_text", call(query="value", glob=None, maxResults=5))
    assert all(r.ok for r in results.values())
    assert (root / "src/a.ts").read_text() == "value = 2\n"
    after = await executor.execute("read_file", call(path="src/a.ts", startLine=None, endLine=None))
    assert "value = 2" in after.output


async def test_change_before_write_is_terminal(make_executor, monkeypatch: pytest.MonkeyPatch) -> None:
    root, executor = make_executor({"src/a.ts": "value = 1\n"})
    real = WorktreeContext.write_fingerprint

    async def racing_fingerprint(self: WorktreeContext, rels) -> str:
        (root / "src/a.ts").write_text("value = 1  # edited by someone else\n")
        return await real(self, rels)

    monkeypatch.setattr(WorktreeContext, "write_fingerprint", racing_fingerprint)
    with pytest.raises(JobFailure) as info:
        await executor.execute("replace_text", call(path="src/a.ts", oldText="value = 1", newText="value = 2"))
    assert info.value.code is ErrorCode.INTERNAL
    assert (root / "src/a.ts").read_text() == "value = 1  # edited by someone else\n"


async def test_fingerprint_change_after_restore_is_terminal(make_executor, monkeypatch: pytest.MonkeyPatch) -> None:
    root, executor = make_executor({"src/a.ts": "value = 1\n"})
    calls = iter(["before", "after"])

    async def shifting_fingerprint(self: WorktreeContext, rels) -> str:
        return next(calls)

    monkeypatch.setattr(WorktreeContext, "write_fingerprint", shifting_fingerprint)
    with pytest.raises(JobFailure) as info:
        await executor.execute("replace_text", call(path="src/a.ts", oldText="value = 1", newText="value = 2   "))
    assert info.value.code is ErrorCode.INTERNAL
    assert (root / "src/a.ts").read_text() == "value = 1\n"  # restored all the same


async def test_fingerprint_tracks_changed_bytes(repo_factory) -> None:
    root = repo_factory({"src/a.ts": "a\n"})
    ctx = WorktreeContext(root, Limits())
    clean = await ctx.fingerprint()
    (root / "src/a.ts").write_text("b\n")
    first = await ctx.fingerprint()
    (root / "src/a.ts").write_text("c\n")  # same status line, different bytes
    second = await ctx.fingerprint()
    (root / "new.ts").write_text("n\n")
    third = await ctx.fingerprint()
    assert len({clean, first, second, third}) == 4
    (root / "src/a.ts").write_text("c\n")
    (root / "new.ts").unlink()
    assert await ctx.fingerprint() == second


async def test_a_failing_git_under_list_files_is_the_tools_failure_not_an_exception_group(
    make_executor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both sides of the index listing run git at once; when git fails the job gets list_files' own failure
    (``JobFailure`` INTERNAL naming the tool), not an ``ExceptionGroup`` of git errors reported as a crash."""
    _, executor = make_executor({"src/a.ts": "a\n"})
    bin_dir = tmp_path / "brokenbin"
    bin_dir.mkdir()
    script = bin_dir / "git"
    script.write_text("#!/bin/sh\necho 'fatal: not a git repository' >&2\nexit 128\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(JobFailure) as info:
        await executor.execute("list_files", call(glob="**", maxResults=5))
    assert info.value.code is ErrorCode.INTERNAL and info.value.message.startswith("list_files: ")

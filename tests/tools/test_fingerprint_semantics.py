"""The fingerprint rule (docs/design.md §6: a failed write is retryable only if the worktree is unchanged) under
a check that writes files, a concurrent writer and an untracked file made by a check (issue 17).

Write tools compare a fingerprint of the paths they write; the executor and the final check stage compare the
whole-worktree fingerprint around every check. These tests use only the executor's public behaviour (outcomes,
``fingerprint()``, ``checks_that_wrote``, ``run_final_checks``), so they hold for the whole-worktree fingerprint
everywhere as well; each fails against a cheaper shortcut that misses one of the cases (a fingerprint that is
not taken again after a check, a fingerprint that only counts the engine's own writes, one reused across calls,
one that ignores the executable bit).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from spotpatch_agent.engine.gates import run_final_checks
from spotpatch_agent.errors import JobFailure
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import CheckConfig, Limits
from spotpatch_agent.tools import ToolExecutor
from spotpatch_agent.tools import file_write as write_module  # replace_text's checked write
from tests.conftest import make_repo
from tests.tools._support import update
from tests.tools.conftest import call

pytestmark = pytest.mark.anyio

FILES = {"src/a.ts": "value = 1\n", "src/b.ts": "other\n", "docs/c.md": "one\ntwo\nthree\n"}

_WRITER = r"""
import json, os, sys
root = sys.argv[1]
for line in sys.stdin:
    op, rel, *rest = json.loads(line)
    path = os.path.join(root, rel)
    if op == "write":
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(rest[0] if rest else "")
    elif op == "rm":
        os.unlink(path)
    elif op == "chmod":
        os.chmod(path, int(rest[0], 8))
    print("done", flush=True)
"""


class Writer:
    """A separate process that writes into the worktree when asked, and says when it is done."""

    def __init__(self, root: Path) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", _WRITER, str(root)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)

    def do(self, command: str) -> None:
        """``write REL TEXT``, ``rm REL`` or ``chmod REL OCTAL``; returns once the process has done it."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(command.split(" ", 2)) + "\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "done"

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=10)


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[Writer]:
    proc = Writer(tmp_path / "repo")
    yield proc
    proc.close()


def check(cid: str, script: str) -> CheckConfig:
    return CheckConfig(id=cid, name=cid, command="sh", args=["-c", script], required=True)


def executor_with(root: Path, *checks: CheckConfig) -> ToolExecutor:
    return ToolExecutor(root, Limits(), checks=checks)


async def whitespace_rejection(executor: ToolExecutor) -> tuple[bool, str | None, bool]:
    result = await executor.execute("replace_text", call(path="src/a.ts", oldText="value = 1", newText="value = 1   "))
    return result.ok, result.code, result.retryable


async def test_a_check_that_writes_a_tracked_file_is_seen(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    executor = executor_with(root, check("edits", "echo changed >> src/b.ts"), check("quiet", "true"))
    await executor.execute("run_check", call(checkId="quiet"))
    assert executor.checks_that_wrote == frozenset() and not executor.checks_changed_files
    await executor.execute("run_check", call(checkId="edits"))
    assert executor.checks_that_wrote == {"edits"} and executor.checks_changed_files
    # The check's writes happened before this call: the call's own undo still leaves the worktree as it was.
    assert await whitespace_rejection(executor) == (False, "PATCH_REJECTED", True)
    assert (root / "src/a.ts").read_text() == "value = 1\n"


async def test_a_check_that_writes_the_same_bytes_back_changed_nothing(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    executor = executor_with(root, check("rewrites", "cp src/b.ts /tmp/$$.b && rm src/b.ts && cp /tmp/$$.b src/b.ts"
                                                     " && rm /tmp/$$.b && touch made.tmp && rm made.tmp"))
    result = await executor.execute("run_check", call(checkId="rewrites"))
    assert result.ok, result.output
    assert executor.checks_that_wrote == frozenset()


async def test_an_untracked_file_created_by_a_check_is_seen(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    executor = executor_with(root, check("makes", "mkdir -p out2/deep && echo x > out2/deep/new.txt"))
    await executor.execute("run_check", call(checkId="makes"))
    assert executor.checks_that_wrote == {"makes"}
    assert (root / "out2/deep/new.txt").exists()


async def test_a_later_clean_run_of_a_check_is_not_a_write(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    executor = executor_with(root, check("once", "test -e made.txt || echo x > made.txt"))
    await executor.execute("run_check", call(checkId="once"))
    assert executor.checks_that_wrote == {"once"}
    await executor.execute("run_check", call(checkId="once"))  # the file exists now: nothing written
    assert executor.checks_that_wrote == frozenset()
    assert executor.checks_changed_files  # sticky


async def test_a_host_run_check_that_writes_fails_the_job(tmp_path: Path) -> None:
    for script in ("echo x >> src/b.ts", "echo x > untracked-by-check.txt", "chmod +x src/b.ts"):
        root = make_repo(tmp_path / f"repo{len(script)}", FILES)
        executor = executor_with(root)
        seen = []
        with pytest.raises(JobFailure) as info:
            await run_final_checks([check("c", script)], cwd=root, limits=Limits(), fresh={},
                                   fingerprint=executor.fingerprint, on_result=seen.append, sandbox="warn")
        assert info.value.code is ErrorCode.CHECK_FAILED
        assert len(seen) == 1


async def test_a_host_run_check_that_writes_nothing_passes(tmp_path: Path, writer: Writer) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    executor = executor_with(root)
    assert (await executor.execute("replace_text", call(path="src/a.ts", oldText="value = 1", newText="value = 2"))).ok
    writer.do("write src/b.ts changed between calls\n")  # before the stage: part of the tree it fingerprints
    results = await run_final_checks([check("c", "cat src/a.ts > /dev/null")], cwd=root, limits=Limits(), fresh={},
                                     fingerprint=executor.fingerprint, on_result=lambda _: None, sandbox="warn")
    assert [r.run.ok for r in results] == [True]


async def test_a_concurrent_writer_between_calls(tmp_path: Path, writer: Writer) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    executor = executor_with(root, check("quiet", "true"))
    first = await executor.fingerprint()
    writer.do("write src/b.ts changed by another process\n")
    writer.do("write fresh/untracked.ts made by another process\n")
    second = await executor.fingerprint()
    assert second != first  # the whole-worktree fingerprint sees writes that did not come from the tools
    writer.do("write src/b.ts other\n")
    writer.do("rm fresh/untracked.ts")
    assert await executor.fingerprint() == first  # and is about content, not about how often files changed

    writer.do("write docs/c.md changed again\n")
    # A write call after someone else's write: the call's own undo is complete, so the answer is retryable.
    assert await whitespace_rejection(executor) == (False, "PATCH_REJECTED", True)
    assert (root / "src/a.ts").read_text() == "value = 1\n"
    # A check that writes nothing is not a writer, even though the worktree changed since the last call.
    writer.do("write docs/c.md changed once more\n")
    await executor.execute("run_check", call(checkId="quiet"))
    assert executor.checks_that_wrote == frozenset()
    writer.do("write late.txt after the check\n")
    await executor.execute("run_check", call(checkId="quiet"))
    assert executor.checks_that_wrote == frozenset()
    # apply_patch after another write: a context mismatch is retryable, a good patch applies.
    writer.do("write docs/c.md one\ntwo\nthree\n")
    rejected = await executor.execute("apply_patch", call(patch=update("docs/c.md", "zwei", "TWO")))
    assert (rejected.ok, rejected.code, rejected.retryable) == (False, "PATCH_REJECTED", True)
    assert (await executor.execute("apply_patch", call(patch=update("docs/c.md", "two", "TWO")))).ok


async def test_a_change_during_the_call_that_survives_the_undo_is_terminal(
    tmp_path: Path, writer: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Between the write and the undo another process makes the edited file executable: the undo puts the bytes
    # back but keeps the mode, so the worktree differs from before the call (git sees the mode).
    root = make_repo(tmp_path / "repo", FILES)
    executor = executor_with(root)
    real = write_module._whitespace_problems
    calls = []

    async def meddling(ctx, rel, config):
        calls.append(rel)
        if len(calls) == 2:  # after the write, before the undo
            writer.do("chmod src/a.ts 755")
        return await real(ctx, rel, config)

    monkeypatch.setattr(write_module, "_whitespace_problems", meddling)
    with pytest.raises(JobFailure) as info:
        await whitespace_rejection(executor)
    assert info.value.code is ErrorCode.INTERNAL
    assert (root / "src/a.ts").read_text() == "value = 1\n"
    assert os.stat(root / "src/a.ts").st_mode & stat.S_IXUSR


async def test_a_change_that_the_undo_overwrites_stays_retryable(
    tmp_path: Path, writer: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    executor = executor_with(root)
    real = write_module._whitespace_problems
    calls = []

    async def meddling(ctx, rel, config):
        calls.append(rel)
        if len(calls) == 2:
            writer.do("write src/a.ts value = 1   \n")  # same as the edit: the undo writes the original back
        return await real(ctx, rel, config)

    monkeypatch.setattr(write_module, "_whitespace_problems", meddling)
    assert await whitespace_rejection(executor) == (False, "PATCH_REJECTED", True)
    assert (root / "src/a.ts").read_text() == "value = 1\n"

"""apply_patch through the executor: caches, limits, policy, all-or-nothing undo (docs/design.md §6)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from spotpatch_agent.errors import JobFailure
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.tools import apply_patch as apply_patch_module
from spotpatch_agent.tools.context import WorktreeContext
from spotpatch_agent.tools.registry import TOOL_SPECS
from tests.tools._support import create, delete, update
from tests.tools.conftest import call

pytestmark = pytest.mark.anyio

A = "one\ntwo\nthree\n"


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(root).parts
    } | {p.relative_to(root).as_posix() + "/": b"" for p in root.rglob("*") if p.is_dir() and ".git" not in p.parts}


def test_schema() -> None:
    assert TOOL_SPECS["apply_patch"].parameters == {
        "type": "object",
        "properties": {"patch": {"type": "string", "description": TOOL_SPECS["apply_patch"].parameters[
            "properties"]["patch"]["description"]}},
        "required": ["patch"],
        "additionalProperties": False,
    }


async def test_write_bumps_version_and_invalidates_reads(make_executor) -> None:
    _, executor = make_executor({"a.txt": A})
    first = await executor.execute("read_file", call(path="a.txt", startLine=None, endLine=None))
    assert "two" in first.output
    result = await executor.execute("apply_patch", call(patch=update("a.txt", "two", "TWO")))
    assert (result.ok, result.wrote, result.path) == (True, True, "a.txt")
    assert executor.version >= 1
    again = await executor.execute("read_file", call(path="a.txt", startLine=None, endLine=None))
    assert "TWO" in again.output and "    2| two" not in again.output


async def test_keeps_executable_mode(make_executor) -> None:
    root, executor = make_executor({"run.sh": A})
    (root / "run.sh").chmod(0o755)
    assert (await executor.execute("apply_patch", call(patch=update("run.sh", "two", "TWO")))).ok
    assert stat.S_IMODE(os.stat(root / "run.sh").st_mode) == 0o755


async def test_oversized_patch_is_terminal(make_executor) -> None:
    root, executor = make_executor({"a.txt": A}, editable_file_max_bytes=1024)
    patch = create("big.txt", *(["x" * 99] * 25))
    with pytest.raises(JobFailure) as raised:
        await executor.execute("apply_patch", call(patch=patch))
    assert raised.value.code is ErrorCode.LIMIT_EXCEEDED
    assert not (root / "big.txt").exists()


async def test_oversized_result_is_restored_and_terminal(make_executor) -> None:
    big = "".join(f"line {i:04d} " + "x" * 80 + "\n" for i in range(10))
    root, executor = make_executor({"a.txt": big}, editable_file_max_bytes=1024)
    patch = (
        "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,4 @@\n"
        f" {big.splitlines()[0]}\n+{'y' * 60}\n+{'z' * 60}\n {big.splitlines()[1]}\n"
    )
    with pytest.raises(JobFailure) as raised:
        await executor.execute("apply_patch", call(patch=patch))
    assert raised.value.code is ErrorCode.LIMIT_EXCEEDED
    assert (root / "a.txt").read_text() == big


async def test_ignored_new_file_is_terminal(make_executor) -> None:
    root, executor = make_executor({".gitignore": "*.log\n", "a.txt": A})
    with pytest.raises(JobFailure) as raised:
        await executor.execute("apply_patch", call(patch=create("debug.log", "x")))
    assert raised.value.code is ErrorCode.CHANGESET_REJECTED
    assert not (root / "debug.log").exists()


async def test_binary_or_symlinked_target_is_terminal(make_executor) -> None:
    root, executor = make_executor({"bin.dat": b"\x00\x01two\n", "a.txt": A})
    (root / "link.txt").symlink_to("a.txt")
    for path in ("bin.dat", "link.txt"):
        with pytest.raises(JobFailure) as raised:
            await executor.execute("apply_patch", call(patch=update(path, "two", "TWO")))
        assert raised.value.code is ErrorCode.CHANGESET_REJECTED
    assert (root / "a.txt").read_text() == A


async def test_missing_file_update_is_retryable(make_executor) -> None:
    _, executor = make_executor({"a.txt": A})
    result = await executor.execute("apply_patch", call(patch=update("nope.txt", "two", "TWO")))
    assert (result.ok, result.code, result.retryable) == (False, "PATCH_REJECTED", True)
    assert "does not exist" in result.output


async def test_undo_restores_deleted_and_removes_created(make_executor) -> None:
    crlf = "one\r\ntwo\r\nthree\r\n"
    root, executor = make_executor({"old.sh": "a\nb\n", "win.txt": crlf})
    (root / "old.sh").chmod(0o755)
    before = snapshot(root)
    patch = (
        delete("old.sh", "a", "b")
        + create("src/deep/new.ts", "x")
        + "diff --git a/win.txt b/win.txt\n--- a/win.txt\n+++ b/win.txt\n"
        + "@@ -1,3 +1,4 @@\n one\r\n two\r\n+bare\n three\r\n"
    )
    result = await executor.execute("apply_patch", call(patch=patch))
    assert (result.ok, result.code, result.retryable) == (False, "PATCH_REJECTED", True)
    assert "CRLF" in result.output
    assert snapshot(root) == before
    assert stat.S_IMODE(os.stat(root / "old.sh").st_mode) == 0o755


async def test_git_reading_other_paths_is_terminal_before_any_write(make_executor, monkeypatch) -> None:
    # The call's write fingerprint covers the patch's paths only, so git must not write any other path: when
    # git's own reading of the patch (--numstat) names other paths than the parser did, nothing is applied.
    root, executor = make_executor({"a.txt": A, "b.txt": "b\n"})
    real = apply_patch_module._git_apply_check

    async def misread(ctx, parsed):
        ok, named = await real(ctx, parsed)
        assert named == ["a.txt"]
        return ok, [*named, "b.txt"]

    monkeypatch.setattr(apply_patch_module, "_git_apply_check", misread)
    with pytest.raises(JobFailure) as raised:
        await executor.execute("apply_patch", call(patch=update("a.txt", "two", "TWO")))
    assert raised.value.code is ErrorCode.INTERNAL
    assert (root / "a.txt").read_text() == A
    assert (root / "b.txt").read_text() == "b\n"


async def test_changed_fingerprint_after_rejection_is_terminal(make_executor, monkeypatch) -> None:
    _, executor = make_executor({"a.txt": A})
    counter = iter(range(100))

    async def drifting(self, rels) -> str:
        return str(next(counter))

    monkeypatch.setattr(WorktreeContext, "write_fingerprint", drifting)
    with pytest.raises(JobFailure) as raised:
        await executor.execute("apply_patch", call(patch=update("a.txt", "zwei", "TWO")))
    assert raised.value.code is ErrorCode.INTERNAL


async def test_offset_hunk_applies_but_fuzz_does_not(make_executor) -> None:
    text = "a\nb\none\ntwo\nthree\nc\nd\n"
    root, executor = make_executor({"a.txt": text})
    # line numbers off by one: git finds the exact context one line further down (an offset, not fuzz)
    patch = update("a.txt", "two", "TWO").replace("@@ -1,3 +1,3 @@", "@@ -2,3 +2,3 @@")
    assert (await executor.execute("apply_patch", call(patch=patch))).ok
    assert (root / "a.txt").read_text() == text.replace("two", "TWO")
    # one context line differs: rejected, never fuzzed
    patch = update("a.txt", "TWO", "2", ("onee", "three")).replace("@@ -1,3 +1,3 @@", "@@ -3,3 +3,3 @@")
    result = await executor.execute("apply_patch", call(patch=patch))
    assert (result.ok, result.code) == (False, "PATCH_REJECTED")
    assert (root / "a.txt").read_text() == text.replace("two", "TWO")

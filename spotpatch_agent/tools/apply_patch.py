"""``apply_patch {patch}``: apply one canonical unified git diff, all or nothing (docs/design.md §6).

Write tool. Creates, updates and deletes allowed UTF-8 text files; never renames, never changes modes,
never applies partially (no ``--reject``), never fuzzes (git's exact context, no ``--recount``, no
``--unidiff-zero``), never turns a patch into a text replacement by guessing.

Outcomes, in the order they are decided:

- retryable ``TOOL_ARGUMENTS_INVALID`` (nothing touched): an empty ``patch``.
- terminal ``JobFailure(LIMIT_EXCEEDED)``: ``patch`` over ``2 × editableFileMaxBytes`` bytes, or a resulting
  file over ``editableFileMaxBytes`` (restored first).
- parsing (:mod:`~spotpatch_agent.tools.patch_parse`, pure, before any file access): a format problem —
  Markdown fences, prose, ``*** Begin Patch``, bare ``@@``, corrupt hunk counts, misplaced
  ``\\ No newline at end of file``, renames/copies, binary patches, duplicate paths — is a retryable
  ``PATCH_REJECTED``; an unsafe path (absolute, ``..``, NUL, percent-escape, backslash …), a protected path,
  a symlink/submodule mode or a mode change is terminal ``JobFailure(CHANGESET_REJECTED)``.
- the file system policy, per file: an update/delete target must be an allowed file (as for
  ``replace_text``: not ignored, no symlink on the path, regular, UTF-8, ≤ ``editableFileMaxBytes``); a
  created file's existing parent directories must be real directories inside the root and the path must
  not be ignored; anything else is terminal ``JobFailure(CHANGESET_REJECTED)``. A created file that
  already exists (as a regular file) is a retryable ``PATCH_REJECTED``.
- ``git apply --check --numstat`` fails (context mismatch): retryable ``PATCH_REJECTED`` when the worktree
  fingerprint still equals the pre-call one, terminal ``JobFailure(INTERNAL)`` otherwise. The fingerprint
  here is :meth:`WorktreeContext.write_fingerprint` of the patch's paths: the call runs alone and writes
  only those, so they are the only part of the worktree that can differ.
- git reads the patch as touching other paths than the parser (its ``--numstat``): terminal ``INTERNAL``,
  before anything is written.
- ``git apply``; then: every resulting file is allowed text within the size bound; a CRLF file gained no
  bare-LF line and no file gained or lost its BOM (else restore, retryable ``PATCH_REJECTED`` if the
  fingerprint is back to the pre-call one, terminal ``INTERNAL`` otherwise).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

import anyio
from pydantic import Field

from spotpatch_agent.errors import JobFailure
from spotpatch_agent.policy.paths import BOM, PathDenied, load_allowed
from spotpatch_agent.protocol.errors import ErrorCode, ToolErrorCode
from spotpatch_agent.tools._fs import write_atomic
from spotpatch_agent.tools.base import ALL_EDIT_FORMATS, ToolArgs, ToolDef, ToolResult, arguments_guidance
from spotpatch_agent.tools.context import WorktreeContext
from spotpatch_agent.tools.patch_parse import (
    FilePatch,
    ParsedPatch,
    PatchRejection,
    parse_patch,
    summarize_paths,
)

DESCRIPTION = (
    "Apply one raw canonical unified git diff (as 'git diff' prints it) to create, update or delete allowed "
    "text files, all or nothing. Each file starts with 'diff --git a/PATH b/PATH', then '--- a/PATH' and "
    "'+++ b/PATH' ('--- /dev/null' after 'new file mode 100644' to create, '+++ /dev/null' after 'deleted "
    "file mode 100644' to delete), then '@@ -a,b +c,d @@' hunks whose counts match their lines exactly, "
    "with context lines copied exactly from the current file. No Markdown fences, no prose, no "
    "'*** Begin Patch'. Renames are not supported (delete + create in one patch). For a small edit inside "
    "one existing file prefer replace_text."
)

_RETRY_HINT = (
    "Nothing was changed. Re-read the file with read_file and send a corrected diff in a new call, or, for "
    "a local edit of an existing file, use replace_text instead."
)


class ApplyPatchArgs(ToolArgs):
    patch: str = Field(description="The whole patch: a raw canonical unified git diff, nothing else.")


@dataclass
class _Original:
    """What a patch path held before the call: ``data`` None for a file the patch creates;
    ``new_dirs`` the directories a created file needs that did not exist (outermost first)."""

    rel: str
    path: Path
    data: bytes | None
    new_dirs: tuple[Path, ...] = ()
    mode: int = 0o644


def _terminal(message: str) -> JobFailure:
    return JobFailure(ErrorCode.CHANGESET_REJECTED, message)


def _refused(rel: str) -> JobFailure:
    return _terminal(f"apply_patch refused: the path {rel} is not an allowed file")


def _rejected(message: str, path: str | None = None) -> ToolResult:
    return ToolResult.rejected(ToolErrorCode.PATCH_REJECTED, message, path=path)


async def apply_patch(ctx: WorktreeContext, args: ApplyPatchArgs) -> ToolResult:
    """Run ``apply_patch`` (see the module docstring for every outcome). Must run under the write gate."""
    max_bytes = ctx.limits.get("editableFileMaxBytes")
    try:
        size = len(args.patch.encode("utf-8"))
    except UnicodeEncodeError:
        return ToolResult.rejected(
            ToolErrorCode.TOOL_ARGUMENTS_INVALID, arguments_guidance(APPLY_PATCH, ["patch must be valid Unicode."])
        )
    if size > 2 * max_bytes:
        raise JobFailure(ErrorCode.LIMIT_EXCEEDED, "apply_patch: the patch exceeds 2 × editableFileMaxBytes")
    if not args.patch.strip():
        return ToolResult.rejected(
            ToolErrorCode.TOOL_ARGUMENTS_INVALID, arguments_guidance(APPLY_PATCH, ["patch must not be empty."])
        )

    parsed = parse_patch(args.patch)
    if isinstance(parsed, PatchRejection):
        if parsed.terminal:
            raise _terminal(parsed.message)
        return _rejected(parsed.message, parsed.path)
    single = parsed.files[0].path if len(parsed.files) == 1 else None

    originals: list[_Original] = []
    for file in parsed.files:
        original = await _check_target(ctx, file, max_bytes)
        if isinstance(original, ToolResult):
            return original
        originals.append(original)

    paths = [original.rel for original in originals]
    before_fp = await ctx.write_fingerprint(paths)
    applied, named = await _git_apply_check(ctx, parsed)
    if not applied:
        failing = [f.path for f in parsed.files if not await _git_apply(ctx, f, check=True)] or list(parsed.paths)
        if await ctx.write_fingerprint(paths) != before_fp:
            raise JobFailure(ErrorCode.INTERNAL, "apply_patch: the worktree changed while checking the patch")
        return _rejected(
            f"The patch does not apply to the current content of {summarize_paths(failing)}: a context or "
            "removed line does not match the file exactly (or the file ends differently). " + _RETRY_HINT,
            single,
        )
    if named != paths:
        # git reads the patch as touching other paths than the parser did: never let it write them.
        raise JobFailure(ErrorCode.INTERNAL, "apply_patch: the patch could not be applied cleanly")
    ctx.note_written(paths)
    try:
        applied = await _git_apply(ctx, parsed, check=False)
    finally:
        ctx.bump()
    try:
        if not applied:
            raise _Undo(None)
        problem = _check_results(ctx.root, originals, max_bytes)
        if problem is not None:
            raise _Undo(problem)
    except _Undo as undo:
        _restore(ctx, originals)  # synchronous: cancellation cannot interrupt it
        if undo.problem is None or await ctx.write_fingerprint(paths) != before_fp:
            raise JobFailure(ErrorCode.INTERNAL, "apply_patch: the patch could not be applied cleanly") from None
        if undo.problem.startswith("LIMIT:"):
            raise JobFailure(ErrorCode.LIMIT_EXCEEDED, undo.problem[len("LIMIT:") :]) from None
        return _rejected(undo.problem, single)
    except BaseException:
        _restore(ctx, originals)  # synchronous: cancellation cannot interrupt it
        raise
    return ToolResult.success(_summary(parsed), path=single, wrote=True)


class _Undo(Exception):
    def __init__(self, problem: str | None) -> None:
        super().__init__(problem or "")
        self.problem = problem


# ------------------------------------------------------------------ policy before writing


async def _check_target(ctx: WorktreeContext, file: FilePatch, max_bytes: int) -> _Original | ToolResult:
    rel = file.path
    if await ctx.ignored(rel):
        raise _refused(rel)
    if file.kind != "create":
        try:
            allowed = await anyio.to_thread.run_sync(
                lambda: load_allowed(ctx.root, rel, for_write=True, max_bytes=max_bytes)
            )
        except PathDenied:
            if not _exists(ctx.root, rel):
                return _rejected(
                    f"{rel} does not exist, so it cannot be updated or deleted; nothing was changed. Use "
                    "'new file mode 100644' with '--- /dev/null' to create a file.",
                    rel,
                )
            raise _refused(rel) from None
        mode = stat.S_IMODE(os.lstat(allowed.path).st_mode)
        return _Original(rel=rel, path=allowed.path, data=allowed.data, mode=mode)
    parts = rel.split("/")
    real_root = os.path.realpath(ctx.root)
    current = ctx.root
    new_dirs: list[Path] = []
    for index, segment in enumerate(parts):
        current = current / segment
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            if index < len(parts) - 1:
                new_dirs.append(current)
            continue
        if new_dirs:  # cannot exist below a missing directory; defensive
            raise _refused(rel)
        if stat.S_ISLNK(st.st_mode):
            raise _refused(rel)
        if index < len(parts) - 1:
            if not stat.S_ISDIR(st.st_mode):
                raise _refused(rel)
            real = os.path.realpath(current)
            if os.path.commonpath([real_root, real]) != real_root:
                raise _refused(rel)
        elif stat.S_ISREG(st.st_mode):
            return _rejected(
                f"{rel} already exists; nothing was changed. Update it with a normal diff ('--- a/{rel}') "
                "or with replace_text.",
                rel,
            )
        else:
            raise _refused(rel)
    return _Original(rel=rel, path=ctx.root.joinpath(*parts), data=None, new_dirs=tuple(new_dirs))


def _exists(root: Path, rel: str) -> bool:
    try:
        os.lstat(root.joinpath(*rel.split("/")))
    except OSError:
        return False
    return True


# ------------------------------------------------------------------ git


async def _git_apply(ctx: WorktreeContext, parsed: ParsedPatch | FilePatch, *, check: bool) -> bool:
    """``git apply [--check] --whitespace=nowarn -- <temp file>``; True when git exits 0. The patch is
    handed over as a file in the system temp directory (outside the worktree); model text never becomes
    an argv element."""
    fd, name = tempfile.mkstemp(prefix="spotpatch-", suffix=".patch")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(parsed.text.encode("utf-8"))
        argv = ["apply", *(["--check"] if check else []), "--whitespace=nowarn", "--", name]
        out = await ctx.git(*argv, ok_codes=tuple(range(256)), max_bytes=64 * 1024)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)
    return out.returncode == 0


async def _git_apply_check(ctx: WorktreeContext, parsed: ParsedPatch) -> tuple[bool, list[str]]:
    """``git apply --check --numstat -z`` of the whole patch: whether it applies, and the paths git reads in
    it, in order (a rename would name two)."""
    fd, name = tempfile.mkstemp(prefix="spotpatch-", suffix=".patch")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(parsed.text.encode("utf-8"))
        out = await ctx.git("apply", "--check", "--numstat", "-z", "--whitespace=nowarn", "--", name,
                            ok_codes=tuple(range(256)), max_bytes=1024 * 1024)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)
    if out.returncode != 0:
        return False, []
    named: list[str] = []
    fields = out.stdout.split(b"\0")
    i = 0
    while i < len(fields):
        record = fields[i]
        i += 1
        if not record:
            continue
        parts = record.split(b"\t", 2)
        if len(parts) != 3:
            return True, ["?"]
        if parts[2]:
            named.append(parts[2].decode("utf-8", errors="replace"))
        else:  # a rename or copy: "\0old\0new"
            named += [f.decode("utf-8", errors="replace") for f in fields[i : i + 2]]
            i += 2
    return True, named


# ------------------------------------------------------------------ result checks


def _check_results(root: Path, originals: list[_Original], max_bytes: int) -> str | None:
    """A model-facing problem with the written result (``LIMIT:``-prefixed for a size overrun), or None."""
    for original in originals:
        rel = original.rel
        try:
            st = os.lstat(original.path)
        except FileNotFoundError:
            if original.data is None:
                return f"The patch did not create {rel}. " + _RETRY_HINT
            continue
        if not stat.S_ISREG(st.st_mode):
            return f"The patch did not produce a regular file at {rel}. " + _RETRY_HINT
        if st.st_size > max_bytes:
            return f"LIMIT:apply_patch: {rel} would exceed editableFileMaxBytes"
        try:
            data = load_allowed(root, rel, for_write=True, max_bytes=max_bytes).data
        except PathDenied:
            return f"The patch would make {rel} a non-text file (only UTF-8 text is allowed). " + _RETRY_HINT
        old = original.data
        if old is None:
            if data.startswith(BOM):
                return f"The patch would start {rel} with a byte order mark; send the text without it. {_RETRY_HINT}"
            continue
        if old.startswith(BOM) != data.startswith(BOM):
            return (
                f"The patch would add or remove the byte order mark at the start of {rel}; keep the first line's "
                f"start unchanged, or use replace_text. {_RETRY_HINT}"
            )
        crlf = old.count(b"\r\n")
        if crlf and crlf == old.count(b"\n") and data.count(b"\r\n") != data.count(b"\n"):
            return (
                f"{rel} uses CRLF line endings but the patch would add lines ending in a bare LF. Keep '\\r' at "
                "the end of every context, removed and added line, or use replace_text (it converts line "
                f"endings). {_RETRY_HINT}"
            )
    return None


def _restore(ctx: WorktreeContext, originals: list[_Original]) -> None:
    """Put every patch path back to its pre-call bytes (absent for created files); raises terminal INTERNAL."""
    try:
        for original in reversed(originals):
            path = original.path
            if original.data is None:
                with contextlib.suppress(FileNotFoundError):
                    if os.path.isdir(path) and not os.path.islink(path):
                        os.rmdir(path)
                    else:
                        os.unlink(path)
                for directory in reversed(original.new_dirs):
                    with contextlib.suppress(FileNotFoundError, OSError):
                        os.rmdir(directory)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if os.path.lexists(path) and (os.path.islink(path) or not os.path.isfile(path)):
                raise OSError("not a regular file")
            if os.path.lexists(path):
                write_atomic(path, original.data)
            else:
                fd, tmp = tempfile.mkstemp(prefix=".spotpatch-", suffix=".tmp", dir=path.parent)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(original.data)
                os.chmod(tmp, original.mode)
                os.replace(tmp, path)
    except OSError:
        raise JobFailure(ErrorCode.INTERNAL, "apply_patch could not restore the files it changed") from None
    finally:
        ctx.bump()


def _summary(parsed: ParsedPatch) -> str:
    lines = [f"Applied the patch to {len(parsed.files)} file{'s' if len(parsed.files) != 1 else ''}:"]
    verbs = {"create": "created", "update": "updated", "delete": "deleted"}
    for file in parsed.files[:50]:
        added = sum(1 for h in file.hunks for line in h.lines if line.startswith("+"))
        removed = sum(1 for h in file.hunks for line in h.lines if line.startswith("-"))
        lines.append(f"  {verbs[file.kind]} {file.path} (+{added} -{removed})")
    if len(parsed.files) > 50:
        lines.append("  …")
    return "\n".join(lines)


APPLY_PATCH = ToolDef(
    name="apply_patch", description=DESCRIPTION, args=ApplyPatchArgs, handler=apply_patch, kind="write",
    deadline="tool", audit=(("patch", "patch"),), audit_served=False,
    retry_hint="read_file the lines the patch touches and rebuild the patch from the file's current text.",
    offer="always",
    edit_formats=ALL_EDIT_FORMATS, descriptions={},
)

"""The checked write of one file by a write tool (docs/design.md §6): ``replace_text`` and ``edit_lines``.

:func:`write_checked` fingerprints the file (:meth:`WorktreeContext.write_fingerprint`), re-reads it through
the path policy and compares the original bytes (changed → terminal ``JobFailure(INTERNAL)``), writes
through a same-directory temp file and ``os.replace``, then runs ``git diff --check`` on the path. New
whitespace problems → the original bytes are restored and, only if the worktree fingerprint equals the
pre-call one, the problems are returned for a retryable ``PATCH_REJECTED``; otherwise (or if restoring
fails) terminal ``JobFailure(INTERNAL)``. The whitespace check reads a small index holding the file's entry
(:meth:`WorktreeContext.diff_check`), not the whole index. :func:`load_writable` is the path policy a
write tool applies before it reads the file it will write.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import anyio

from spotpatch_agent.errors import JobFailure
from spotpatch_agent.policy.paths import AllowedFile, PathDenied, is_protected, load_allowed, normalize_rel_path
from spotpatch_agent.policy.redact import redact_cut
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.tools._fs import write_atomic
from spotpatch_agent.tools.context import WorktreeContext


def _terminal_path(tool: str, rel: str | None) -> JobFailure:
    where = f" {rel}" if rel else ""
    return JobFailure(ErrorCode.CHANGESET_REJECTED, f"{tool} refused: the path{where} is not an allowed file")


async def load_writable(ctx: WorktreeContext, raw: str, *, tool: str) -> AllowedFile:
    """The allowed, existing, writable file at ``raw`` (a model-supplied path) with its bytes. Raises terminal
    ``JobFailure(CHANGESET_REJECTED)`` when it is not one (unnormalizable, protected incl. ``.env.example``,
    git-ignored, symlink on the path, outside, not regular, missing, binary, too big) — docs/design.md §6."""
    try:
        rel = normalize_rel_path(raw)
    except PathDenied:
        raise _terminal_path(tool, None) from None
    if is_protected(rel, for_write=True) or await ctx.ignored(rel):
        raise _terminal_path(tool, rel)
    try:
        return load_allowed(ctx.root, rel, for_write=True, max_bytes=ctx.limits.get("editableFileMaxBytes"))
    except PathDenied:
        raise _terminal_path(tool, rel) from None


async def write_checked(
    ctx: WorktreeContext, rel: str, original: bytes, new: bytes, *, crlf: bool, tool: str,
) -> list[str]:
    """Write ``new`` over ``original`` and run the whitespace check; returns new problems ([] = kept).

    On problems or on any exception after the write, the original bytes are restored (shielded from
    cancellation). Raises terminal ``JobFailure(INTERNAL)`` when the file changed under us, restoring
    fails, or the fingerprint after restoring differs from the one before the call.
    """
    config = await _whitespace_config(ctx) if crlf else ()
    before_fp = await ctx.write_fingerprint([rel])
    before = await _whitespace_problems(ctx, rel, config)
    path = _recheck(ctx, rel, original, tool)
    ctx.note_written([rel])
    try:
        write_atomic(path, new)
    except OSError:
        raise JobFailure(ErrorCode.INTERNAL, f"{tool} could not write {rel}") from None
    finally:
        ctx.bump()
    try:
        after = await _whitespace_problems(ctx, rel, config)
    except BaseException:
        with anyio.CancelScope(shield=True):
            _restore(ctx, rel, path, original, tool)
        raise
    added = Counter(key for key, _ in after) - Counter(key for key, _ in before)
    if not added:
        return []
    _restore(ctx, rel, path, original, tool)
    if await ctx.write_fingerprint([rel]) != before_fp:
        raise JobFailure(ErrorCode.INTERNAL, f"{tool}: the worktree changed while undoing the edit of {rel}")
    problems: list[str] = []
    for (message, text), number in after:
        if added[(message, text)] > 0:
            added[(message, text)] -= 1
            shown = f" {redact_cut(text, 200, ellipsis='')!r}" if text else ""
            problems.append(f"line {number}: {message}{shown}")
    return problems


def _recheck(ctx: WorktreeContext, rel: str, original: bytes, tool: str) -> Path:
    """Re-read the file through the policy; it must still hold ``original`` (docs/design.md §6)."""
    try:
        current = load_allowed(ctx.root, rel, for_write=True, max_bytes=ctx.limits.get("editableFileMaxBytes"))
    except PathDenied:
        raise JobFailure(ErrorCode.INTERNAL, f"{tool}: {rel} changed before it could be written") from None
    if current.data != original:
        raise JobFailure(ErrorCode.INTERNAL, f"{tool}: {rel} changed before it could be written")
    return current.path


def _restore(ctx: WorktreeContext, rel: str, path: Path, original: bytes, tool: str) -> None:
    try:
        write_atomic(path, original)
    except OSError:
        raise JobFailure(ErrorCode.INTERNAL, f"{tool} could not restore {rel}") from None
    finally:
        ctx.bump()


async def _whitespace_config(ctx: WorktreeContext) -> tuple[str, ...]:
    """For a CRLF file, add ``cr-at-eol`` to the repository's ``core.whitespace`` (else every line fails)."""
    out = await ctx.git("config", "--get", "core.whitespace", ok_codes=(0, 1), max_bytes=4096)
    current = out.stdout.decode("utf-8", errors="replace").strip()
    return (f"core.whitespace={current + ',' if current else ''}cr-at-eol",)


_Problem = tuple[tuple[str, str], int]


async def _whitespace_problems(ctx: WorktreeContext, rel: str, config: tuple[str, ...]) -> list[_Problem]:
    """``git diff --check -- <rel>`` problems as ``((message, added line text), line number)``; the key
    leaves out the line number, so a problem present before and after an edit compares equal."""
    out = await ctx.diff_check(rel, config)
    lines = out.stdout.decode("utf-8", errors="replace").split("\n")
    prefix = f"{rel}:"
    problems: list[_Problem] = []
    for index, line in enumerate(lines):
        if not line.startswith(prefix):
            continue
        number, _, message = line[len(prefix) :].partition(": ")
        if not number.isdigit():
            continue
        following = lines[index + 1] if index + 1 < len(lines) else ""
        text = following[1:] if following.startswith("+") else ""
        problems.append(((message.strip(), text), int(number)))
    return problems

"""``read_file {path, startLine?, endLine?}``: a bounded, line-numbered range of one allowed text file.

Read-only (docs/design.md §6). Lines are 1-based and inclusive; ``startLine`` defaults to 1, ``endLine`` to
``startLine + readMaxLines - 1``; a call returns at most ``readMaxLines`` lines and ``readMaxBytes`` bytes of
line text. Output::

    src/App.tsx (lines 1-3 of 120)
        1| import { x } from "y";
        2|
        3| export function App() {
    [lines 4-120 not shown: read them in one call with startLine 4 and endLine 120]

Under the ``anchors`` edit format each row carries the line's anchor instead (``   12#KT| text``,
tools/anchors.py), which ``edit_lines`` takes.

The continuation hint always names a range (up to ``readMaxLines`` lines), never a single line: a model
that follows it reads the rest in as few calls as possible. A file a target of the job points into (its
"offered" lines, :attr:`~spotpatch_agent.tools.context.WorktreeContext.focus`) read without a range returns
the window around the offered line when that line lies past the default window: up to
:data:`FOCUS_CONTEXT_ABOVE` lines above it, the rest below, with a hint for the lines above.

A narrow read (at most :data:`NARROW_READ_LINES` lines of a longer file, an explicit range) is counted per
file; the second one and every later one end with a hint to read the whole file, or a range, in one call.

The BOM and each line's trailing CR are not shown. Any unusable path (missing, protected, outside, directory,
symlink, binary, too big, git-ignored, unnormalizable) gives the one uniform retryable ``TOOL_PATH_DENIED``
result :data:`~spotpatch_agent.tools.base.PATH_DENIED_MESSAGE`, with no hint of the reason (docs/design.md §6).
"""

from __future__ import annotations

import hashlib

from pydantic import Field

from spotpatch_agent.policy.redact import REDACTOR
from spotpatch_agent.protocol.errors import ToolErrorCode
from spotpatch_agent.tools.anchors import line_hash
from spotpatch_agent.tools.base import (
    ALL_EDIT_FORMATS,
    PATH_DENIED_MESSAGE,
    ToolArgs,
    ToolDef,
    ToolResult,
    arguments_guidance,
)
from spotpatch_agent.tools.context import TextFile, WorktreeContext

DESCRIPTION = (
    "Read a range of lines of one allowed text file, line-numbered as '   12| text'. "
    "The number prefix is not part of the file: never copy it into replace_text. "
    "Use paths from list_files or search_text. Read-only."
)
#: The description under the ``anchors`` edit format.
DESCRIPTION_ANCHORS = (
    "Read a range of lines of one allowed text file. Each line is shown as '   12#KT| text': '12#KT' is the "
    "line's anchor (line number, '#', a 2-character hash of the line), the text after '| ' is the line. "
    "Pass anchors to edit_lines exactly as shown. Use paths from list_files or search_text. Read-only."
)


class ReadFileArgs(ToolArgs):
    path: str = Field(description="Relative POSIX path from list_files or search_text, e.g. 'src/App.tsx'.")
    start_line: int | None = Field(ge=1, description="First line to return (1-based); null for 1.")
    end_line: int | None = Field(ge=1, description="Last line to return (inclusive); null for as many as allowed.")


#: Lines shown above a target's offered line when a range-less read of its file is centred on it.
FOCUS_CONTEXT_ABOVE = 60
#: A read of at most this many lines of a longer file is "narrow"; the second narrow read of a file and every
#: later one end with a hint to read a range or the whole file in one call (issue 27: a small model read one
#: line per turn until the turn limit).
NARROW_READ_LINES = 3


def default_start(total: int, offered: tuple[int, ...], max_lines: int) -> int:
    """Where a read without a range starts: line 1, unless the file's first offered line lies past the
    default window (``max_lines`` lines from 1): then up to :data:`FOCUS_CONTEXT_ABOVE` lines above it."""
    inside = [line for line in offered if 1 <= line <= total]
    if not inside or min(inside) <= max_lines:
        return 1
    return max(1, min(inside) - min(FOCUS_CONTEXT_ABOVE, max_lines // 4))


def render(file: TextFile, start: int, end: int | None, *, max_lines: int, max_bytes: int,
           anchors: bool = False) -> str:
    """The line-numbered window ``start..end`` of ``file``, bounded by ``max_lines`` lines and ``max_bytes``
    bytes (UTF-8) of line text; a single line longer than ``max_bytes`` is cut and marked. Lines left out
    after the window get a hint naming the next range to read in one call. ``anchors``: each row shows the
    line's anchor (``12#KT``, of the line's real bytes) instead of its bare number."""
    total = len(file.lines)
    if total == 0:
        return f"{file.rel} (empty file)"
    if start > total:
        return f"{file.rel}: startLine {start} is past the end of the file ({total} lines)."
    last = min(total, start + max_lines - 1 if end is None else min(end, start + max_lines - 1))
    width = max(5, len(str(total)))
    rows: list[str] = []
    used = 0
    cut_note = ""
    for number in range(start, last + 1):
        text = REDACTOR(file.lines[number - 1])  # before any cut: a cut secret is no longer recognised
        size = len(text.encode("utf-8")) + 1
        if used + size > max_bytes:
            if rows:
                break
            text = text.encode("utf-8")[: max_bytes - 1].decode("utf-8", errors="ignore")
            cut_note = f"[line {number} is longer than {max_bytes} bytes and was cut]"
        mark = f"#{line_hash(file.lines[number - 1])}" if anchors else ""
        rows.append(f"{str(number).rjust(width)}{mark}| {text}")
        used += size
        if cut_note:
            break
    shown_end = start + len(rows) - 1
    out = [f"{file.rel} (lines {start}-{shown_end} of {total})", *rows]
    if cut_note:
        out.append(cut_note)
    if shown_end < total:
        first, last = shown_end + 1, min(total, shown_end + max_lines)
        if last == total:
            out.append(f"[lines {first}-{total} not shown: read them in one call with startLine {first} "
                       f"and endLine {total}]")
        else:
            out.append(f"[lines {first}-{total} not shown: read the next range with startLine {first} "
                       f"and endLine {last}]")
    return "\n".join(out)


def narrow_read_hint(ctx: WorktreeContext, rel: str, first: int, last: int, total: int) -> str | None:
    """Count a read of lines ``first..last`` of ``rel`` (``total`` lines) when it is narrow (at most
    :data:`NARROW_READ_LINES` lines of a longer file) in ``ctx.narrow_reads``; from the file's second narrow
    read on, a hint to read the whole file (when it fits in one read, ``readMaxLines``) or a range in one call."""
    if last - first + 1 > NARROW_READ_LINES or total <= last - first + 1:
        return None
    count = ctx.narrow_reads.get(rel, 0) + 1
    ctx.narrow_reads[rel] = count
    if count < 2:
        return None
    max_lines = ctx.limits.get("readMaxLines")
    if total <= max_lines:
        advice = f"read the whole file in one call: startLine 1 and endLine {total}"
    else:
        low = max(1, first - 40)
        advice = f"read a range in one call, e.g. startLine {low} and endLine {min(total, low + 99)}"
    return (f"[This is narrow read {count} of {rel} (a few lines at a time; each read costs a turn). Instead, "
            f"{advice}, and work from that output.]")


async def read_file(ctx: WorktreeContext, args: ReadFileArgs) -> ToolResult:
    """Run ``read_file``. Never raises for a bad path: every denial is the same retryable result."""
    if args.start_line is not None and args.end_line is not None and args.end_line < args.start_line:
        return ToolResult.rejected(
            ToolErrorCode.TOOL_ARGUMENTS_INVALID,
            arguments_guidance(READ_FILE, ["endLine must not be smaller than startLine."]),
        )
    file = await ctx.read_text(args.path)
    if file is None:
        return ToolResult.rejected(ToolErrorCode.TOOL_PATH_DENIED, PATH_DENIED_MESSAGE)
    max_lines = ctx.limits.get("readMaxLines")
    start = args.start_line
    if start is None and args.end_line is None:
        start = default_start(len(file.lines), ctx.focus.get(file.rel, ()), max_lines)
    text = render(file, start or 1, args.end_line, max_lines=max_lines, max_bytes=ctx.limits.get("readMaxBytes"),
                  anchors=ctx.edit_format == "anchors")
    if start is not None and start > 1 and args.start_line is None:  # centred on a target's offered line
        above = max(1, start - max_lines)
        text += (f"\n[lines 1-{start - 1} not shown (the read starts near the target's line): read them with "
                 f"startLine {above} and endLine {start - 1}]")
    if args.start_line is not None and args.end_line is not None and args.start_line <= len(file.lines):
        hint = narrow_read_hint(ctx, file.rel, args.start_line, min(args.end_line, len(file.lines)), len(file.lines))
        if hint:
            text += "\n" + hint
    result = ToolResult.success(text, path=file.rel)
    result.content_sha256 = hashlib.sha256(file.data).hexdigest()  # the audit ledger's "bytes served"
    return result


READ_FILE = ToolDef(
    name="read_file", description=DESCRIPTION, args=ReadFileArgs, handler=read_file, kind="read", deadline="tool",
    audit=(("path", "path"), ("startLine", "int"), ("endLine", "int")), audit_served=True,
    retry_hint="use a path returned by list_files or search_text, or another range.", offer="always",
    edit_formats=ALL_EDIT_FORMATS, descriptions={"anchors": DESCRIPTION_ANCHORS},
)

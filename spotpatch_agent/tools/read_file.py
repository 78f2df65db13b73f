"""``read_file {path, startLine?, endLine?}``: a bounded, line-numbered range of one allowed text file.

Read-only (DESIGN.md §6). Lines are 1-based and inclusive; ``startLine`` defaults to 1, ``endLine`` to
``startLine + readMaxLines - 1``; a call returns at most ``readMaxLines`` lines and ``readMaxBytes`` bytes of
line text. Output::

    src/App.tsx (lines 1-3 of 120)
        1| import { x } from "y";
        2|
        3| export function App() {
    [117 more lines: call read_file with startLine 4]

The BOM and each line's trailing CR are not shown. Any unusable path (missing, protected, outside, directory,
symlink, binary, too big, git-ignored, unnormalizable) gives the one uniform retryable ``TOOL_PATH_DENIED``
result :data:`~spotpatch_agent.tools.base.PATH_DENIED_MESSAGE`, with no hint of the reason (DESIGN.md §6).
"""

from __future__ import annotations

from pydantic import Field

from spotpatch_agent.policy.redact import REDACTOR
from spotpatch_agent.protocol.errors import ToolErrorCode
from spotpatch_agent.tools.base import PATH_DENIED_MESSAGE, ToolArgs, ToolDef, ToolResult, arguments_guidance
from spotpatch_agent.tools.context import TextFile, WorktreeContext

DESCRIPTION = (
    "Read a range of lines of one allowed text file, line-numbered as '   12| text'. "
    "The number prefix is not part of the file: never copy it into replace_text. "
    "Use paths from list_files or search_text. Read-only."
)


class ReadFileArgs(ToolArgs):
    path: str = Field(description="Relative POSIX path from list_files or search_text, e.g. 'src/App.tsx'.")
    start_line: int | None = Field(ge=1, description="First line to return (1-based); null for 1.")
    end_line: int | None = Field(ge=1, description="Last line to return (inclusive); null for as many as allowed.")


def render(file: TextFile, start: int, end: int | None, *, max_lines: int, max_bytes: int) -> str:
    """The line-numbered window ``start..end`` of ``file``, bounded by ``max_lines`` lines and ``max_bytes``
    bytes (UTF-8) of line text; a single line longer than ``max_bytes`` is cut and marked."""
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
        rows.append(f"{str(number).rjust(width)}| {text}")
        used += size
        if cut_note:
            break
    shown_end = start + len(rows) - 1
    out = [f"{file.rel} (lines {start}-{shown_end} of {total})", *rows]
    if cut_note:
        out.append(cut_note)
    if shown_end < total:
        out.append(f"[{total - shown_end} more lines: call read_file with startLine {shown_end + 1}]")
    return "\n".join(out)


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
    text = render(
        file,
        args.start_line or 1,
        args.end_line,
        max_lines=ctx.limits.get("readMaxLines"),
        max_bytes=ctx.limits.get("readMaxBytes"),
    )
    return ToolResult.success(text, path=file.rel)


READ_FILE = ToolDef(name="read_file", description=DESCRIPTION, args=ReadFileArgs, handler=read_file, writes=False)

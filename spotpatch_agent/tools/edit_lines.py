"""``edit_lines {path, startAnchor, endAnchor, newText}``: replace a range of whole lines named by anchors
(the ``anchors`` edit format, docs/design.md §6 "Edit formats"; anchors: tools/anchors.py).

Write tool, offered instead of ``replace_text`` under ``editFormat: "anchors"``. The range is inclusive, from
the line of ``startAnchor`` to the line of ``endAnchor``. Each anchor is verified against the file's current
bytes: its line must exist and its hash must equal the hash of that line now. Nothing is ever matched
fuzzily; a stale or unknown anchor is refused with the current anchors around its line.

``newText`` is the text of the new lines: one trailing line break is dropped, then each line gets the line
break of the range's first line (CRLF in a CRLF file), and the last one the break the range's last line had
(none when the range ends at a last line without one). An empty ``newText`` deletes the range. A UTF-8 BOM
is kept and never added. Cannot create, delete or rename files.

Outcomes, in the order they are decided:

- retryable ``TOOL_ARGUMENTS_INVALID`` (nothing touched): an anchor that is not ``<line>#<hash>``,
  ``endAnchor`` before ``startAnchor``, NUL in ``newText``, text that is not valid Unicode.
- terminal ``JobFailure(LIMIT_EXCEEDED)``: ``newText`` over ``editableFileMaxBytes`` bytes, or a result over it.
- terminal ``JobFailure(CHANGESET_REJECTED)``: the path is not an allowed, existing, writable file (the same
  policy as ``replace_text``: tools/file_write.py :func:`load_writable`).
- retryable ``PATCH_REJECTED`` (file unchanged): an anchor whose line is past the end (or 0) or whose hash
  does not match the line now, or a bare line number instead of an anchor (the answer shows the current
  anchors around the line); a ``newText`` equal to what
  the range holds (a no-op); a BOM put at the start of the file.
- the write: :func:`~spotpatch_agent.tools.file_write.write_checked`, as ``replace_text`` (fingerprint,
  re-read and compare, atomic replace, ``git diff --check``, undo on new whitespace problems).
"""

from __future__ import annotations

from pydantic import Field

from spotpatch_agent.errors import JobFailure
from spotpatch_agent.policy.paths import BOM
from spotpatch_agent.protocol.errors import ErrorCode, ToolErrorCode
from spotpatch_agent.tools.anchors import bare_line, line_hash, parse_anchor
from spotpatch_agent.tools.base import ToolArgs, ToolDef, ToolResult, arguments_guidance
from spotpatch_agent.tools.context import TextFile, WorktreeContext, display_lines
from spotpatch_agent.tools.file_write import load_writable, write_checked
from spotpatch_agent.tools.read_file import render

DESCRIPTION = (
    "Replace a range of whole lines of an existing allowed text file. Name the first and the last line of the "
    "range (inclusive) by their anchors exactly as read_file or search_text show them, e.g. '12#KT'; the same "
    "anchor twice replaces one line. newText holds the new lines, with their indentation, without anchors or "
    "'| ' prefixes; an empty newText deletes the lines. To insert lines, replace one line with itself plus "
    "the new lines. An anchor whose line changed since you read it is refused with the current anchors: use "
    "those. Cannot create, delete or rename files."
)

#: Lines shown on each side of a refused anchor's line, and most lines shown of a successful edit.
CONTEXT_LINES = 3
_SHOWN_MAX_LINES = 20
_MAX_LISTED = 20


class EditLinesArgs(ToolArgs):
    path: str = Field(description="Relative POSIX path of an existing file, e.g. 'src/App.tsx'.")
    start_anchor: str = Field(description="Anchor of the first line to replace, as read_file shows it, e.g. '12#KT'.")
    end_anchor: str = Field(description="Anchor of the last line to replace (inclusive); equal to startAnchor "
                                        "for a single line.")
    new_text: str = Field(description="The new lines for the whole range (may be empty to delete the lines).")


def _invalid(problem: str) -> ToolResult:
    return ToolResult.rejected(ToolErrorCode.TOOL_ARGUMENTS_INVALID, arguments_guidance(EDIT_LINES, [problem]))


def _lines(body: bytes) -> list[bytes]:
    """The lines of ``body`` with their line breaks, split at ``\\n`` only (as ``display_lines`` does)."""
    parts = body.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _ending(line: bytes) -> bytes:
    return b"\r\n" if line.endswith(b"\r\n") else b"\n" if line.endswith(b"\n") else b""


def _window(file: TextFile, line: int) -> str:
    """The current anchors of the lines around ``line`` (clamped to the file)."""
    total = len(file.lines)
    if total == 0:
        return f"{file.rel} is empty."
    centre = min(max(line, 1), total)
    start = max(1, centre - CONTEXT_LINES)
    return render(file, start, min(total, centre + CONTEXT_LINES), max_lines=2 * CONTEXT_LINES + 1,
                  max_bytes=4096, anchors=True)


def _anchor_or_line(raw: str) -> tuple[int, str | None] | None:
    """``(line, hash)`` of an anchor, ``(line, None)`` of a bare line number, None for anything else."""
    parsed = parse_anchor(raw)
    if parsed is not None:
        return parsed
    number = bare_line(raw)
    return None if number is None else (number, None)


def _anchor_problem(field: str, number: int, digest: str | None, file: TextFile) -> str | None:
    """Why ``number#digest`` does not name a current line of ``file`` (None when it does)."""
    total = len(file.lines)
    if digest is None and 1 <= number <= total:
        return (f"{field} must be an anchor, not a bare line number: line {number} of {file.rel} is "
                f"{number}#{line_hash(file.lines[number - 1])}. The current anchors around it:\n"
                f"{_window(file, number)}")
    if number < 1 or number > total:
        named = f"{number}#{digest}" if digest else f"{number}"
        return (f"{field} {named} names line {number}, but {file.rel} has {total} lines. "
                f"The current anchors there:\n{_window(file, number)}")
    now = line_hash(file.lines[number - 1])
    if now != digest:
        return (f"{field} {number}#{digest} is stale: line {number} of {file.rel} is now {number}#{now} (the "
                "file changed since it was read, or the anchor was mistyped). The current anchors around it:\n"
                f"{_window(file, number)}")
    return None


def _replacement(new_text: str, eol: bytes, last_end: bytes) -> bytes:
    if not new_text:
        return b""
    rows = new_text.replace("\r\n", "\n").removesuffix("\n").split("\n")
    return eol.join(row.encode("utf-8") for row in rows) + last_end


async def edit_lines(ctx: WorktreeContext, args: EditLinesArgs) -> ToolResult:
    """Run ``edit_lines`` (see the module docstring for every outcome). Must run under the write gate."""
    max_bytes = ctx.limits.get("editableFileMaxBytes")
    try:
        new_raw = args.new_text.encode("utf-8")
    except UnicodeEncodeError:
        return _invalid("newText must be valid Unicode text.")
    if len(new_raw) > max_bytes:
        raise JobFailure(ErrorCode.LIMIT_EXCEEDED, "edit_lines: newText exceeds editableFileMaxBytes")
    start, end = _anchor_or_line(args.start_anchor), _anchor_or_line(args.end_anchor)
    if start is None or end is None:
        field = "startAnchor" if start is None else "endAnchor"
        return _invalid(f"{field} must be one anchor exactly as read_file shows it: the line number, '#' and "
                        "two characters, e.g. '12#KT'.")
    if end[0] < start[0]:
        return _invalid("endAnchor must not name a line before startAnchor.")
    if "\0" in args.new_text:
        return _invalid("newText must not contain NUL characters.")

    allowed = await load_writable(ctx, args.path, tool="edit_lines")
    rel, data = allowed.rel, allowed.data
    file = TextFile(rel=rel, data=data, lines=display_lines(data))
    problems = [p for p in (_anchor_problem("startAnchor", *start, file),
                            _anchor_problem("endAnchor", *end, file) if end != start else None) if p]
    if problems:
        return ToolResult.rejected(ToolErrorCode.PATCH_REJECTED,
                                   "\n".join(problems) + "\nNothing was changed.", path=rel)

    bom = BOM if data.startswith(BOM) else b""
    body = data[len(bom):]
    lines = _lines(body)
    first, last = start[0], end[0]
    eol = _ending(lines[first - 1]) or _ending(lines[0]) or b"\n"
    replacement = _replacement(args.new_text, eol, _ending(lines[last - 1]))
    new_body = b"".join(lines[: first - 1]) + replacement + b"".join(lines[last:])
    if new_body == body:
        return ToolResult.rejected(ToolErrorCode.PATCH_REJECTED, (
            f"newText is exactly what lines {first}-{last} of {rel} hold now; nothing was changed. Put the "
            "changed lines in newText."), path=rel)
    if new_body.startswith(BOM):
        return ToolResult.rejected(ToolErrorCode.PATCH_REJECTED,
                                   "newText must not put a byte order mark at the start of the file; nothing "
                                   "was changed.", path=rel)
    new_data = bom + new_body
    if len(new_data) > max_bytes:
        raise JobFailure(ErrorCode.LIMIT_EXCEEDED, f"edit_lines: {rel} would exceed editableFileMaxBytes")

    found = await write_checked(ctx, rel, data, new_data, crlf=b"\r\n" in body, tool="edit_lines")
    if found:
        listed = "\n".join(f"  {p}" for p in found[:_MAX_LISTED])
        return ToolResult.rejected(ToolErrorCode.PATCH_REJECTED, (
            f"The edit was undone: git's whitespace check failed on the new text in {rel}:\n{listed}\n"
            "Fix the whitespace (e.g. trailing spaces, space before tab, blank lines at the end) and call "
            "edit_lines again with the same anchors."), path=rel)
    return ToolResult.success(_summary(rel, new_data, first, last, replacement.count(b"\n") + (
        1 if replacement and not replacement.endswith(b"\n") else 0)), path=rel, wrote=True)


def _summary(rel: str, new_data: bytes, first: int, last: int, count: int) -> str:
    """What the model is told after a write: the new lines with their anchors (or the lines around a
    deletion), and that later lines moved."""
    new_file = TextFile(rel=rel, data=new_data, lines=display_lines(new_data))
    shift = count - (last - first + 1)
    moved = (f" Lines after line {last} moved by {shift:+d}: use the anchors shown here or read_file again."
             if shift else "")
    if count:
        now = f"{first}-{first + count - 1}"
        head = f"Replaced lines {first}-{last} of {rel} with {count} line(s), now lines {now}.{moved}"
        shown = render(new_file, first, first + count - 1, max_lines=_SHOWN_MAX_LINES, max_bytes=4096, anchors=True)
    else:
        head = f"Removed lines {first}-{last} of {rel}.{moved}"
        shown = _window(new_file, first) if new_file.lines else f"{rel} is now empty."
    return f"{head}\n{shown}"


EDIT_LINES = ToolDef(
    name="edit_lines", description=DESCRIPTION, args=EditLinesArgs, handler=edit_lines, kind="write",
    deadline="tool", audit=(("path", "path"), ("startAnchor", "anchor"), ("endAnchor", "anchor"), ("newText", "text")),
    audit_served=False,
    retry_hint=("read_file the lines to change again and pass their anchors exactly as shown (line number, '#', "
                "two characters); newText holds the whole new lines. Or use apply_patch."),
    offer="always", edit_formats=frozenset({"anchors"}), descriptions={},
)

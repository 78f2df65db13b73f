"""``replace_text {path, oldText, newText}``: replace the one exact occurrence of ``oldText`` (docs/design.md §6).

Write tool. Works on the file's bytes: ``oldText``/``newText`` are encoded as UTF-8; a UTF-8 BOM is kept
and never added; in a file whose line endings are consistently CRLF (or LF), the texts' line endings are
converted to the file's, so no bare-LF line enters a CRLF file. Cannot create, delete or rename files.

Outcomes, in the order they are decided:

- retryable ``TOOL_ARGUMENTS_INVALID`` (nothing touched): empty ``oldText``, NUL in ``newText``, text that
  is not valid Unicode.
- retryable ``PATCH_REJECTED`` (nothing touched): a no-op (``newText == oldText``), as ``edit_lines`` refuses
  one: the arguments are well formed, the edit is what is wrong, so it does not use up the one correction
  of invalid arguments (weak models send ``Save`` → ``Save``; the repeated-failed-call limit still ends a
  loop of them). The answer says why; when the named file is an allowed, writable one that does not contain
  ``oldText``, it adds the hints of a miss.
- terminal ``JobFailure(LIMIT_EXCEEDED)``: ``oldText``/``newText`` over ``editableFileMaxBytes`` bytes, or a
  result over it (oversized input).
- terminal ``JobFailure(CHANGESET_REJECTED)``: the path is not an allowed, existing, writable file
  (unnormalizable, protected incl. ``.env.example``, git-ignored, symlink on the path, outside, not
  regular, missing, binary, too big) — docs/design.md §6 "path escapes, protected files … are terminal".
- retryable ``PATCH_REJECTED`` (file unchanged): ``oldText`` occurs zero times (the answer shows the
  closest lines of that file, numbered and redacted like ``read_file``, names copied line-number prefixes,
  and, when ``oldText`` is a picked element's page text, that element's source line: tools/hints.py), or
  more than once (the answer names the lines), or ``newText`` would put a BOM at the start.
- the write: fingerprint the file (:meth:`WorktreeContext.write_fingerprint`), re-read and compare the original
  bytes (changed → terminal
  ``JobFailure(INTERNAL)``), write through a same-directory temp file and ``os.replace``; then
  ``git diff --check`` on the path. New whitespace problems → the original bytes are restored and, only if
  the worktree fingerprint equals the pre-call one, a retryable ``PATCH_REJECTED`` naming the problems is
  returned; otherwise (or if restoring fails) terminal ``JobFailure(INTERNAL)``. The whitespace check reads a
  small index holding the file's entry (:meth:`WorktreeContext.diff_check`), not the whole index.
"""

from __future__ import annotations

import anyio
from pydantic import Field

from spotpatch_agent.errors import JobFailure
from spotpatch_agent.policy.paths import (
    BOM,
    PathDenied,
    is_protected,
    normalize_rel_path,
)
from spotpatch_agent.protocol.errors import ErrorCode, ToolErrorCode
from spotpatch_agent.tools.base import ToolArgs, ToolDef, ToolResult, arguments_guidance
from spotpatch_agent.tools.context import TextFile, WorktreeContext, display_lines
from spotpatch_agent.tools.file_write import load_writable, write_checked
from spotpatch_agent.tools.hints import nearest_lines_text, page_text_hint, prefix_hint
from spotpatch_agent.tools.read_file import render

DESCRIPTION = (
    "Replace exactly one occurrence of oldText with newText in an existing allowed text file. "
    "oldText must be copied exactly from the current file (from read_file without the '   12| ' prefixes, "
    "or from search_text), including indentation, and must occur exactly once: add surrounding lines if "
    "needed. Cannot create, delete or rename files."
)

_MAX_POSITIONS = 1000
_MAX_LISTED = 20


class ReplaceTextArgs(ToolArgs):
    path: str = Field(description="Relative POSIX path of an existing file, e.g. 'src/App.tsx'.")
    old_text: str = Field(description="Exact current text to replace; must occur exactly once in the file.")
    new_text: str = Field(description="Replacement text (may be empty to delete oldText).")


def _eol_bytes(body: bytes, text: str) -> bytes:
    """``text`` as UTF-8 with its line endings converted to the file's when the file is consistent."""
    crlf = body.count(b"\r\n")
    bare_lf = body.count(b"\n") - crlf
    if crlf and not bare_lf:
        text = text.replace("\r\n", "\n").replace("\n", "\r\n")
    elif bare_lf and not crlf:
        text = text.replace("\r\n", "\n")
    return text.encode("utf-8")


def _positions(haystack: bytes, needle: bytes) -> list[int]:
    """Start offsets of every (overlapping) occurrence, at most :data:`_MAX_POSITIONS`."""
    found: list[int] = []
    index = haystack.find(needle)
    while index >= 0 and len(found) < _MAX_POSITIONS:
        found.append(index)
        index = haystack.find(needle, index + 1)
    return found


def _invalid(problem: str) -> ToolResult:
    return ToolResult.rejected(ToolErrorCode.TOOL_ARGUMENTS_INVALID, arguments_guidance(REPLACE_TEXT, [problem]))


async def replace_text(ctx: WorktreeContext, args: ReplaceTextArgs) -> ToolResult:
    """Run ``replace_text`` (see the module docstring for every outcome). Must run under the write gate."""
    max_bytes = ctx.limits.get("editableFileMaxBytes")
    try:
        old_raw, new_raw = args.old_text.encode("utf-8"), args.new_text.encode("utf-8")
    except UnicodeEncodeError:
        return _invalid("oldText and newText must be valid Unicode text.")
    if len(old_raw) > max_bytes or len(new_raw) > max_bytes:
        raise JobFailure(ErrorCode.LIMIT_EXCEEDED, "replace_text: oldText or newText exceeds editableFileMaxBytes")
    if not args.old_text:
        return _invalid("oldText must not be empty.")
    if args.old_text == args.new_text:
        return await _no_op(ctx, args)
    if "\0" in args.new_text:
        return _invalid("newText must not contain NUL characters.")

    allowed = await load_writable(ctx, args.path, tool="replace_text")
    rel, data = allowed.rel, allowed.data
    bom = BOM if data.startswith(BOM) else b""
    body = data[len(bom) :]
    old_b, new_b = _eol_bytes(body, args.old_text), _eol_bytes(body, args.new_text)
    found = _positions(body, old_b)
    if not found:
        file = TextFile(rel=rel, data=data, lines=display_lines(data))
        hints = await _miss_hints(ctx, file, args.old_text)
        return ToolResult.rejected(
            ToolErrorCode.PATCH_REJECTED,
            f"oldText was not found in {rel}; nothing was changed. Copy the exact current text from a fresh "
            "read_file or search_text result, without the line-number prefixes ('   12| '), keeping "
            "indentation and whitespace exactly." + "".join(f"\n{h}" for h in hints),
            path=rel,
        )
    if len(found) > 1:
        lines = [str(body.count(b"\n", 0, pos) + 1) for pos in found[:_MAX_LISTED]]
        more = ", …" if len(found) > _MAX_LISTED else ""
        count = f"{len(found)}+" if len(found) >= _MAX_POSITIONS else str(len(found))
        return ToolResult.rejected(
            ToolErrorCode.PATCH_REJECTED,
            f"oldText occurs {count} times in {rel}, at lines {', '.join(lines)}{more}; nothing was changed. "
            "Include more surrounding lines in oldText so that it occurs exactly once.",
            path=rel,
        )
    pos = found[0]
    new_body = body[:pos] + new_b + body[pos + len(old_b) :]
    if new_body.startswith(BOM):
        return ToolResult.rejected(
            ToolErrorCode.PATCH_REJECTED,
            "newText must not put a byte order mark at the start of the file; nothing was changed.",
            path=rel,
        )
    new_data = bom + new_body
    if len(new_data) > max_bytes:
        raise JobFailure(ErrorCode.LIMIT_EXCEEDED, f"replace_text: {rel} would exceed editableFileMaxBytes")

    first_line = body.count(b"\n", 0, pos) + 1
    last_line = first_line + new_b.count(b"\n") - (1 if new_b.endswith(b"\n") else 0)
    problems = await write_checked(ctx, allowed.rel, data, new_data, crlf=b"\r\n" in body, tool="replace_text")
    if problems:
        listed = "\n".join(f"  {p}" for p in problems[:_MAX_LISTED])
        return ToolResult.rejected(
            ToolErrorCode.PATCH_REJECTED,
            f"The edit was undone: git's whitespace check failed on the new text in {rel}:\n{listed}\n"
            "Fix the whitespace (e.g. trailing spaces, space before tab, blank lines at the end) and call "
            "replace_text again.",
            path=rel,
        )
    new_file = TextFile(rel=rel, data=new_data, lines=display_lines(new_data))
    last_line = max(first_line, min(last_line, len(new_file.lines)))
    shown = render(new_file, first_line, last_line, max_lines=20, max_bytes=4096) if new_file.lines else ""
    if new_b:
        summary = f"Replaced 1 occurrence in {rel}; the new text is at lines {first_line}-{last_line}."
    else:
        summary = f"Removed 1 occurrence from {rel} at line {first_line}."
    return ToolResult.success(f"{summary}\n{shown}".rstrip(), path=rel, wrote=True)


async def _miss_hints(ctx: WorktreeContext, file: TextFile, old_text: str) -> list[str]:
    """What a model needs to fix an ``oldText`` that ``file`` does not contain (tools/hints.py): the
    line-number prefixes it copied, the page text it used and where that element's source is, and the
    closest lines of ``file`` (the allowed file the call named, numbered and redacted)."""
    hints = [h for h in (prefix_hint(old_text),) if h]
    page = await page_text_hint(ctx, old_text, file.data.decode("utf-8", errors="replace"))
    if page:
        hints.append(page)
    near = await anyio.to_thread.run_sync(nearest_lines_text, file, old_text)
    if near:
        hints.append(near)
    elif not page:
        hints.append(f"No line of {file.rel} comes close to it: read_file a range of {file.rel} around the "
                         "code you want to change (or search_text a short, distinctive part of it) first.")
    return hints


async def _no_op(ctx: WorktreeContext, args: ReplaceTextArgs) -> ToolResult:
    """The answer to ``newText == oldText`` (retryable ``PATCH_REJECTED``: nothing to do): why, and,
    when the named file is readable and writable by name, whether ``oldText`` is there at all with the
    hints of a miss (the page text, the closest lines)."""
    out = ("newText is identical to oldText, so this edit would change nothing; nothing was changed. newText "
           "must be the text as it should read after the change. Check the target's instruction again: it may "
           "ask to change something else than this text (a class name, an attribute, a style, how a value is "
           "formatted).")
    try:
        rel = normalize_rel_path(args.path)
    except PathDenied:
        return ToolResult.rejected(ToolErrorCode.PATCH_REJECTED, out)
    file = None if is_protected(rel, for_write=True) else await ctx.read_text(rel)
    if file is None or _eol_bytes(file.data, args.old_text) in file.data:  # a denied path: nothing about it
        return ToolResult.rejected(ToolErrorCode.PATCH_REJECTED, out)
    hints = [f"Besides, oldText does not occur in {file.rel}.", *await _miss_hints(ctx, file, args.old_text)]
    return ToolResult.rejected(ToolErrorCode.PATCH_REJECTED, "\n".join([out, *hints]))


REPLACE_TEXT = ToolDef(
    name="replace_text", description=DESCRIPTION, args=ReplaceTextArgs, handler=replace_text, kind="write",
    deadline="tool", audit=(("path", "path"), ("oldText", "text"), ("newText", "text")), audit_served=False,
    retry_hint=("read_file the lines around the change (a range) and copy oldText exactly from that output, "
                "without the line-number prefixes; the page's text may differ from the source (e.g. "
                "\"$19.5\" on the page is \"${price}\" in the code). Or use apply_patch."),
    offer="always",
    edit_formats=frozenset({"replace"}), descriptions={},
)

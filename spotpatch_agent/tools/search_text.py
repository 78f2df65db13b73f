"""``search_text {query, glob?, maxResults}``: bounded fixed-string search in allowed files (docs/design.md §6).

Read-only. Runs ``git grep -F -n -I --no-color -z --untracked --exclude-standard -e <query>`` in the worktree:
the query is one argv element after ``-e`` (never a shell word, never a regex, a leading ``-`` is literal),
binary files are skipped, ignored files are not searched. Hits are kept only in files of the allowed listing
(so never in protected, symlinked or oversized files; decided for the hit files alone,
:meth:`WorktreeContext.allowed_among`) and matching the optional glob. Output: a header,
then ``path:line: text`` per hit (text redacted, then cut to 200 characters; under the ``anchors`` edit format
``path:12#KT: text``, the line's anchor of tools/anchors.py), at most
``min(maxResults, searchMaxResults)`` hits and :data:`~spotpatch_agent.tools.base.OUTPUT_MAX_CHARS` characters.
"""

from __future__ import annotations

import os
import stat

import anyio
from pydantic import Field

from spotpatch_agent.policy.paths import is_text
from spotpatch_agent.policy.redact import redact_cut
from spotpatch_agent.protocol.errors import ToolErrorCode
from spotpatch_agent.tools.anchors import line_hash
from spotpatch_agent.tools.base import (
    ALL_EDIT_FORMATS,
    OUTPUT_MAX_CHARS,
    ToolArgs,
    ToolDef,
    ToolResult,
    arguments_guidance,
    check_pattern,
)
from spotpatch_agent.tools.context import WorktreeContext
from spotpatch_agent.tools.globs import glob_matcher

DESCRIPTION = (
    "Search allowed project files for an exact, case-sensitive text (not a regex), one line at most. "
    "Returns 'path:line: text' hits. Optional glob filters paths like list_files. Read-only."
)
#: The description under the ``anchors`` edit format.
DESCRIPTION_ANCHORS = (
    "Search allowed project files for an exact, case-sensitive text (not a regex), one line at most. "
    "Returns 'path:12#KT: text' hits, where '12#KT' is the line's anchor for edit_lines. Optional glob "
    "filters paths like list_files. Read-only."
)

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # never wait on a FIFO swapped in (it then fails the fstat check)

_BOM = "\ufeff"
#: Longest line text shown per hit, in characters.
HIT_TEXT_MAX_CHARS = 200
_RAW_OUTPUT_MAX_BYTES = 8 * 1024 * 1024
# Hits under a directory of one of these names (ASCII case-insensitive, at any depth) are dropped as git's
# output streams, before they count toward _RAW_OUTPUT_MAX_BYTES: the same hits and the same bound as
# ``:(exclude,icase,glob)**/<name>/**`` pathspecs, without git matching ten globs against every path (half a
# second at 200,000 files). The listing filter still decides what is shown.
# Bound on everything git grep may stream (kept or dropped): a repository whose excluded trees alone hold this
# much matching text gets a truncated answer rather than an unbounded read.
_GREP_STREAM_MAX_BYTES = 1024 * 1024 * 1024
_EXCLUDED_DIRS = frozenset(
    name.encode()
    for name in ("node_modules", ".spotpatch", "dist", "build", ".vite", "coverage", ".next", ".nuxt",
                 ".svelte-kit", "out")
)


class SearchTextArgs(ToolArgs):
    query: str = Field(description="Exact text to find (case-sensitive, single line, not a regex).")
    glob: str | None = Field(description="Optional glob on the relative path, e.g. 'src/**/*.tsx'; null for all.")
    max_results: int = Field(ge=1, description="Maximum hits to return (the job's limit caps it).")


class _HitStream:
    """Collects ``git grep -z`` records (``path\\0line\\0text\\n``) as they stream: records in an excluded
    directory are dropped, the rest are kept while their bytes fit in ``max_bytes`` (``feed`` returns False
    once one does not: git's output is then cut there, exactly where a plain bound on the kept output would
    cut it). An incomplete record is held only while it could still fit (or, excluded, not at all)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.kept: list[bytes] = []
        self.size = 0
        self._tail = b""
        self._skipping = False  # inside the text of an excluded record: drop up to its newline

    async def feed(self, chunk: bytes) -> bool:
        if self._skipping:
            newline = chunk.find(b"\n")
            if newline < 0:
                return True
            chunk, self._skipping = chunk[newline + 1 :], False
        data = self._tail + chunk
        pos = 0
        while True:
            path_end = data.find(b"\0", pos)
            line_end = data.find(b"\0", path_end + 1) if path_end >= 0 else -1
            text_end = data.find(b"\n", line_end + 1) if line_end >= 0 else -1
            if text_end < 0:
                break
            start, pos = pos, text_end + 1
            if _excluded(data[start:path_end]):
                continue
            if self.size + pos - start > self.max_bytes:
                return False
            self.kept.append(data[start:pos])
            self.size += pos - start
        self._tail = data[pos:]
        if len(self._tail) > self.max_bytes - self.size and line_end >= 0:  # a long line, still incomplete
            if not _excluded(data[pos:path_end]):
                return False
            self._tail, self._skipping = b"", True
        return True

    def output(self) -> bytes:
        return b"".join(self.kept)


def _excluded(path: bytes) -> bool:
    """Whether a directory on ``path`` has a name in :data:`_EXCLUDED_DIRS` (ASCII case-insensitive)."""
    parts = path.split(b"/")
    return len(parts) > 1 and any(part.lower() in _EXCLUDED_DIRS for part in parts[:-1])


def _parse_hits(out: bytes) -> list[tuple[str, int, str]]:
    """Parse ``path\\0line\\0text\\n`` records; an incomplete trailing record is dropped."""
    hits: list[tuple[str, int, str]] = []
    pos = 0
    while True:
        path_end = out.find(b"\0", pos)
        line_end = out.find(b"\0", path_end + 1) if path_end >= 0 else -1
        text_end = out.find(b"\n", line_end + 1) if line_end >= 0 else -1
        if text_end < 0:
            return hits
        try:
            path = out[pos:path_end].decode("utf-8")
            line = int(out[path_end + 1 : line_end])
        except (UnicodeDecodeError, ValueError):
            pos = text_end + 1
            continue
        text = out[line_end + 1 : text_end].decode("utf-8", errors="replace").removesuffix("\r")
        hits.append((path, line, text))
        pos = text_end + 1


def _shorten(text: str) -> str:
    """The hit's line text for the model: redacted as a whole line first, then cut (issue 12: a cut made
    first could leave a key prefix the redactor no longer recognises)."""
    return redact_cut(text, HIT_TEXT_MAX_CHARS)


def _readable(root: str, rel: str, max_bytes: int) -> bool:
    """Whether read_file would serve ``rel``, a path of this version's allowed listing: the listing already
    applied the name rules (normalized, not protected, not ignored) and found a regular file under real
    directories, so this re-checks the file itself: opened without following a link, a regular file of at
    most ``max_bytes`` bytes, UTF-8 text (:func:`~spotpatch_agent.policy.paths.is_text`)."""
    try:
        fd = os.open(os.path.join(root, rel), os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1 or st.st_size > max_bytes:
            return False
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(max_bytes + 1)
        return len(data) <= max_bytes and is_text(data)
    except OSError:
        return False
    finally:
        os.close(fd)


def _select(root: str, hits: list[tuple[str, int, str]], cap: int, max_bytes: int,
            anchors: bool = False) -> tuple[list[str], bool]:
    """The hit lines to show (at most ``cap`` and OUTPUT_MAX_CHARS), and whether more hits were left out.
    ``anchors``: each hit names its line by anchor (of the whole line, before redaction and cut)."""
    shown: list[str] = []
    size = 0
    readable: dict[str, bool] = {}
    for path, line, text in hits:
        if path not in readable:  # only files read_file would serve (UTF-8, no NUL anywhere, size): docs/design.md §7
            readable[path] = _readable(root, path, max_bytes)
        if not readable[path]:
            continue
        where = f"{line}#{line_hash(text.removeprefix(_BOM) if line == 1 else text)}" if anchors else str(line)
        entry = f"{path}:{where}: {_shorten(text)}"
        if len(shown) >= cap or size + len(entry) + 1 > OUTPUT_MAX_CHARS:
            return shown, True
        shown.append(entry)
        size += len(entry) + 1
    return shown, False


async def search_text(ctx: WorktreeContext, args: SearchTextArgs) -> ToolResult:
    """Run ``search_text``. Raises ``JobFailure(LIMIT_EXCEEDED)`` for a query or glob over 1000 characters."""
    if (bad := check_pattern(SEARCH_TEXT, "query", args.query)) is not None:
        return bad
    if any(ch in args.query for ch in "\n\r\0"):
        return ToolResult.rejected(
            ToolErrorCode.TOOL_ARGUMENTS_INVALID,
            arguments_guidance(SEARCH_TEXT, ["query must be a single line of text."]),
        )
    match = None
    if args.glob is not None:
        compiled = glob_matcher(SEARCH_TEXT, args.glob)
        if isinstance(compiled, ToolResult):
            return compiled
        match = compiled
    stream = _HitStream(_RAW_OUTPUT_MAX_BYTES)
    out = await ctx.git(
        "grep", "-F", "-n", "-I", "--no-color", "-z", "--untracked", "--exclude-standard", "--full-name",
        "-e", args.query, max_bytes=_GREP_STREAM_MAX_BYTES, ok_codes=(0, 1), sink=stream.feed,
    )  # fmt: skip
    parsed = [hit for hit in _parse_hits(stream.output()) if match is None or match(hit[0])]
    # Only the files with hits are looked up in the allowed listing (the whole listing is not built for them).
    allowed = await ctx.allowed_among(list(dict.fromkeys(hit[0] for hit in parsed)))
    cap = min(args.max_results, ctx.limits.get("searchMaxResults"))
    hits = [hit for hit in parsed if hit[0] in allowed]
    max_bytes = ctx.limits.get("editableFileMaxBytes")
    shown, more_hits = await anyio.to_thread.run_sync(_select, os.fspath(ctx.root), hits, cap, max_bytes,
                                                      ctx.edit_format == "anchors")
    more = out.truncated or more_hits
    if not shown:
        header = "No matches in allowed files." if not more else "No complete matches could be shown."
    elif more:
        header = f"Showing the first {len(shown)} hits; there are more. Narrow the query or the glob."
    else:
        header = f"{len(shown)} hits."
    return ToolResult.success("\n".join([header, *shown]))


SEARCH_TEXT = ToolDef(
    name="search_text", description=DESCRIPTION, args=SearchTextArgs, handler=search_text, kind="read",
    deadline="tool", audit=(("glob", "pattern"), ("query", "pattern"), ("maxResults", "int")), audit_served=False,
    retry_hint="change the arguments or take another approach.", offer="always",
    edit_formats=ALL_EDIT_FORMATS, descriptions={"anchors": DESCRIPTION_ANCHORS},
)

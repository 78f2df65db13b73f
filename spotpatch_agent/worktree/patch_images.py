"""Pure helpers of Apply (docs/design.md §8): the file sections of a ``--full-index`` git diff, and a file's
post-image computed by applying its hunks *exactly* — no process, no I/O.

:func:`apply_exact` is stricter than ``git apply --check``: every hunk must match the pre-image at its
recorded line numbers (git also searches other offsets), so whatever it accepts ``git apply`` accepts
too. Apply uses it only when the pre-image equals the baseline byte for byte and checks the result
against the worktree's result hash; anything it cannot do (a binary patch, a checkout filter, a quoted
path) returns ``None`` and the caller falls back to git.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["FileSection", "Hunk", "apply_exact", "parse_sections", "plain_header"]

_ZERO = frozenset({"0" * 40, "0" * 64})
_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
#: Bytes git's ``quote_c_style`` escapes even with ``core.quotepath=false``.
_QUOTED = frozenset(b'"\\\x7f' + bytes(range(0x20)))


@dataclass(frozen=True)
class Hunk:
    """One ``@@`` hunk: 1-based starts, line counts, and its body lines (prefix char included)."""

    old_start: int
    old_count: int
    new_start: int
    new_count: int
    lines: tuple[bytes, ...]


@dataclass(frozen=True)
class FileSection:
    """One ``diff --git`` section: its header line, blob ids (``None`` = absent), git modes, hunks."""

    header: bytes
    old_oid: str | None = None
    new_oid: str | None = None
    old_mode: str | None = None
    new_mode: str | None = None
    has_index: bool = False
    binary: bool = False
    hunks: tuple[Hunk, ...] = ()


def plain_header(path: str) -> bytes | None:
    """``diff --git a/<path> b/<path>`` as git prints it for ``path`` when unquoted; ``None`` if git would
    quote it (then only git can map the section to its path)."""
    raw = path.encode("utf-8", "surrogateescape")
    if any(b in _QUOTED for b in raw):
        return None
    return b"diff --git a/" + raw + b" b/" + raw


def parse_sections(patch: bytes) -> list[FileSection]:
    """Every ``diff --git`` section of ``patch``, in order (metadata lines, hunks, binary marker)."""
    sections: list[dict[str, object]] = []
    hunks: list[Hunk] = []
    lines = patch.split(b"\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith(b"diff --git "):
            if sections:
                sections[-1]["hunks"] = tuple(hunks)
            sections.append({"header": line})
            hunks = []
            continue
        if not sections:
            continue
        current = sections[-1]
        match = _HUNK.match(line)
        if match:
            old_count = int(match[2]) if match[2] is not None else 1
            new_count = int(match[4]) if match[4] is not None else 1
            body, i = _hunk_body(lines, i, old_count, new_count)
            hunks.append(Hunk(int(match[1]), old_count, int(match[3]), new_count, body))
        elif line.startswith((b"GIT binary patch", b"Binary files")):
            current["binary"] = True
        elif not hunks:
            _metadata(current, line.rstrip(b"\r").decode("ascii", "replace"))
    if sections:
        sections[-1]["hunks"] = tuple(hunks)
    return [FileSection(**s) for s in sections]  # type: ignore[arg-type]


def _hunk_body(lines: list[bytes], i: int, old: int, new: int) -> tuple[tuple[bytes, ...], int]:
    body: list[bytes] = []
    while i < len(lines) and (old > 0 or new > 0 or lines[i].startswith(b"\\")):
        line = lines[i]
        kind = line[:1]
        if kind == b" ":
            old, new = old - 1, new - 1
        elif kind == b"-":
            old -= 1
        elif kind == b"+":
            new -= 1
        elif kind != b"\\":
            break
        body.append(line)
        i += 1
    return tuple(body), i


def _metadata(current: dict[str, object], text: str) -> None:
    if text.startswith("index "):
        ids, _, mode = text[6:].partition(" ")
        old, _, new = ids.partition("..")
        current.update(old_oid=None if old in _ZERO else old, new_oid=None if new in _ZERO else new, has_index=True)
        if mode:
            current.setdefault("old_mode", mode)
            current.setdefault("new_mode", mode)
    elif text.startswith(("new file mode ", "new mode ")):
        current["new_mode"] = text.rsplit(" ", 1)[1]
    elif text.startswith(("deleted file mode ", "old mode ")):
        current["old_mode"] = text.rsplit(" ", 1)[1]


def _split_lines(data: bytes) -> list[bytes]:
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])  # a last line without a newline
    return lines


def apply_exact(section: FileSection, pre: bytes | None) -> bytes | None:
    """The bytes ``section`` turns ``pre`` (``None`` = absent) into, every hunk matched at its recorded
    position; ``None`` when it does not match exactly or is binary. A deletion gives ``b""``."""
    if section.binary:
        return None
    source = _split_lines(pre or b"")
    out: list[bytes] = []
    pos = 0
    for hunk in section.hunks:
        start = hunk.old_start - 1 if hunk.old_count else hunk.old_start
        if start < pos or start > len(source):
            return None
        out.extend(source[pos:start])
        pos = start
        old_seen = new_seen = 0
        body = hunk.lines
        for index, line in enumerate(body):
            kind = line[:1]
            if kind == b"\\":
                continue
            last = index + 1 < len(body) and body[index + 1][:1] == b"\\"  # "\ No newline at end of file"
            content = line[1:] if last else line[1:] + b"\n"
            if kind in (b" ", b"-"):
                if pos >= len(source) or source[pos] != content:
                    return None
                pos += 1
                old_seen += 1
            if kind in (b" ", b"+"):
                out.append(content)
                new_seen += 1
        if (old_seen, new_seen) != (hunk.old_count, hunk.new_count):
            return None
    out.extend(source[pos:])
    return b"".join(out)

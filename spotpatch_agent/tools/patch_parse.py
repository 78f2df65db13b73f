"""Strict parser of the one patch form ``apply_patch`` accepts: a canonical unified git diff (docs/design.md §6).

Pure: no file system, no git. :func:`parse_patch` returns a :class:`ParsedPatch` (files in patch order,
paths normalised by :func:`~spotpatch_agent.policy.paths.normalize_rel_path`, hunks with exact line
counts) or a :class:`PatchRejection` whose ``message`` is fixed text safe to show to the model (it never
echoes patch text, only normalised paths and line numbers) and whose ``terminal`` flag says whether the
job must stop (path escapes, protected paths, symlink/submodule/mode changes) or the model may correct
the patch (format errors).

Accepted per file section, in this order::

    diff --git a/P b/P
    [new file mode 100644 | deleted file mode 100644]
    [index <hex>..<hex>[ 100644|100755]]
    --- a/P | /dev/null
    +++ b/P | /dev/null
    @@ -a[,b] +c[,d] @@[ section text]
    ( ' '|'-'|'+' line | '\\ No newline at end of file' )*
    ... more hunks

Paths may be quoted with C-style/octal escapes (as git writes non-ASCII names) and header paths may end
with a TAB (as git writes names containing spaces); both are decoded. Everything else is rejected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from spotpatch_agent.policy.paths import PathDenied, is_protected, normalize_rel_path

NO_EOL_MARKER = "\\ No newline at end of file"

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(?: .*)?$")
_INDEX = re.compile(r"^index [0-9a-f]{7,64}\.\.[0-9a-f]{7,64}(?: (\d{6}))?$")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
_MAX_REPORTED_PATHS = 20

Kind = Literal["create", "update", "delete"]


@dataclass(frozen=True)
class Hunk:
    """One ``@@`` hunk: old/new start and counts, and its body lines (each without its final ``\\n``;
    a ``\\r`` stays part of the line), ``no_eol_old``/``no_eol_new`` when the marker ends that side."""

    old_start: int
    old_count: int
    new_start: int
    new_count: int
    lines: tuple[str, ...]
    no_eol_old: bool = False
    no_eol_new: bool = False


@dataclass(frozen=True)
class FilePatch:
    """One file of a patch: normalised ``path``, ``kind``, its hunks and its own section ``text``."""

    path: str
    kind: Kind
    hunks: tuple[Hunk, ...]
    text: str = ""


@dataclass(frozen=True)
class ParsedPatch:
    """A validated patch: ``files`` in patch order, ``text`` the canonical re-rendering handed to git."""

    files: tuple[FilePatch, ...]
    text: str

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files)


@dataclass(frozen=True)
class PatchRejection:
    """Why a patch was refused. ``message``: fixed, model-safe text. ``terminal``: stop the job
    (path/policy violation) rather than let the model correct the patch."""

    message: str
    terminal: bool = False
    path: str | None = None


class _Reject(Exception):
    def __init__(self, message: str, *, terminal: bool = False, path: str | None = None) -> None:
        super().__init__(message)
        self.rejection = PatchRejection(message, terminal, path)


_FORMAT_HELP = (
    "Send only a raw canonical git diff: it starts with 'diff --git a/PATH b/PATH', then '--- a/PATH' and "
    "'+++ b/PATH' (or /dev/null with 'new file mode 100644' / 'deleted file mode 100644'), then '@@' hunks "
    "whose line counts match their bodies exactly. No Markdown fences, no explanations, no '*** Begin Patch'."
)


_CRLF_HEADER = ("its header lines end in CRLF; header lines ('diff --git', '---', '+++') must end in LF "
                "(keep '\\r' only at the end of hunk body lines of CRLF files).")


def _format(problem: str) -> _Reject:
    return _Reject(f"The patch was rejected before anything was changed: {problem} {_FORMAT_HELP}")


def _unsafe_path() -> _Reject:
    return _Reject("apply_patch refused: the patch names a path outside the allowed files", terminal=True)


# ------------------------------------------------------------------ paths


def _unquote(text: str) -> tuple[str, str]:
    """Decode a git C-quoted path at the start of ``text`` (which begins with ``"``); returns the decoded
    path and the rest of ``text`` after the closing quote."""
    out = bytearray()
    i = 1
    while i < len(text):
        ch = text[i]
        if ch == '"':
            try:
                return out.decode("utf-8"), text[i + 1 :]
            except UnicodeDecodeError:
                raise _unsafe_path() from None
        if ch == "\\":
            nxt = text[i + 1 : i + 2]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
            octal = text[i + 1 : i + 4]
            if len(octal) == 3 and all(c in "01234567" for c in octal) and int(octal, 8) < 256:
                out.append(int(octal, 8))
                i += 4
                continue
            raise _format("a quoted path has an invalid escape.")
        out.extend(ch.encode("utf-8"))
        i += 1
    raise _format("a quoted path is not closed.")


def _side_path(raw: str, prefix: str) -> str:
    """``a/P`` or ``b/P`` (already unquoted) → normalised ``P``; anything else is an unsafe path."""
    if not raw.startswith(prefix):
        raise _unsafe_path()
    try:
        path = normalize_rel_path(raw[len(prefix) :])
    except PathDenied:
        raise _unsafe_path() from None
    if path != raw[len(prefix) :]:  # e.g. NFD text: git would write a different name than we checked
        raise _unsafe_path()
    return path


def _git_line_paths(rest: str) -> tuple[str, str]:
    """The two raw paths of ``diff --git <rest>``."""
    if rest.startswith('"'):
        first, tail = _unquote(rest)
        if not tail.startswith(" "):
            raise _format("the 'diff --git' line is malformed.")
        tail = tail[1:]
        second = _unquote(tail)[0] if tail.startswith('"') else tail
        if tail.startswith('"') and _unquote(tail)[1]:
            raise _format("the 'diff --git' line is malformed.")
        return first, second
    if rest.endswith('"'):
        index = rest.find(' "')
        if index < 0:
            raise _format("the 'diff --git' line is malformed.")
        second, tail = _unquote(rest[index + 1 :])
        if tail:
            raise _format("the 'diff --git' line is malformed.")
        return rest[:index], second
    # Unquoted: "a/X b/X" with the same X on both sides (the only unambiguous reading with spaces).
    if (len(rest) - 1) % 2:
        raise _format("the two paths of the 'diff --git' line differ; renames are not supported.")
    half = (len(rest) - 1) // 2
    first, sep, second = rest[:half], rest[half], rest[half + 1 :]
    if sep != " ":
        raise _format("the 'diff --git' line is malformed.")
    return first, second


def _header_path(line: str, marker: str) -> str | None:
    """The raw path of a ``---``/``+++`` line (None for /dev/null); a trailing TAB (and anything after it,
    as git and diff write timestamps) ends an unquoted path."""
    if line.endswith("\r"):
        raise _format(_CRLF_HEADER)
    rest = line[len(marker) :]
    if rest.startswith('"'):
        path, tail = _unquote(rest)
        if tail and not tail.startswith("\t"):
            raise _format(f"a '{marker.strip()}' line is malformed.")
        return path
    rest = rest.split("\t", 1)[0]
    if rest == "/dev/null":
        return None
    return rest


# ------------------------------------------------------------------ parser


def parse_patch(text: str) -> ParsedPatch | PatchRejection:
    """Parse and validate ``text`` (see the module docstring). Never touches the file system."""
    try:
        return _parse(text)
    except _Reject as rejected:
        return rejected.rejection


def _parse(text: str) -> ParsedPatch:
    if not text.strip():
        raise _format("the patch is empty.")
    stripped = text.lstrip()
    if stripped.startswith("*** Begin Patch"):
        raise _format("the '*** Begin Patch' format is not supported.")
    if stripped.startswith("```") or "\n```" in text:
        raise _format("it contains a Markdown code fence.")
    text = text.rstrip("\n") + "\n"  # extra blank lines after the last hunk carry nothing
    lines = text[:-1].split("\n")
    if not lines[0].startswith("diff --git "):
        if lines[0].startswith(("--- ", "@@")):
            raise _format("every file must start with a 'diff --git a/PATH b/PATH' line.")
        raise _format("it must start with 'diff --git' (no text before the diff).")
    files: list[FilePatch] = []
    seen: set[str] = set()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("diff --git "):
            raise _format(f"line {i + 1} is not part of a diff (no text between or after file diffs).")
        file_patch, i = _parse_file(lines, i)
        key = file_patch.path.casefold()
        if key in seen:
            raise _format(f"{file_patch.path} appears twice; put all changes of a file in one diff.")
        seen.add(key)
        files.append(file_patch)
    return ParsedPatch(files=tuple(files), text=text)


def _parse_file(lines: list[str], i: int) -> tuple[FilePatch, int]:
    start = i
    if lines[i].endswith("\r"):
        raise _format(_CRLF_HEADER)
    raw_a, raw_b = _git_line_paths(lines[i][len("diff --git ") :])
    path = _side_path(raw_a, "a/")
    if _side_path(raw_b, "b/") != path:
        raise _format(
            "the two paths of a 'diff --git' line differ. Renames and copies are not supported: delete the "
            "old file and create the new one in the same patch."
        )
    if is_protected(path, for_write=True):
        raise _Reject(f"apply_patch refused: {path} is a protected file", terminal=True, path=path)
    i += 1
    kind: Kind = "update"
    index_seen = False
    while i < len(lines) and not lines[i].startswith(("--- ", "diff --git ", "@@")):
        line = lines[i]
        if line in ("new file mode 100644", "deleted file mode 100644") and kind == "update" and not index_seen:
            kind = "create" if line.startswith("new") else "delete"
        elif (match := _INDEX.match(line)) and not index_seen:
            index_seen = True
            mode = match.group(1)
            if mode is not None and mode not in ("100644", "100755"):
                raise _mode_rejection(path, mode)
        elif line.startswith(("rename from", "rename to", "copy from", "copy to", "similarity index",
                              "dissimilarity index")):
            raise _format(
                "renames and copies are not supported: delete the old file and create the new one in the same "
                "patch."
            )
        elif line.startswith(("old mode", "new mode", "new file mode", "deleted file mode")):
            raise _mode_rejection(path, line.rsplit(" ", 1)[-1])
        elif line.startswith(("Binary files", "GIT binary patch")):
            raise _format("binary patches are not supported; only UTF-8 text files can be changed.")
        else:
            raise _format(f"line {i + 1} is not a valid header line of the diff of {path}.")
        i += 1
    if i + 1 >= len(lines) or not lines[i].startswith("--- ") or not lines[i + 1].startswith("+++ "):
        raise _format(f"the diff of {path} needs '--- ' and '+++ ' lines before its hunks.")
    old = _header_path(lines[i], "--- ")
    new = _header_path(lines[i + 1], "+++ ")
    expected_old = None if kind == "create" else "a/" + path
    expected_new = None if kind == "delete" else "b/" + path
    for raw, expected, prefix in ((old, expected_old, "a/"), (new, expected_new, "b/")):
        if raw is not None:
            _side_path(raw, prefix)  # an unsafe header path is terminal even when it merely mismatches
        if raw != expected and not (raw is not None and expected is not None and _side_path(raw, prefix) == path):
            raise _format(
                f"the '---'/'+++' lines of {path} do not match its 'diff --git' line "
                "(use /dev/null only together with 'new file mode 100644' or 'deleted file mode 100644')."
            )
    i += 2
    hunks: list[Hunk] = []
    while i < len(lines) and lines[i].startswith("@@"):
        hunk, i = _parse_hunk(lines, i, path)
        hunks.append(hunk)
    if not hunks:
        raise _format(f"the diff of {path} has no '@@' hunk.")
    _check_hunks(path, kind, hunks)
    section = "".join(line + "\n" for line in lines[start:i])
    return FilePatch(path=path, kind=kind, hunks=tuple(hunks), text=section), i


def _mode_rejection(path: str, mode: str) -> _Reject:
    if mode in ("120000", "160000"):
        what = "symbolic links" if mode == "120000" else "submodules"
        return _Reject(f"apply_patch refused: {path}: {what} cannot be created or changed", terminal=True, path=path)
    return _Reject(
        f"apply_patch refused: {path}: file mode changes are not allowed (only 'new file mode 100644' and "
        "'deleted file mode 100644')",
        terminal=True,
        path=path,
    )


def _parse_hunk(lines: list[str], i: int, path: str) -> tuple[Hunk, int]:
    match = _HUNK.match(lines[i])
    if not match:
        raise _format(f"line {i + 1} is not a valid hunk header '@@ -a,b +c,d @@' (in the diff of {path}).")
    old_start, new_start = int(match.group(1)), int(match.group(3))
    old_count = 1 if match.group(2) is None else int(match.group(2))
    new_count = 1 if match.group(4) is None else int(match.group(4))
    header_line = i + 1
    i += 1
    body: list[str] = []
    old_seen = new_seen = 0
    no_eol_old = no_eol_new = False
    last_kind = ""
    corrupt = (
        f"the hunk at line {header_line} (diff of {path}) is corrupt: its header says -{old_count} +{new_count} "
        "lines but its body does not match."
    )
    while i < len(lines):
        line = lines[i]
        if line == NO_EOL_MARKER:
            if last_kind in ("", "\\") or (no_eol_old and last_kind in " -") or (no_eol_new and last_kind in " +"):
                raise _format(f"line {i + 1} has a misplaced '{NO_EOL_MARKER}' marker.")
            if last_kind in " -":
                no_eol_old = True
            if last_kind in " +":
                no_eol_new = True
            last_kind = "\\"
            i += 1
            continue
        if old_seen == old_count and new_seen == new_count:
            if line == "":
                raise _format(f"line {i + 1} is empty: no text may follow the diff (or hunk counts are wrong).")
            if line[:1] in (" ", "-", "+"):
                raise _format(corrupt)
            break
        kind = line[:1]
        if kind not in (" ", "-", "+"):
            if line == "":
                raise _format(
                    f"line {i + 1} in the hunk at line {header_line} is empty; an empty context line must be a "
                    "single space, and the hunk line counts must match the body exactly."
                )
            raise _format(corrupt)
        if (kind in " -" and no_eol_old) or (kind in " +" and no_eol_new):
            raise _format(f"a line follows the '{NO_EOL_MARKER}' marker of its side (line {i + 1}).")
        if "\0" in line:
            raise _format("it contains a NUL character; only UTF-8 text files can be changed.")
        old_seen += kind in " -"
        new_seen += kind in " +"
        if old_seen > old_count or new_seen > new_count:
            raise _format(corrupt)
        body.append(line)
        last_kind = kind
        i += 1
    if old_seen != old_count or new_seen != new_count:
        raise _format(corrupt)
    return Hunk(old_start, old_count, new_start, new_count, tuple(body), no_eol_old, no_eol_new), i


def _check_hunks(path: str, kind: Kind, hunks: list[Hunk]) -> None:
    if kind != "update" and len(hunks) != 1:
        raise _format(f"a created or deleted file ({path}) must have exactly one hunk.")
    first = hunks[0]
    if kind == "create" and (first.old_start, first.old_count, first.new_start) != (0, 0, 1):
        raise _format(f"the hunk creating {path} must be '@@ -0,0 +1,N @@' with only '+' lines.")
    if kind == "delete" and (first.old_start, first.new_start, first.new_count) != (1, 0, 0):
        raise _format(f"the hunk deleting {path} must be '@@ -1,N +0,0 @@' with only '-' lines.")
    if kind == "create" and first.new_count == 0 or kind == "delete" and first.old_count == 0:
        raise _format(f"empty files cannot be created or deleted by apply_patch ({path}).")
    previous_end = 0
    for number, hunk in enumerate(hunks, 1):
        if kind == "update" and (hunk.old_count == 0 or hunk.old_start < 1):
            raise _format(
                f"hunk {number} of {path} has no context lines; include a few unchanged lines around the change."
            )
        if kind == "update" and hunk.old_start <= previous_end:
            raise _format(f"the hunks of {path} overlap or are out of order.")
        previous_end = hunk.old_start + hunk.old_count - 1
        if (hunk.no_eol_old or hunk.no_eol_new) and number != len(hunks):
            raise _format(f"only the last hunk of {path} may end without a newline.")


def summarize_paths(paths: tuple[str, ...] | list[str]) -> str:
    """At most :data:`_MAX_REPORTED_PATHS` paths, comma-separated."""
    shown = ", ".join(paths[:_MAX_REPORTED_PATHS])
    return shown + (", …" if len(paths) > _MAX_REPORTED_PATHS else "")


__all__ = [
    "NO_EOL_MARKER",
    "FilePatch",
    "Hunk",
    "ParsedPatch",
    "PatchRejection",
    "parse_patch",
    "summarize_paths",
]

"""A target's source location checked against the file as it is now — the one place for it (issue 30): both
the excerpt of the prompt (:mod:`~spotpatch_agent.context.excerpt`) and the exact-or-approximate mark
(:mod:`~spotpatch_agent.engine.locations`, issue 15; docs/node-shim.md "Support by framework") ask it.

The location's path and line: :func:`check_path` (a project-relative path, ``normalize_rel_path``, that
the path policy does not protect), :func:`unread_problem` (why a file the policy-checked reader refused
cannot be used: a directory, unreadable, missing) and :func:`line_problem` (the line exists). Each problem
is a :class:`LocationProblem`: a warning code and a plain reason that never holds the file's contents.

Stale locations: the page's ``data-spotpatch-loc`` values are computed when a module is served; after an
edit (HMR, or any save) the element may have moved. :func:`tag_check` looks at the file as the job (or the
copy prompt) sees it: when the picked element's start tag ``<tag`` begins at exactly that line and column
the location is ``exact``; otherwise it is ``stale`` (the file changed since the page loaded, or the
location is an enclosing element's) and the nearest ``<tag`` (within :data:`NEAREST_WINDOW` lines) is
offered as an approximate location — never passed off as exact. Lines and
columns are counted as ``read_file`` counts them (display lines; columns in code points).

A light module (no tools at run time): the copy prompt's renderer imports it through ``engine.locations``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from spotpatch_agent.policy.paths import PathDenied, is_ignored, is_protected, normalize_rel_path
from spotpatch_agent.protocol.models import Target

if TYPE_CHECKING:  # a light module: the service imports it (through prompt.py) at cold start
    from spotpatch_agent.tools.context import WorktreeContext

__all__ = ["NEAREST_WINDOW", "LocationCode", "LocationProblem", "ReadLines", "TagCheck", "check_path",
           "check_tags", "line_problem", "lines_reader", "tag_check", "unread_problem"]

LocationCode = Literal["location-invalid", "location-protected", "location-missing", "location-unreadable",
                       "line-past-end"]


@dataclass(frozen=True)
class LocationProblem:
    """Why a location cannot be used: a warning ``code`` and a plain ``reason`` about the file (never its
    contents)."""

    code: LocationCode
    reason: str


def check_path(raw: str) -> tuple[str | None, LocationProblem | None]:
    """``(rel, None)`` for a usable path (``rel`` normalized); ``(None, location-invalid)`` when ``raw`` is not
    a project-relative path; ``(rel, location-protected)`` when the path policy protects it (never read)."""
    try:
        rel = normalize_rel_path(raw)
    except PathDenied:
        return None, LocationProblem("location-invalid", (
            "the path is not a relative path inside the project (absolute, '..', a drive letter or "
            "unusual characters)"))
    if is_protected(rel):
        return rel, LocationProblem("location-protected", (
            "the file is protected by SpotPatch's path policy (secrets, keys, lockfiles, git metadata, "
            "dependencies or build output) and is never read"))
    return rel, None


async def unread_problem(root: Path, rel: str) -> LocationProblem:
    """Why ``rel`` (a :func:`check_path`-usable path) gave no file through the policy-checked reader: a
    directory, a file that may not be read, or no such file."""
    # A git-ignored path is "unreadable" whether or not it exists (and whatever it is): the answer
    # must not tell a page which ignored (secret-bearing) files are there.
    full = os.path.join(root, *rel.split("/"))
    ignored = await is_ignored(root, rel)
    exists = os.path.lexists(full) or ignored
    is_dir = not ignored and os.path.isdir(full) and not os.path.islink(full)
    if is_dir:
        return LocationProblem("location-unreadable", "the path is a directory, not a file")
    if exists:
        return LocationProblem("location-unreadable", (
            "the file cannot be read under SpotPatch's path policy (ignored by git, a symlink, "
            "not UTF-8 text, or too big)"))
    return LocationProblem("location-missing", "the file does not exist in the project")


def line_problem(line: int, total: int) -> LocationProblem | None:
    """``line-past-end`` when ``line`` is past the end of a file of ``total`` display lines, else None."""
    if line > total:
        return LocationProblem("line-past-end",
                               f"line {line} is past the end of the file ({total} line{'s' if total != 1 else ''})")
    return None


# ---------------------------------------------------------------- the start tag at the location

#: How far (lines, either way) the nearest matching start tag of a stale location is looked for.
NEAREST_WINDOW = 200

_TAG_START = re.compile(r"<[A-Za-z][\w.:-]*")
#: A tag name the check can quote in the prompt; any other ``tagName`` (page data) is not checked.
_TAG_NAME = re.compile(r"[A-Za-z][\w.:-]*\Z")


@dataclass(frozen=True)
class TagCheck:
    """One target's location against the file now: ``exact`` (``<tag`` begins at that line and column),
    ``stale`` (it does not; ``found`` is the start tag there, if any; ``nearest_line``/``nearest_column``
    the nearest ``<tag`` within :data:`NEAREST_WINDOW` lines, if any) or ``unchecked`` (the file could not
    be read: nothing claimed)."""

    status: Literal["exact", "stale", "unchecked"]
    tag: str
    found: str | None = None
    nearest_line: int | None = None
    nearest_column: int | None = None


def tag_check(lines: Sequence[str], line: int, column: int, tag: str) -> TagCheck:
    """Check a location (1-based ``line``/``column``, code points) against display ``lines`` for the picked
    element's ``tag`` (e.g. ``"button"``)."""
    tag = tag.lower()
    found = None
    if 1 <= line <= len(lines) and 1 <= column <= len(lines[line - 1]) + 1:  # a huge column overflows re
        match = _TAG_START.match(lines[line - 1], column - 1)
        found = match.group(0)[1:] if match is not None else None
        if found is not None and found.lower() == tag:
            return TagCheck("exact", tag, found=found)
    pattern = re.compile(rf"<{re.escape(tag)}(?=[\s/>]|$)", re.IGNORECASE)
    best: tuple[int, int, int] | None = None  # (distance, line, column)
    low = max(1, line - NEAREST_WINDOW)
    high = min(len(lines), line + NEAREST_WINDOW)
    for number in range(low, high + 1):
        for m in pattern.finditer(lines[number - 1]):
            candidate = (abs(number - line), number, m.start() + 1)
            if best is None or candidate < best:
                best = candidate
    if best is None:
        return TagCheck("stale", tag, found=found)
    return TagCheck("stale", tag, found=found, nearest_line=best[1], nearest_column=best[2])


ReadLines = Callable[[str], Awaitable["Sequence[str] | None"]]


def lines_reader(ctx: WorktreeContext) -> ReadLines:
    """``read_lines`` for :func:`check_tags` through the tools' policy-checked, cached reader."""

    async def read(rel: str) -> Sequence[str] | None:
        file = await ctx.read_text(rel)
        return file.lines if file is not None else None

    return read


async def check_tags(read_lines: ReadLines, targets: Iterable[Target]) -> dict[int, TagCheck]:
    """The :class:`TagCheck` of every target with a source location and an element, by target index.
    ``read_lines(rel)`` gives a file's display lines, or None when it may not be read (then ``unchecked``)."""
    checks: dict[int, TagCheck] = {}
    for t in targets:
        element = getattr(t, "element", None)
        if t.source is None or element is None:
            continue
        if not _TAG_NAME.match(element.tag_name):  # not a tag name: nothing to check, nothing to quote
            checks[t.index] = TagCheck("unchecked", "")
            continue
        rel, problem = check_path(t.source.file)
        if rel is None or problem is not None:  # the reader would refuse it too (protected): nothing claimed
            checks[t.index] = TagCheck("unchecked", element.tag_name)
            continue
        lines = await read_lines(rel)
        if lines is None:
            checks[t.index] = TagCheck("unchecked", element.tag_name)
        else:
            checks[t.index] = tag_check(lines, t.source.line, t.source.column, element.tag_name)
    return checks

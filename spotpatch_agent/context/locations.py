"""A target's source location checked against the file as it is now, and its component usage chain, as
prompt lines (issue 15; docs/node-shim.md "Support by framework").

Stale locations: the page's ``data-spotpatch-loc`` values are computed when a module is served; after an
edit (HMR, or any save) the element may have moved. :func:`tag_check` looks at the file as the job (or the
copy prompt) sees it: when the picked element's start tag ``<tag`` begins at exactly that line and column
the location is ``exact``; otherwise it is ``stale`` (the file changed since the page loaded, or the
location is an enclosing element's) and the nearest ``<tag`` (within :data:`NEAREST_WINDOW` lines) is
offered as an approximate location — never passed off as exact. Lines and
columns are counted as ``read_file`` counts them (display lines; columns in code points).

Usage chain: ``Target.usageChain`` comes from the page, so every site is checked again here: a path that
is not project-relative (absolute, ``..``, drive letter, control characters) or lies under
``node_modules`` is dropped, and the prompt says how many were dropped and why — never the path itself.
Component names are page data and are quoted as JSON strings.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from spotpatch_agent.context.quote import quote
from spotpatch_agent.policy.paths import PathDenied, normalize_rel_path
from spotpatch_agent.protocol.models import Target, UsageSite

if TYPE_CHECKING:  # a light module: the service imports it (through prompt.py) at cold start
    from spotpatch_agent.tools.context import WorktreeContext

log = logging.getLogger(__name__)

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
        try:
            rel = normalize_rel_path(t.source.file)
        except PathDenied:
            checks[t.index] = TagCheck("unchecked", element.tag_name)
            continue
        lines = await read_lines(rel)
        if lines is None:
            checks[t.index] = TagCheck("unchecked", element.tag_name)
        else:
            checks[t.index] = tag_check(lines, t.source.line, t.source.column, element.tag_name)
    return checks


def clean_chain(chain: Iterable[UsageSite]) -> tuple[list[UsageSite], list[str]]:
    """The project-relative sites of ``chain`` (paths normalized) and, for each dropped one, a reason that
    names no path: ``"usage site 2: not a project-relative path"`` / ``"… under node_modules"``."""
    kept: list[UsageSite] = []
    dropped: list[str] = []
    for number, site in enumerate(chain, start=1):
        try:
            rel = normalize_rel_path(site.file)
        except PathDenied as denied:
            dropped.append(f"usage site {number}: not a project-relative path ({denied.reason})")
            continue
        if "node_modules" in (s.casefold() for s in rel.split("/")):
            dropped.append(f"usage site {number}: under node_modules")
            continue
        kept.append(site.model_copy(update={"file": rel}))
    for reason in dropped:
        log.warning("usage chain entry dropped: %s", reason)
    return kept, dropped


def source_check_line(check: TagCheck | None) -> str | None:
    """The prompt line under a target's ``Source:``: exact, or APPROXIMATE with the nearest tag; None when
    nothing was checked (no claim either way)."""
    if check is None or check.status == "unchecked":
        return None
    if check.status == "exact":
        return f"Source check: exact (`<{check.found}` starts at that line and column in the file now)."
    near = (
        f"nearest `<{check.tag}` at line {check.nearest_line}, column {check.nearest_column}"
        if check.nearest_line is not None else f"no `<{check.tag}` start tag nearby"
    )
    return (
        f"Source check: APPROXIMATE — no `<{check.tag}` starts at that line and column in the file now "
        "(the file changed since the page loaded, or this is an enclosing element's location); "
        f"{near}. Read the file before editing."
    )


def usage_chain_lines(t: Target) -> list[str]:
    """The prompt lines of a target's usage chain (innermost first) and of any dropped site; [] for none."""
    lines: list[str] = []
    kept, dropped = clean_chain(t.usage_chain)
    if kept:
        lines.append("Used at (component usage chain, innermost first; the usage the user clicked through):")
        for number, site in enumerate(kept, start=1):
            who = f" (component {quote(site.component)})" if site.component else ""
            lines.append(f"  {number}. {site.file}:{site.line}:{site.column}{who}")
    if dropped:
        lines.append(f"({len(dropped)} usage site(s) dropped: " + "; ".join(dropped) + ")")
    return lines

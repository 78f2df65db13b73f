"""A target's checked location and its component usage chain as prompt lines (issue 15; docs/node-shim.md
"Support by framework").

The check itself — the location against the file as it is now, ``exact`` or ``stale`` with the nearest start
tag — is :mod:`spotpatch_agent.context.locations` (re-exported here for existing callers); this module
words its result (:func:`source_check_line`) for the copy prompt and the agent's first message.

Usage chain: ``Target.usageChain`` comes from the page, so every site is checked again here: a path that
is not project-relative (absolute, ``..``, drive letter, control characters) or lies under
``node_modules`` is dropped, and the prompt says how many were dropped and why — never the path itself.
Component names are page data and are quoted as JSON strings.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from spotpatch_agent.context.locations import NEAREST_WINDOW as NEAREST_WINDOW
from spotpatch_agent.context.locations import ReadLines as ReadLines
from spotpatch_agent.context.locations import TagCheck as TagCheck
from spotpatch_agent.context.locations import check_tags as check_tags
from spotpatch_agent.context.locations import lines_reader as lines_reader
from spotpatch_agent.context.locations import tag_check as tag_check
from spotpatch_agent.context.quote import quote
from spotpatch_agent.policy.paths import PathDenied, normalize_rel_path
from spotpatch_agent.protocol.models import Target, UsageSite

log = logging.getLogger(__name__)


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

"""The excerpts the suggestion lane offers the model: read by the host, never by the model (docs/design.md §14).

Each target's source location goes through the same check as the copy prompt
(:func:`spotpatch_agent.context.excerpt.check_locations`): the path policy (normalized, not protected, not
git-ignored, a regular UTF-8 text file within ``editableFileMaxBytes``), at most
``EXCERPT_BEFORE + 1 + EXCERPT_AFTER`` lines around the line, at most ``EXCERPT_MAX_BYTES`` bytes each,
redacted, and never a whole file. A target without a usable source gets nothing. All excerpts together stay
within :data:`MAX_TOTAL_BYTES`; one that would pass it is left out (and said so in the prompt).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from spotpatch_agent.context.excerpt import check_locations
from spotpatch_agent.protocol.models import Limits, Target
from spotpatch_agent.tools.context import WorktreeContext

#: Bytes of excerpt text (header and numbered rows) offered in total, whatever the number of targets.
MAX_TOTAL_BYTES = 16 * 1024

_HEADER = re.compile(r"\(lines (\d+)-(\d+) of \d+\)$")
_ROW = re.compile(r"^ *(\d+)\| ?(.*)$")


@dataclass(frozen=True)
class Excerpt:
    """One offered excerpt: the target it belongs to, its normalized ``path``, lines ``start_line`` ..
    ``end_line`` (1-based, inclusive), the file's SHA-256, the text as offered (``read_file``'s numbering,
    redacted) and its rows by line number (the redacted line text the model saw)."""

    index: int
    path: str
    start_line: int
    end_line: int
    sha256: str
    text: str
    rows: dict[int, str]

    def covers(self, path: str, first: int, last: int) -> bool:
        return path == self.path and self.start_line <= first <= last <= self.end_line


@dataclass(frozen=True)
class TargetSource:
    """What the prompt says about one target's source: its excerpt, or why there is none."""

    index: int
    excerpt: Excerpt | None
    note: str | None = None


async def read_excerpts(root: Path, targets: list[Target], limits: Limits) -> list[TargetSource]:
    """The bounded excerpt of every target's source (or a note why there is none), read from ``root``
    through the path policy. Reads only; never raises for a bad location."""
    ctx = WorktreeContext(root, limits)
    checks = await check_locations(ctx, targets)
    out: list[TargetSource] = []
    used = 0
    for t in targets:
        check = checks.get(t.index)
        if check is None:
            out.append(TargetSource(t.index, None, "no source location was given"))
        elif not check.ok:
            out.append(TargetSource(t.index, None, f"the source location could not be used: {check.reason}"))
        elif check.shown_in is not None:
            out.append(TargetSource(t.index, None, f"its line is in the excerpt of target {check.shown_in}"))
        elif check.excerpt is None:
            out.append(TargetSource(t.index, None, "no excerpt: it would show the whole file"))
        else:
            excerpt = _parse(t.index, check.rel or "", check.sha256 or "", check.excerpt)
            size = len(check.excerpt.encode("utf-8"))
            if excerpt is None:
                out.append(TargetSource(t.index, None, "no excerpt: the file is empty"))
            elif used + size > MAX_TOTAL_BYTES:
                out.append(TargetSource(t.index, None, "no excerpt: the excerpts' size bound was reached"))
            else:
                used += size
                out.append(TargetSource(t.index, excerpt))
    return out


def _parse(index: int, rel: str, sha256: str, text: str) -> Excerpt | None:
    head, *rows = text.split("\n")
    m = _HEADER.search(head)
    if m is None:
        return None
    numbered = {int(r.group(1)): r.group(2) for r in map(_ROW.match, rows) if r is not None}
    first, last = int(m.group(1)), int(m.group(2))
    return Excerpt(index, rel, first, last, sha256, text, numbered)

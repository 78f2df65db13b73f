"""Each target's source location, checked, with a bounded excerpt of the real source around its line.

A location is usable when its path is a project-relative path (``normalize_rel_path``), allowed for
reading by the path policy (not protected, not git-ignored, a regular UTF-8 text file within
``editableFileMaxBytes``) and its line exists — checked by :mod:`~spotpatch_agent.context.locations`, the
one owner of location checks. A usable location gets :data:`EXCERPT_BEFORE` lines before and
:data:`EXCERPT_AFTER` after its line, at most :data:`EXCERPT_MAX_BYTES` bytes, numbered exactly as
``read_file`` numbers lines (its own formatter, which also redacts). An unusable one gets a warning code and
a plain reason, and no contents at all.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from spotpatch_agent.context.locations import LocationCode, check_path, line_problem, unread_problem
from spotpatch_agent.protocol.models import Target
from spotpatch_agent.tools.context import TextFile, WorktreeContext
from spotpatch_agent.tools.read_file import render

#: Lines shown before and after a target's line, and the excerpt's size bound (bytes of line text).
EXCERPT_BEFORE = 6
EXCERPT_AFTER = 8
EXCERPT_MAX_BYTES = 2048

_HEADER = re.compile(r"\(lines (\d+)-(\d+) of \d+\)$")

@dataclass(frozen=True)
class LocationCheck:
    """One target's location: ``ok`` with ``excerpt`` (``read_file``'s header and numbered rows), or a
    ``code`` and ``reason`` (a plain sentence about the file, never its contents). ``rel`` is the
    normalized path when the path itself was valid."""

    index: int
    ok: bool
    rel: str | None = None
    excerpt: str | None = None
    code: LocationCode | None = None
    reason: str | None = None
    #: SHA-256 (hex) of the file's bytes, when ``ok``.
    sha256: str | None = None
    #: When ``ok`` and the line is already shown by an earlier target's excerpt of the same file: that
    #: target's index (and ``excerpt`` is None: the prompt points there instead of repeating it).
    shown_in: int | None = None
    #: When ``ok`` and no excerpt is given because it would complete the whole file (with the excerpts of
    #: earlier targets of the same file): the prompt says so; the agent reads the file with ``read_file``.
    withheld: bool = False


def excerpt_window(line: int, total: int, already: set[int]) -> tuple[int, int] | None:
    """Lines ``(first, last)`` of the excerpt around ``line`` in a file of ``total`` lines, given the lines
    ``already`` shown from it. Never the whole file, alone or together with what is already shown (a whole
    source file never reaches the browser or a log): the window shrinks from its end farther from ``line``;
    ``None`` when even ``line`` alone would complete the file."""
    first, last = max(1, line - EXCERPT_BEFORE), min(total, line + EXCERPT_AFTER)

    def complete() -> bool:
        return len(already) + sum(1 for n in range(first, last + 1) if n not in already) >= total

    while complete():
        if first == last:
            return None
        if line - first >= last - line:
            first += 1
        else:
            last -= 1
    return first, last


def excerpt_of(file: TextFile, line: int, first: int | None = None, last: int | None = None, *,
               anchors: bool = False) -> str:
    """``read_file``'s rendering of the lines around ``line`` (header and numbered rows, no read hints),
    or of ``first``..``last`` when given (:func:`excerpt_window`). ``anchors``: the rows carry the lines'
    anchors (``12#KT``) as ``read_file`` shows them under the ``anchors`` edit format, so a first
    ``edit_lines`` needs no read."""
    start = max(1, line - EXCERPT_BEFORE) if first is None else first
    end = line + EXCERPT_AFTER if last is None else last
    text = render(file, start, end, max_lines=EXCERPT_BEFORE + EXCERPT_AFTER + 1,
                  max_bytes=EXCERPT_MAX_BYTES, anchors=anchors)
    rows = text.split("\n")
    # Keep the header and the numbered rows; the continuation hints are for the tool, not for a reader.
    return "\n".join([rows[0], *(r for r in rows[1:] if not r.startswith("["))])


async def check_locations(ctx: WorktreeContext, targets: list[Target]) -> dict[int, LocationCheck]:
    """The :class:`LocationCheck` of every target with a source location, by target index (one batched
    read through ``ctx``'s per-version cache). A line an earlier target's excerpt already shows is not
    shown twice (``shown_in``)."""
    checks: dict[int, LocationCheck] = {}
    pending: dict[int, tuple[str, int]] = {}
    for t in targets:
        if t.source is None:
            continue
        rel, problem = check_path(t.source.file)
        if problem is not None:
            checks[t.index] = LocationCheck(t.index, False, rel=rel, code=problem.code, reason=problem.reason)
        else:
            assert rel is not None
            pending[t.index] = (rel, t.source.line)
    files = await ctx.read_texts([rel for rel, _ in pending.values()]) if pending else {}
    shown: dict[int, tuple[str, int, int]] = {}  # target index → (file, first and last line of its excerpt)
    for index, (rel, line) in pending.items():
        file = files.get(rel)
        problem = await unread_problem(ctx.root, rel) if file is None else line_problem(line, len(file.lines))
        if problem is not None:
            checks[index] = LocationCheck(index, False, rel=rel, code=problem.code, reason=problem.reason)
        else:
            assert file is not None
            digest = hashlib.sha256(file.data).hexdigest()
            earlier = next((i for i, (r, lo, hi) in shown.items() if r == rel and lo <= line <= hi), None)
            if earlier is not None:
                checks[index] = LocationCheck(index, True, rel=rel, sha256=digest, shown_in=earlier)
                continue
            already = {n for r, lo, hi in shown.values() if r == rel for n in range(lo, hi + 1)}
            window = excerpt_window(line, len(file.lines), already)
            if window is None:
                checks[index] = LocationCheck(index, True, rel=rel, sha256=digest, withheld=True)
                continue
            excerpt = excerpt_of(file, line, *window, anchors=ctx.edit_format == "anchors")
            m = _HEADER.search(excerpt.split("\n", 1)[0])
            if m:
                shown[index] = (rel, int(m.group(1)), int(m.group(2)))
            checks[index] = LocationCheck(index, True, rel=rel, excerpt=excerpt, sha256=digest)
    return checks

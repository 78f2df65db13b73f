"""Checks of a suggestion against the excerpts it was given (docs/design.md §14). Pure: no file system.

- :func:`check_citations`: every ``path:line`` / ``path:a-b`` in the text is ``verified`` when the range
  lies inside an excerpt of that path, else flagged ``unverified`` (never presented as checked).
- :func:`check_diff`: a unified diff in the text is parsed with ``apply_patch``'s strict parser
  (``spotpatch_agent.tools.patch_parse``) and applied to the excerpts' lines in memory: ``applies cleanly
  to the excerpts`` or ``does not apply`` (with the reason). Nothing is ever written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from spotpatch_agent.policy.redact import shorten_paths
from spotpatch_agent.protocol.models import SuggestionCitation, SuggestionDiffCheck
from spotpatch_agent.suggestion.excerpts import Excerpt
from spotpatch_agent.tools.patch_parse import ParsedPatch, parse_patch

#: Citations reported per suggestion (the rest are not listed, but still counted).
MAX_CITATIONS = 100

# path:line, path:a-b (also path:line:col); the extension starts with a letter, so 127.0.0.1:5173 is no path.
_CITATION = re.compile(
    r"(?<![\w@./-])((?:\.?/)?[\w@.\-]+(?:/[\w@.\-]+)*\.[A-Za-z][A-Za-z0-9]*):(\d{1,9})(?:\s?[-–]\s?(?:L)?(\d{1,9}))?")
_FENCE = re.compile(r"^```[ \t]*(diff|patch|udiff)?[ \t]*$", re.I)


def check_citations(text: str, excerpts: Sequence[Excerpt]) -> tuple[list[SuggestionCitation], int, int]:
    """``(citations, verified, unverified)`` for every citation in ``text`` (the same reference twice
    counts once)."""
    seen: set[tuple[str, int, int]] = set()
    listed: list[SuggestionCitation] = []
    verified = unverified = 0
    for m in _CITATION.finditer(text):
        path = m.group(1).removeprefix("./")
        first = int(m.group(2))
        last = int(m.group(3)) if m.group(3) else first
        if last < first:
            first, last = last, first
        key = (path, first, last)
        if key in seen:
            continue
        seen.add(key)
        ok = first >= 1 and any(e.covers(path, first, last) for e in excerpts)
        verified += ok
        unverified += not ok
        if len(listed) < MAX_CITATIONS:
            listed.append(SuggestionCitation(ref=shorten_paths(m.group(0))[:300], path=shorten_paths(path)[:300],
                                             start_line=first, end_line=last, verified=ok))
    return listed, verified, unverified


def extract_diff(text: str) -> str | None:
    """The unified diff in ``text``: the body of the first fenced block holding ``diff --git`` (or marked
    ``diff``/``patch``), else everything from the first ``diff --git`` line up to a closing fence. None
    when the text holds no diff."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i].strip())
        if fence is not None:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```")), len(lines))
            body = lines[i + 1 : end]
            if fence.group(1) or any(b.startswith("diff --git ") for b in body):
                return "\n".join(body) + "\n"
            i = end + 1
            continue
        if lines[i].startswith("diff --git "):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```")), len(lines))
            return "\n".join(lines[i:end]) + "\n"
        i += 1
    return None


def check_diff(text: str, excerpts: Sequence[Excerpt]) -> SuggestionDiffCheck | None:
    """The in-memory check of the diff in ``text`` against ``excerpts`` (None when there is no diff)."""
    raw = extract_diff(text)
    if raw is None:
        return None
    parsed = parse_patch(raw)
    if not isinstance(parsed, ParsedPatch):
        return _does_not_apply([], shorten_paths(parsed.message)[:500])
    files = list(parsed.paths)
    for file in parsed.files:
        rows: dict[int, str] = {}
        for e in excerpts:
            if e.path == file.path:
                rows.update(e.rows)
        if file.kind != "update":
            return _does_not_apply(files, f"it {'creates' if file.kind == 'create' else 'deletes'} {file.path}; "
                                          "only lines shown in the excerpts can be checked")
        if not rows:
            return _does_not_apply(files, f"{file.path} was not among the excerpts")
        for number, hunk in enumerate(file.hunks, 1):
            old = [line[1:] for line in hunk.lines if line[:1] in (" ", "-")]
            for offset, line in enumerate(old):
                at = hunk.old_start + offset
                if at not in rows:
                    return _does_not_apply(
                        files, f"hunk {number} of {file.path} reaches line {at}, outside the excerpts")
                if rows[at] != line.rstrip("\r"):
                    return _does_not_apply(
                        files, f"hunk {number} of {file.path} does not match line {at} of the excerpt")
    return SuggestionDiffCheck(applies=True, summary="applies cleanly to the excerpts", files=files)


def _does_not_apply(files: list[str], reason: str) -> SuggestionDiffCheck:
    return SuggestionDiffCheck(applies=False, summary="does not apply", files=files, reason=reason)

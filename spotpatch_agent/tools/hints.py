"""What a rejected edit tells the model, so that a small model can recover (issue 27, part 3).

Every hint is bounded, built only from the allowed file the call named (read through the path policy) and
from the job's own targets, and its file lines go through ``read_file``'s formatter (numbered, redacted):

- :func:`nearest_window`: where an ``oldText`` that was not found comes closest in the named file
  (character-trigram containment per line, aligned over the lines of ``oldText``); ``replace_text`` shows
  those lines, numbered, instead of only saying "not found".
- :class:`PageText` / :func:`page_texts`: each picked element's page text with its located source line;
  :func:`page_text_hint` recognises page text used as ``oldText`` (the page shows ``$19.5``, the source says
  ``${price}``) and says where the element's source is, with that line.
- :func:`prefix_hint`: ``oldText`` carrying ``read_file``'s line-number prefixes (``   12| ``).

Nothing here is applied fuzzily: a hint only tells the model what to copy; the edit stays exact and unique.
"""

from __future__ import annotations

import bisect
import difflib
import json
import re
import unicodedata
from collections.abc import Sequence

from spotpatch_agent.policy.paths import PathDenied, normalize_rel_path
from spotpatch_agent.policy.redact import redact_cut
from spotpatch_agent.protocol.models import Target
from spotpatch_agent.tools.context import PageText, TextFile, WorktreeContext
from spotpatch_agent.tools.read_file import render

#: Most lines a "nearest lines" window shows, and its bound in bytes of line text.
NEAREST_MAX_LINES = 12
NEAREST_MAX_BYTES = 2048
#: Lines of ``oldText`` compared (the longest ones), and the characters of each line compared.
_MAX_OLD_LINES = 12
_MAX_LINE_CHARS = 200
#: Least share of an ``oldText`` line's trigrams found in a file line for the lines to count as close.
_MIN_CONTAINMENT = 0.5
#: Distinctive tokens looked up per ``oldText`` line, and file lines kept per token.
_TOKENS_PER_LINE = 4
_HITS_PER_TOKEN = 200
_TOKEN = re.compile(r"[A-Za-z_$][\w$-]{2,}|\d{2,}|[^\w\s]{3,}")

_PREFIX = re.compile(r"^\s*\d+\| ?")
_SPACE = re.compile(r"\s+")


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _grams(text: str) -> frozenset[str]:
    text = _norm(text)[:_MAX_LINE_CHARS]
    return frozenset(text[i : i + 3] for i in range(len(text) - 2))


def _numbered(file: TextFile, first: int, last: int, max_bytes: int = NEAREST_MAX_BYTES) -> str:
    """``read_file``'s rendering of ``first..last`` (header and numbered, redacted rows; no read hints)."""
    rows = render(file, first, last, max_lines=last - first + 1, max_bytes=max_bytes).split("\n")
    return "\n".join([rows[0], *(r for r in rows[1:] if not r.startswith("["))])


# ---------------------------------------------------------------- nearest lines


def _candidates(lines: Sequence[str], olds: Sequence[str]) -> list[int]:
    """0-based indexes of the lines that hold one of the most distinctive tokens (the longest identifiers
    or numbers, :data:`_TOKENS_PER_LINE` per line) of the ``olds`` lines, at most :data:`_HITS_PER_TOKEN`
    lines per token: found with ``str.find`` over the whole text, so a big file costs little."""
    text = "\n".join(lines)
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    found: set[int] = set()
    tokens = {tok for old in olds for tok in sorted(_TOKEN.findall(old), key=len, reverse=True)[:_TOKENS_PER_LINE]}
    for token in tokens:
        at, hits = text.find(token), 0
        while at >= 0 and hits < _HITS_PER_TOKEN:
            found.add(bisect.bisect_right(starts, at) - 1)
            hits += 1
            at = text.find(token, at + len(token))
    return sorted(found)


def nearest_window(lines: Sequence[str], old_text: str) -> tuple[int, int] | None:
    """The 1-based lines ``(first, last)`` of ``lines`` that come closest to ``old_text``, or None when no
    line is close (fewer than :data:`_MIN_CONTAINMENT` of an ``old_text`` line's character trigrams in it).

    Each compared line of ``old_text`` (line-number prefixes and runs of whitespace ignored) votes for the
    file line that contains most of its trigrams, aligned to where ``old_text`` would start; the start with
    the highest total wins. The window covers ``old_text``'s lines there plus one line either side, at most
    :data:`NEAREST_MAX_LINES` lines (centred on the best line when ``old_text`` is longer). Only lines sharing
    a distinctive token with ``old_text`` are compared (:func:`_candidates`), so the work is bounded by
    :data:`_MAX_OLD_LINES` × (tokens × :data:`_HITS_PER_TOKEN`) set intersections, whatever the file's size.
    """
    old_lines = [_PREFIX.sub("", line) for line in old_text.replace("\r\n", "\n").split("\n")]
    compared = sorted(((len(_norm(t)), j) for j, t in enumerate(old_lines) if len(_norm(t)) >= 3), reverse=True)
    olds = [(j, _grams(old_lines[j])) for _, j in compared[:_MAX_OLD_LINES]]
    if not olds or not lines:
        return None
    candidates = [(i, _grams(lines[i])) for i in _candidates(lines, [old_lines[j] for j, _ in olds])]
    votes: dict[int, float] = {}
    best_line: dict[int, tuple[float, int]] = {}
    for j, grams in olds:
        score, at = 0.0, -1
        for i, line_grams in candidates:
            shared = len(grams & line_grams)
            if not shared:
                continue
            # Ties go to the tighter line (fewer trigrams of its own beyond the shared ones).
            value = shared / len(grams) + 0.001 * shared / len(line_grams)
            if value > score:
                score, at = value, i
        if at >= 0 and score >= _MIN_CONTAINMENT:
            start = at - j
            votes[start] = votes.get(start, 0.0) + score
            if score > best_line.get(start, (0.0, 0))[0]:
                best_line[start] = (score, at)
    if not votes:
        return None
    start = max(votes, key=lambda s: (votes[s], -abs(s)))
    first = max(1, start)  # one line above where oldText would start (0-based ``start``)
    last = min(len(lines), start + len(old_lines) + 1)
    if last - first + 1 > NEAREST_MAX_LINES:
        centre = best_line[start][1] + 1
        first = max(1, centre - NEAREST_MAX_LINES // 2)
        last = min(len(lines), first + NEAREST_MAX_LINES - 1)
    return first, last


def nearest_lines_text(file: TextFile, old_text: str) -> str | None:
    """The numbered lines of :func:`nearest_window` with a sentence saying what to do, or None."""
    window = nearest_window(file.lines, old_text)
    if window is None:
        return None
    return (f"The closest lines in {file.rel} are below: copy oldText from them exactly (without the "
            "'   12| ' prefixes), or read_file a range around them first.\n" + _numbered(file, *window))


def prefix_hint(old_text: str) -> str | None:
    """A sentence when every non-blank line of ``old_text`` starts with a ``read_file`` line-number prefix."""
    lines = [line for line in old_text.split("\n") if line.strip()]
    if lines and all(_PREFIX.match(line) for line in lines):
        return ("oldText starts with read_file's line-number prefixes (like '   12| '): they are not part of the "
                "file. Leave them out and keep the rest of each line exactly, indentation included.")
    return None


# ---------------------------------------------------------------- page text


def page_texts(targets: Sequence[Target]) -> tuple[PageText, ...]:
    """The :class:`PageText` of every target whose element has text (an unusable source path is left out)."""
    found: list[PageText] = []
    for t in targets:
        if t.element is None or not _norm(t.element.text):
            continue
        rel: str | None = None
        line: int | None = None
        if t.source is not None:
            try:
                rel, line = normalize_rel_path(t.source.file), t.source.line
            except PathDenied:
                rel = None
        found.append(PageText(index=t.index, text=t.element.text, rel=rel, line=line))
    return tuple(found)


def _quote(text: str) -> str:
    """Page text as a one-line JSON string in which every control, format (bidi controls, tag characters,
    zero-width marks) and line or paragraph separator character is a ``\\uXXXX`` escape: page data that can
    neither start a new line nor reorder or hide what is read (as ``context.quote`` does for the prompt)."""
    out = []
    for char in json.dumps(text, ensure_ascii=False):
        if unicodedata.category(char)[0] == "C" or unicodedata.category(char) in ("Zl", "Zp"):
            out.append(json.dumps(char)[1:-1])  # ensure_ascii escapes it (a surrogate pair above U+FFFF)
        else:
            out.append(char)
    return "".join(out)


def _shows(page: str, old: str) -> bool:
    """Whether ``old`` (normalized) is, contains, or nearly is the page text ``page`` (normalized)."""
    if not page or not old:
        return False
    if page == old or (len(page) >= 2 and page in old) or (len(old) >= 2 and old in page):
        return True
    if len(old) <= _MAX_LINE_CHARS:
        return difflib.SequenceMatcher(None, page, old, autojunk=False).ratio() >= 0.8
    return False


async def page_text_hint(ctx: WorktreeContext, old_text: str, file_text: str | None) -> str | None:
    """When ``old_text`` is (or holds) the text a picked element shows on the page, and that page text does
    not occur in the named file (``file_text``; None: unknown): a sentence naming the target, the page text
    and the element's source ``file:line`` with that line (numbered, redacted, read through the path
    policy), or None. Only the first matching target is named."""
    old = _norm(_PREFIX.sub("", old_text))
    for page in ctx.page_texts:
        if not _shows(_norm(page.text), old):
            continue
        if file_text is not None and page.text.strip() in file_text:
            continue  # the page text is in the source as it is: not the confusion this hint is about
        shown = _quote(redact_cut(_norm(page.text), 120))
        head = (f"oldText looks like text the page shows, not source code: Target {page.index}'s element shows "
                f"{shown} on the page, but the page renders it from code that can look different")
        source = None
        if page.rel is not None and page.line is not None:
            file = await ctx.read_text(page.rel)
            if file is not None and 1 <= page.line <= len(file.lines):
                source = _numbered(file, page.line, page.line, max_bytes=512)
        if source is None:
            return (f"{head}. Find where it is rendered with search_text on a short, distinctive piece of code "
                    "(an identifier or class name, not the page text), then copy oldText from the file.")
        return (f"{head}; its source is at {page.rel}:{page.line}:\n{source}\n"
                "Edit that code (copy oldText from this line exactly, without the '   12| ' prefix).")
    return None

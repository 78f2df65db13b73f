"""Pure checks of the repository's own Markdown and design citations, used by the tests of this folder.

Nothing here reads outside the repository it is given, and nothing needs the network. The rules:

- A relative Markdown link or image (``[text](target)``, ``![alt](target)``, ``[id]: target``, an HTML
  ``href``/``src``) outside code must name a file or directory git knows in the repository (tracked, or
  untracked and not ignored): a built ``dist/`` file or a ``node_modules`` path does not count, since a
  fresh clone lacks it. A ``#fragment`` on a Markdown target (or a bare ``#fragment``) must be a heading anchor of that
  file, by GitHub's slug rules (:func:`github_slug`), or an explicit ``<a id|name="…">``.
- A ``design.md §N`` citation (also ``§N–§M`` ranges and ``§N, §M`` lists) must name a section
  ``## N.`` of ``docs/design.md``; ``invariant N`` after it must be an item of §16's numbered list.
"""

from __future__ import annotations

import re
import subprocess
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

#: Files the link check covers: every Markdown file git knows, outside dependency and build folders.
SKIPPED_DIRS = ("node_modules", ".venv", "dist")


@dataclass(frozen=True)
class Problem:
    """One broken link or citation: ``where`` is ``path:line`` relative to the repository."""

    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


def repo_files(root: Path) -> set[str]:
    """Every file git knows in ``root`` (tracked, or untracked and not ignored), as POSIX paths.

    Raises ``subprocess.CalledProcessError`` when ``root`` is not a git work tree."""
    out = subprocess.run(
        ["git", "-c", "core.quotePath=false", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root, check=True, capture_output=True,
    ).stdout.decode("utf-8")
    return {name for name in out.split("\0") if name and (root / name).is_file()}


def markdown_files(files: set[str]) -> list[str]:
    """The ``.md`` files of ``files`` outside :data:`SKIPPED_DIRS`, sorted."""
    return sorted(
        name for name in files
        if name.lower().endswith(".md") and not any(part in SKIPPED_DIRS for part in name.split("/")[:-1])
    )


# -- Markdown parsing ---------------------------------------------------------------------------------

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"
                          r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
_REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_HTML_LINK = re.compile(r"<(?:a|img|source)\s[^>]*\b(?:href|src)\s*=\s*[\"']([^\"']*)[\"']", re.IGNORECASE)
_HTML_ANCHOR = re.compile(r"<a\s[^>]*\b(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)


def prose_lines(text: str, *, blank_code_spans: bool = True) -> list[tuple[int, str]]:
    """``(line number, line)`` of every line outside fenced code blocks, code spans blanked out unless
    ``blank_code_spans`` is false (a heading's slug keeps their text)."""
    lines: list[tuple[int, str]] = []
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = _FENCE.match(line)
        if fence is not None:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = None
            continue
        if match:
            fence = match.group(1)
            continue
        if blank_code_spans:
            line = _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)
        lines.append((number, line))
    return lines


def links(text: str) -> list[tuple[int, str]]:
    """``(line number, target)`` of every inline link, image, reference definition and HTML ``href``/``src``
    outside code."""
    found: list[tuple[int, str]] = []
    for number, line in prose_lines(text):
        for match in _INLINE_LINK.finditer(line):
            found.append((number, match.group(1)))
        for match in _HTML_LINK.finditer(line):
            found.append((number, match.group(1)))
        ref = _REF_DEF.match(line)
        if ref:
            found.append((number, ref.group(1)))
    return [(number, target[1:-1] if target.startswith("<") else target) for number, target in found]


def _heading_text(raw: str) -> str:
    """A heading's rendered text: code spans keep their content literally; outside them, links become
    their text and HTML tags, emphasis and code markers disappear."""
    parts: list[str] = []
    last = 0
    for match in _CODE_SPAN.finditer(raw):
        parts.append(_plain(raw[last:match.start()]))
        parts.append(match.group(0).strip("`"))
        last = match.end()
    parts.append(_plain(raw[last:]))
    return "".join(parts)


def _plain(text: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("*", "")


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading's text: lower case; every character that is not a letter, digit,
    space, ``-`` or ``_`` dropped; each space a ``-``. (Duplicates are numbered by :func:`anchors`.)"""
    text = _heading_text(heading).strip().lower()
    kept = "".join(
        ch for ch in text
        if ch in " -_" or unicodedata.category(ch)[0] in ("L", "N") or unicodedata.category(ch) == "Mn"
    )
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor of a Markdown text: heading slugs (``x``, ``x-1``, … for repeats) and HTML ids."""
    seen: dict[str, int] = {}
    result: set[str] = set()
    for _, line in prose_lines(text, blank_code_spans=False):
        match = _HEADING.match(line)
        if match:
            slug = github_slug(match.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            result.add(slug if count == 0 else f"{slug}-{count}")
    for _, line in prose_lines(text):
        result.update(m.group(1) for m in _HTML_ANCHOR.finditer(line))
    return result


# -- the link check -----------------------------------------------------------------------------------

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def check_links(root: Path, files: set[str], sources: list[str]) -> list[Problem]:
    """Broken relative links and anchors in ``sources`` (repository-relative Markdown files)."""
    directories = {"/".join(name.split("/")[:i]) for name in files for i in range(1, name.count("/") + 1)}
    anchor_cache: dict[str, set[str]] = {}
    problems: list[Problem] = []
    for source in sources:
        for number, target in links((root / source).read_text(encoding="utf-8")):
            if not target or _SCHEME.match(target) or target.startswith("//"):
                continue  # a URL: not ours to check (the tests never reach the network)
            where = f"{source}:{number}"
            path_part, _, fragment = target.partition("#")
            path_part = unquote(path_part.split("?", 1)[0])
            resolved = _resolve(source, path_part) if path_part else source
            if resolved is None:
                problems.append(Problem(where, f"link {target!r} leaves the repository"))
            elif resolved and resolved not in files and resolved not in directories:
                problems.append(Problem(where, f"link {target!r}: no file {resolved!r} in the repository"))
            elif fragment and resolved.lower().endswith(".md"):
                if resolved not in anchor_cache:
                    anchor_cache[resolved] = anchors((root / resolved).read_text(encoding="utf-8"))
                if unquote(fragment) not in anchor_cache[resolved]:
                    problems.append(Problem(where, f"link {target!r}: {resolved} has no heading #{fragment}"))
    return problems


def _resolve(source: str, path: str) -> str | None:
    """The repository path a link in ``source`` names: relative to its folder, or to the repository root
    when it starts with ``/`` (as GitHub renders it); ``None`` when it climbs out of the repository."""
    if path.startswith("/"):
        return _normalise(path)
    folder = source.rsplit("/", 1)[0] if "/" in source else ""
    return _normalise(f"{folder}/{path}" if folder else path)


def _normalise(path: str) -> str | None:
    """``a/./b/../c`` → ``a/c``; ``None`` when ``..`` climbs above the repository root."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts)


# -- design.md citations ------------------------------------------------------------------------------

_SECTION = re.compile(r"^## (\d+)\. ", re.MULTILINE)
_CITATION = re.compile(
    r"design\.md(?P<refs>\s*§\s*\d+(?:\s*(?:,|/|–|-|and|to)\s*§\s*\d+)*)"
    r"(?:[\s,;]*(?:invariants?\s+(?P<inv>\d+(?:\s*(?:,|and)\s*\d+)*)))?"
)


def design_sections(design_text: str) -> list[int]:
    """The numbers of the ``## N. Title`` sections of design.md, in order."""
    return [int(n) for n in _SECTION.findall(design_text)]


def design_invariants(design_text: str) -> set[int]:
    """The numbers of §16's numbered list (the invariants)."""
    match = re.search(r"^## 16\. .*?$(.*?)(?=^## |\Z)", design_text, re.MULTILINE | re.DOTALL)
    if match is None:
        return set()
    return {int(n) for n in re.findall(r"^(\d+)\. ", match.group(1), re.MULTILINE)}


def citations(text: str) -> list[tuple[int, list[int], list[int]]]:
    """``(line, sections, invariants)`` of every ``design.md §…`` citation; ranges ``§3–§5`` expanded."""
    found: list[tuple[int, list[int], list[int]]] = []
    for match in _CITATION.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        refs = match.group("refs")
        sections = {int(n) for n in re.findall(r"§\s*(\d+)", refs)}
        for low, high in re.findall(r"§\s*(\d+)\s*(?:–|-|to)\s*§\s*(\d+)", refs):
            sections.update(range(int(low), int(high) + 1))
        invariants = [int(n) for n in re.findall(r"\d+", match.group("inv") or "")]
        found.append((line, sorted(sections), invariants))
    return found


def check_citations(root: Path, sources: list[str], design: str = "docs/design.md") -> list[Problem]:
    """Citations in ``sources`` naming a design.md section (or §16 invariant) that does not exist."""
    design_text = (root / design).read_text(encoding="utf-8")
    sections = set(design_sections(design_text))
    invariants = design_invariants(design_text)
    problems: list[Problem] = []
    for source in sources:
        try:
            text = (root / source).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for line, cited, cited_invariants in citations(text):
            for number in cited:
                if number not in sections:
                    problems.append(Problem(f"{source}:{line}", f"cites design.md §{number}, which has no such "
                                                                f"section"))
            for number in cited_invariants:
                if number not in invariants:
                    problems.append(Problem(f"{source}:{line}", f"cites invariant {number}, not in design.md §16"))
    return problems


def files_naming(root: Path, files: set[str], needle: str, scopes: tuple[str, ...]) -> list[Problem]:
    """``path:line`` of every occurrence of ``needle`` (case-sensitive) in ``files`` under ``scopes``
    (folders ending in ``/`` or single files), the ``grep -rn`` of the acceptance, binary files included."""
    problems: list[Problem] = []
    raw = needle.encode("utf-8")
    for name in sorted(files):
        if not any(name.startswith(scope) if scope.endswith("/") else name == scope for scope in scopes):
            continue
        data = (root / name).read_bytes()
        start = data.find(raw)
        while start != -1:
            line = data.count(b"\n", 0, start) + 1
            problems.append(Problem(f"{name}:{line}", f"names {needle}"))
            start = data.find(raw, start + 1)
    return problems

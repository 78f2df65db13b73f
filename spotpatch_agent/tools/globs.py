"""The ``glob`` argument of ``list_files`` and ``search_text`` (docs/design.md §6): compile once, match paths.

:func:`compile_glob` turns a pattern into a matcher over relative POSIX paths; :func:`glob_matcher` is the
same for a tool's argument, answering a bad pattern with the retryable result the model can fix.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from wcmatch import glob as wcglob

from spotpatch_agent.protocol.errors import ToolErrorCode
from spotpatch_agent.tools.base import ToolDef, ToolResult, arguments_guidance, check_pattern

_GLOB_FLAGS = wcglob.GLOBSTAR | wcglob.BRACE | wcglob.DOTGLOB | wcglob.FORCEUNIX
_GLOB_EXPANSION_LIMIT = 256


def glob_matcher(tool: ToolDef, pattern: str) -> Callable[[str], bool] | ToolResult:
    """:func:`compile_glob` for a tool's ``glob`` argument, or the retryable ``TOOL_ARGUMENTS_INVALID``
    result to hand back (empty or invalid pattern). Raises ``JobFailure`` for an oversized pattern
    (see :func:`spotpatch_agent.tools.base.check_pattern`)."""
    if (bad := check_pattern(tool, "glob", pattern)) is not None:
        return bad
    try:
        return compile_glob(pattern)
    except ValueError:
        return ToolResult.rejected(
            ToolErrorCode.TOOL_ARGUMENTS_INVALID,
            arguments_guidance(tool, ["glob is not a valid pattern or expands to too many patterns."]),
        )


def compile_glob(pattern: str) -> Callable[[str], bool]:
    """A matcher for a relative POSIX path: ``**`` spans directories, ``{a,b}`` braces, dotfiles match.

    Matching is against the whole relative path and case-sensitive (``*.ts`` matches top-level files only;
    ``**/*.ts`` any depth). Raises ``ValueError`` for a pattern wcmatch cannot compile or whose braces expand
    to more than 256 patterns.
    """
    try:
        include, exclude = wcglob.translate(pattern, flags=_GLOB_FLAGS, limit=_GLOB_EXPANSION_LIMIT)
    except Exception as exc:  # wcmatch raises a private PatternLimitException or ValueError
        raise ValueError("invalid glob") from exc
    if include and not exclude:
        # wcmatch's non-filesystem match is "any include pattern fullmatches": one alternation does the same
        # in a single regex call per path (wcmatch compiles the same translations without extra flags).
        try:
            full = re.compile("|".join(f"(?:{part})" for part in include)).fullmatch
        except re.error:
            pass
        else:
            if pattern == "**":
                # "**" refuses only paths with a "." or ".." segment: skip the regex when no segment starts
                # with "." (almost every listed path).
                return lambda path: ("/." not in path and not path.startswith(".")) or full(path) is not None
            return lambda path: full(path) is not None
    try:
        matcher = wcglob.compile(pattern, flags=_GLOB_FLAGS, limit=_GLOB_EXPANSION_LIMIT)
    except Exception as exc:
        raise ValueError("invalid glob") from exc
    return matcher.match

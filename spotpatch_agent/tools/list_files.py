"""``list_files {glob, maxResults}``: enumerate allowed files of the worktree (docs/design.md §6, §7).

Read-only. The listing is git's own (``git ls-files -z --cached --others --exclude-standard``, so ignored
files never appear), filtered by the path policy (protected, symlinked, non-regular, oversized paths are
dropped) and cached per worktree version. Output: a header line, then one relative POSIX path per line,
at most ``min(maxResults, listMaxResults)`` paths and :data:`~spotpatch_agent.tools.base.OUTPUT_MAX_CHARS`
characters, with a note when truncated.
"""

from __future__ import annotations

from pydantic import Field

from spotpatch_agent.tools.base import (
    ALL_EDIT_FORMATS,
    OUTPUT_MAX_CHARS,
    ToolArgs,
    ToolDef,
    ToolResult,
)
from spotpatch_agent.tools.context import WorktreeContext
from spotpatch_agent.tools.globs import glob_matcher

DESCRIPTION = (
    "List allowed project files (relative POSIX paths) whose whole path matches a glob. "
    "'**' spans directories ('**/*.tsx', 'src/**'), '*' stays within one directory, '{a,b}' alternates. "
    "Ignored, protected and generated files are never listed. Read-only."
)


class ListFilesArgs(ToolArgs):
    glob: str = Field(description="Glob matched against the whole relative path, e.g. 'src/**/*.vue' or '**'.")
    max_results: int = Field(ge=1, description="Maximum paths to return (the job's limit caps it).")


async def list_files(ctx: WorktreeContext, args: ListFilesArgs) -> ToolResult:
    """Run ``list_files``. Raises ``JobFailure(LIMIT_EXCEEDED)`` for a glob over 1000 characters."""
    match = glob_matcher(LIST_FILES, args.glob)
    if isinstance(match, ToolResult):
        return match
    listing = await ctx.allowed_files()
    matched = listing.matching(args.glob, match)
    cap = min(args.max_results, ctx.limits.get("listMaxResults"))
    shown: list[str] = []
    size = 0
    for path in matched[:cap]:
        if size + len(path) + 1 > OUTPUT_MAX_CHARS:
            break
        shown.append(path)
        size += len(path) + 1
    if not matched:
        header = (
            "No allowed files match this glob. It is matched against the whole relative path: "
            "use '**/' for any depth, e.g. '**/*.ts'."
        )
    elif len(shown) < len(matched):
        header = f"{len(matched)} files match; showing the first {len(shown)}. Narrow the glob to see the others."
    else:
        header = f"{len(matched)} files match."
    if listing.truncated:
        header += " The repository listing was too large and is incomplete."
    return ToolResult.success("\n".join([header, *shown]))


LIST_FILES = ToolDef(
    name="list_files", description=DESCRIPTION, args=ListFilesArgs, handler=list_files, kind="read", deadline="tool",
    audit=(("glob", "pattern"), ("maxResults", "int")), audit_served=False,
    retry_hint="change the arguments or take another approach.", offer="always",
    edit_formats=ALL_EDIT_FORMATS, descriptions={},
)

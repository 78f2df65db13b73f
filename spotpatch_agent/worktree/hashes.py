"""SHA-256 hashes of the paths the agent touched, as a working tree holds them (docs/design.md §8).

:func:`change_hashes` gives the baseline and result hash of each path the job's worktree changed, through
git's checkout filters (``cat-file --filters``), so ``eol=crlf`` and similar attributes compare correctly;
:func:`filtered_blob` and :func:`raw_blobs` read the blobs Apply and Revert fall back on
(:mod:`~spotpatch_agent.worktree.changes`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.worktree.git import CACHED_DIFF_SUBMODULES, parse_cat_file_batch, run_git
from spotpatch_agent.worktree.placement import Worktree
from spotpatch_agent.worktree.result import RawEntry, parse_raw, stage_all

__all__ = ["ChangeHashes", "change_hashes", "filtered_blob", "raw_blobs"]


_REGULAR_MODES = ("100644", "100755")


@dataclass(frozen=True)
class ChangeHashes:
    """Per touched path: SHA-256 of its bytes in the baseline and in the agent's result (``None`` = absent)."""

    baseline: dict[str, str | None]
    result: dict[str, str | None]


async def change_hashes(wt: Worktree) -> ChangeHashes:
    """Baseline and result hashes of every path the agent touched in ``wt`` (docs/design.md §8).

    Stages the worktree (its own index), lists touched paths with ``git diff --cached --raw`` against
    the baseline commit, and hashes each blob in working-tree form (``git cat-file --batch
    --filters``; object id and path on stdin, never on the command line). Call it on the same
    worktree state as :func:`~spotpatch_agent.worktree.result.result_diff`. Raises
    ``SpotPatchError(CHANGESET_REJECTED)`` for a non-regular entry (symlink, submodule) or a path
    with a line break, :class:`~spotpatch_agent.errors.GitError` when git fails.
    """
    await stage_all(wt)
    raw = await run_git(
        ["diff", "--cached", "--raw", "-z", "--no-abbrev", "--no-renames", *CACHED_DIFF_SUBMODULES, wt.baseline_oid,
         "--"],
        cwd=wt.path,
        redact=[wt.path],
    )
    baseline: dict[str, str | None] = {}
    result: dict[str, str | None] = {}
    for entry in parse_raw(raw.stdout):
        _require_regular(entry)
        baseline[entry.path] = await _blob_hash(wt, entry.old_oid, entry.path)
        result[entry.path] = await _blob_hash(wt, entry.new_oid, entry.path)
    return ChangeHashes(baseline, result)


def _require_regular(entry: RawEntry) -> None:
    for mode, oid in ((entry.old_mode, entry.old_oid), (entry.new_mode, entry.new_oid)):
        if oid is not None and mode not in _REGULAR_MODES:
            raise SpotPatchError(ErrorCode.CHANGESET_REJECTED, f"not a regular file: {entry.path}")
    if "\n" in entry.path or "\r" in entry.path:
        raise SpotPatchError(ErrorCode.CHANGESET_REJECTED, "a changed path contains a line break")


async def _blob_hash(wt: Worktree, oid: str | None, path: str) -> str | None:
    if oid is None:
        return None
    content = await filtered_blob(wt.path, oid, path)
    if content is None:
        raise SpotPatchError(ErrorCode.INTERNAL, f"the worktree has no readable blob for {path}")
    return hashlib.sha256(content).hexdigest()


async def filtered_blob(cwd: Path, oid: str, path: str) -> bytes | None:
    """Blob ``oid`` in working-tree form for ``path`` (checkout filters applied); ``None`` if missing."""
    # One object per process: git 2.39 reports the unfiltered size in the header of a filtered
    # object, so the content is "everything after the header line, minus the final newline".
    line = f"{oid} {path}\n".encode("utf-8", "surrogateescape")
    out = await run_git(["cat-file", "--batch", "--filters"], cwd=cwd, input=line, check=False, read_only=True)
    header, _, content = out.stdout.partition(b"\n")
    if out.returncode != 0 or header.endswith(b" missing") or not content.endswith(b"\n"):
        return None
    return content[:-1]


async def raw_blobs(cwd: Path, oids: list[str]) -> dict[str, bytes]:
    """Raw bytes of every present blob of ``oids`` with one ``git cat-file --batch`` (missing ones omitted)."""
    wanted = sorted({o for o in oids if all(c in "0123456789abcdef" for c in o) and len(o) in (40, 64)})
    if not wanted:
        return {}
    out = await run_git(["cat-file", "--batch"], cwd=cwd, input="".join(f"{o}\n" for o in wanted).encode(),
                        check=False, read_only=True)
    return parse_cat_file_batch(out.stdout)

"""The agent's result: the worktree staged and diffed against its baseline, and git's raw diff parsed
(docs/design.md §8). ``result_diff`` is what the review shows; :func:`parse_raw` and :func:`stage_all` serve
changeset validation (:mod:`~spotpatch_agent.worktree.validate`) and the hashes of
:mod:`~spotpatch_agent.worktree.changes`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from spotpatch_agent.errors import GitError
from spotpatch_agent.protocol.models import FileStat
from spotpatch_agent.worktree.git import CACHED_DIFF_SUBMODULES, run_git
from spotpatch_agent.worktree.placement import Worktree

__all__ = ["RawEntry", "add_all_args", "parse_numstat", "parse_raw", "result_diff", "stage_all"]


_ZERO_OID = "0" * 40


async def result_diff(wt: Worktree) -> tuple[str, list[FileStat]]:
    """The agent's change: everything in the worktree against its baseline commit (docs/design.md §8).

    Stages the whole worktree first (``git add --all`` on the worktree's own index). Returns
    ``(diff, files)``: ``diff`` is ``git diff --cached --binary --full-index --no-renames`` against
    the baseline with ``a/``/``b/`` prefixes (bytes decoded as UTF-8 with ``surrogateescape``, so
    ``diff.encode("utf-8", "surrogateescape")`` gives git's exact bytes); ``files`` holds one
    :class:`FileStat` per path (relative POSIX, git's order) with added/removed line counts (0/0 for
    binary files) and status ``added|modified|deleted``. Raises :class:`GitError`.
    """
    await stage_all(wt)
    common = ["diff", "--cached", "--no-renames", "--no-ext-diff", "--no-textconv", "--no-color",
              *CACHED_DIFF_SUBMODULES]
    base = [wt.baseline_oid, "--"]
    diff = await run_git(
        [*common, "--binary", "--full-index", "--no-relative", "--src-prefix=a/", "--dst-prefix=b/", "-U3", *base],
        cwd=wt.path,
        redact=[wt.path],
        timeout=120,
    )
    numstat = await run_git([*common, "--numstat", "-z", *base], cwd=wt.path, redact=[wt.path])
    raw = await run_git([*common, "--raw", "-z", "--no-abbrev", *base], cwd=wt.path, redact=[wt.path])
    counts = parse_numstat(numstat.stdout)
    files = []
    for entry in parse_raw(raw.stdout):
        added, removed = counts.get(entry.path, (0, 0))
        files.append(FileStat(path=entry.path, added=added, removed=removed, status=entry.status))
    return diff.stdout.decode("utf-8", "surrogateescape"), files


async def stage_all(wt: Worktree) -> None:
    """``git add --all`` inside the worktree (its index is the engine's, never the user's), every gitlink
    left out (:func:`add_all_args`)."""
    await run_git(await add_all_args(wt.path), cwd=wt.path, redact=[wt.path], timeout=300)


async def add_all_args(cwd: Path) -> list[str]:
    """``add --all -- . :(exclude,literal)<gitlink>…``: every gitlink of the index left out of the pathspec.

    ``git add`` overrides submodule configuration (``diff.ignoreSubmodules=all`` does not reach it) and, for a
    gitlink whose directory holds a repository with an unborn HEAD, asks whether that submodule is dirty by
    running ``git status`` inside it — with that repository's own filters (a check's plant, issue 25 break;
    docs/security.md §6). Left out of the pathspec, a gitlink is never compared, so nothing runs there; a
    changed gitlink is never part of a changeset anyway (validation rejects one). Raises ``GitError``."""
    listed = await run_git(["ls-files", "-s", "-z"], cwd=cwd, read_only=True, redact=[cwd], timeout=300)
    gitlinks = [rec.split(b"\t", 1)[1] for rec in listed.stdout.split(b"\0") if rec.startswith(b"160000 ")]
    return ["add", "--all", "--", ".", *(":(exclude,literal)" + os.fsdecode(path) for path in gitlinks)]


@dataclass(frozen=True)
class RawEntry:
    """One line of ``git diff --raw -z --no-abbrev``: modes, blob ids (zeros = absent), status, path."""

    old_mode: str
    new_mode: str
    old_oid: str | None
    new_oid: str | None
    status: FileStatus
    path: str


#: A file's status as ``FileStat.status`` names it.
FileStatus = Literal["added", "modified", "deleted"]
_STATUS: dict[str, FileStatus] = {"A": "added", "D": "deleted", "M": "modified", "T": "modified"}


def parse_raw(raw: bytes) -> list[RawEntry]:
    """Parse ``--raw -z`` output (no renames). Raises :class:`GitError` on an unexpected status."""
    fields = raw.split(b"\0")
    entries: list[RawEntry] = []
    for i in range(0, len(fields) - 1, 2):
        meta = fields[i].decode("ascii", "replace")
        if not meta:
            continue
        old_mode, new_mode, old_oid, new_oid, letter = meta.lstrip(":").split(" ")
        if letter[:1] not in _STATUS:
            raise GitError(f"unexpected diff status {letter[:1]!r}")
        entries.append(
            RawEntry(
                old_mode,
                new_mode,
                None if old_oid == _ZERO_OID else old_oid,
                None if new_oid == _ZERO_OID else new_oid,
                _STATUS[letter[:1]],
                fields[i + 1].decode("utf-8", "surrogateescape"),
            )
        )
    return entries


def parse_numstat(raw: bytes) -> dict[str, tuple[int, int]]:
    counts: dict[str, tuple[int, int]] = {}
    for field in raw.split(b"\0"):
        if not field:
            continue
        added, removed, path = field.decode("utf-8", "surrogateescape").split("\t", 2)
        counts[path] = (int(added) if added.isdigit() else 0, int(removed) if removed.isdigit() else 0)
    return counts

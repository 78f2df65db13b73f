"""Apply the agent's diff to the user's working tree, and revert it, safely (DESIGN.md §8).

Apply: HEAD and git operation state re-read; every touched path must still hold its baseline bytes
(SHA-256; "absent" must be absent); ``git apply --check`` then ``git apply`` on the working tree
only (never ``--index``/``--cached``/``--reject``; the diff travels on stdin); the post-apply bytes
are hashed and, when expected result hashes are given, verified — on a mismatch the change is
reverse-applied before the error is raised, so the working tree changes all-or-nothing.

Revert: HEAD and operation state unchanged; every touched path must still hold its post-apply
bytes, else ``REVERT_CONFLICT`` ("resolve by hand"); ``git apply --reverse --check`` then
``git apply --reverse``; every path must then equal its baseline hash.

Neither ever touches the index, HEAD or a path the diff does not name. Hashes are of the file's
bytes as they are (or will be) in a working tree: :func:`change_hashes` runs git's checkout
filters (``cat-file --filters``), so ``eol=crlf`` and similar attributes compare correctly.

Crash safety: both operations call a :class:`ChangeJournal` around the write. This issue ships only
the seam (:data:`NULL_JOURNAL`); a later issue persists it and repairs a half-written apply.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal, Protocol

import anyio

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.worktree.git import describe, run_git
from spotpatch_agent.worktree.isolation import RawEntry, Worktree, parse_raw, stage_all
from spotpatch_agent.worktree.repo import locate, operation_reasons, resolve_head, same_path

__all__ = [
    "AppliedChange",
    "ChangeHashes",
    "ChangeJournal",
    "NULL_JOURNAL",
    "apply_change",
    "change_hashes",
    "file_hash",
    "revert_change",
]

Operation = Literal["apply", "revert"]

#: Stands for "present but not a regular file" (symlink, directory, …): never equals a digest.
NOT_REGULAR = "!not-a-regular-file"
_REGULAR_MODES = ("100644", "100755")


@dataclass
class AppliedChange:
    """What Apply did, enough to Revert it safely (DESIGN.md §8).

    ``diff``: the applied git diff (text, ``surrogateescape``-decoded bytes). ``paths``: touched
    paths, relative POSIX, git's order. ``baseline_hashes`` / ``post_hashes``: path → SHA-256 hex of
    the file's bytes before / after apply, ``None`` when the file is absent.
    """

    diff: str
    paths: list[str]
    baseline_hashes: dict[str, str | None]
    post_hashes: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class ChangeHashes:
    """Per touched path: SHA-256 of its bytes in the baseline and in the agent's result (``None`` = absent)."""

    baseline: dict[str, str | None]
    result: dict[str, str | None]


class ChangeJournal(Protocol):
    """Seam for the crash journal of DESIGN.md §8 ("leave a journal so the next start can repair").

    ``begin`` is awaited after every check passed and right before the working tree is written;
    ``end`` after the write was verified. An exception from either aborts the operation.
    """

    async def begin(self, operation: Operation, change: AppliedChange) -> None: ...

    async def end(self, operation: Operation, change: AppliedChange) -> None: ...


class _NullJournal:
    async def begin(self, operation: Operation, change: AppliedChange) -> None:
        return None

    async def end(self, operation: Operation, change: AppliedChange) -> None:
        return None


#: The journal used when none is given: records nothing (TODO: crash journal, later issue).
NULL_JOURNAL: ChangeJournal = _NullJournal()


# ---------------------------------------------------------------- hashes from the worktree


async def change_hashes(wt: Worktree) -> ChangeHashes:
    """Baseline and result hashes of every path the agent touched in ``wt`` (DESIGN.md §8).

    Stages the worktree (its own index), lists touched paths with ``git diff --cached --raw`` against
    the baseline commit, and hashes each blob in working-tree form (``git cat-file --batch
    --filters``; object id and path on stdin, never on the command line). Call it on the same
    worktree state as :func:`~spotpatch_agent.worktree.isolation.result_diff`. Raises
    ``SpotPatchError(CHANGESET_REJECTED)`` for a non-regular entry (symlink, submodule) or a path
    with a line break, :class:`~spotpatch_agent.errors.GitError` when git fails.
    """
    await stage_all(wt)
    raw = await run_git(
        ["diff", "--cached", "--raw", "-z", "--no-abbrev", "--no-renames", wt.baseline_oid, "--"],
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
    # One object per process: git 2.39 reports the unfiltered size in the header of a filtered
    # object, so the content is "everything after the header line, minus the final newline".
    line = f"{oid} {path}\n".encode("utf-8", "surrogateescape")
    out = await run_git(["cat-file", "--batch", "--filters"], cwd=wt.path, input=line, redact=[wt.path])
    header, _, content = out.stdout.partition(b"\n")
    if header.endswith(b" missing") or not content.endswith(b"\n"):
        raise SpotPatchError(ErrorCode.INTERNAL, f"the worktree has no readable blob for {path}")
    return hashlib.sha256(content[:-1]).hexdigest()


# ---------------------------------------------------------------- hashes in the user's tree


def file_hash(root: Path, rel: str) -> str | None:
    """SHA-256 hex of ``root/rel``'s bytes; ``None`` if absent; :data:`NOT_REGULAR` otherwise.

    No symlink is followed anywhere on the path: a symlinked parent or file, a directory, a FIFO, …
    all give :data:`NOT_REGULAR`, which equals no recorded hash (so it always conflicts).
    """
    current = root
    parts = PurePosixPath(rel).parts
    for index, part in enumerate(parts):
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return None
        except OSError:
            return NOT_REGULAR
        last = index == len(parts) - 1
        if stat.S_ISLNK(st.st_mode) or (last and not stat.S_ISREG(st.st_mode)):
            return NOT_REGULAR
        if not last and not stat.S_ISDIR(st.st_mode):
            return NOT_REGULAR
    digest = hashlib.sha256()
    try:
        with open(current, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        return NOT_REGULAR
    return digest.hexdigest()


async def _hash_paths(root: Path, paths: list[str]) -> dict[str, str | None]:
    return await anyio.to_thread.run_sync(lambda: {p: file_hash(root, p) for p in paths})


def _safe_path(rel: str) -> bool:
    pure = PurePosixPath(rel)
    return (
        bool(rel)
        and not pure.is_absolute()
        and "\\" not in rel
        and "\0" not in rel
        and ":" not in pure.parts[0]
        and all(part not in ("", ".", "..") and part.casefold() != ".git" for part in rel.split("/"))
    )


def _list(paths: list[str]) -> str:
    shown = ", ".join(paths[:3])
    return shown + (f" (and {len(paths) - 3} more)" if len(paths) > 3 else "")


# ---------------------------------------------------------------- shared guards


async def _guard_repository(root: Path, expected_head: str, code: ErrorCode, what: str) -> None:
    """HEAD still ``expected_head`` and no git operation in progress, else ``SpotPatchError(code)``."""
    layout = await locate(root)
    if layout is None or not same_path(layout.toplevel, root):
        raise SpotPatchError(ErrorCode.REPO_BLOCKED, f"cannot {what}: the project is no longer a git repository top level")
    head = await resolve_head(root)
    if head != expected_head:
        raise SpotPatchError(code, f"cannot {what}: HEAD moved since the job started; nothing was changed")
    busy = operation_reasons(layout)
    if busy:
        raise SpotPatchError(
            code, f"cannot {what}: a git operation is in progress ({', '.join(busy)}); finish it and try again"
        )


async def _touched_paths(root: Path, patch: bytes) -> list[str]:
    """The paths git will touch for ``patch`` (``git apply --numstat -z``: reads stdin, writes nothing)."""
    out = await run_git(["apply", "--numstat", "-z", "-"], cwd=root, input=patch, check=False, read_only=True)
    if out.returncode != 0:
        raise SpotPatchError(ErrorCode.INTERNAL, f"the recorded diff does not parse: {describe(out, root)}")
    paths: list[str] = []
    for record in out.stdout.split(b"\0"):
        if record:
            paths.append(record.decode("utf-8", "surrogateescape").split("\t", 2)[2])
    return paths


async def _git_apply(root: Path, patch: bytes, *, reverse: bool, check_only: bool) -> tuple[bool, str]:
    args = ["apply", "--whitespace=nowarn"]
    if reverse:
        args.append("--reverse")
    if check_only:
        args.append("--check")
    out = await run_git([*args, "-"], cwd=root, input=patch, check=False, timeout=120)
    return out.returncode == 0, describe(out, root)


def _mismatches(actual: dict[str, str | None], expected: dict[str, str | None]) -> list[str]:
    return [p for p in expected if actual.get(p) != expected[p]]


# ---------------------------------------------------------------- apply


async def apply_change(
    root: Path,
    diff: str,
    baseline_hashes: dict[str, str | None],
    *,
    expected_head: str,
    result_hashes: dict[str, str | None] | None = None,
    journal: ChangeJournal | None = None,
) -> AppliedChange:
    """Apply the agent's ``diff`` to the working tree of ``root``, all-or-nothing (DESIGN.md §8).

    ``baseline_hashes`` (path → SHA-256 hex or ``None`` = absent) must name exactly the paths the
    diff touches (see :func:`change_hashes`). ``result_hashes`` (optional, usually
    ``change_hashes(wt).result``): after the write every path must hold these bytes, else the change
    is reverse-applied and the call fails. Returns the :class:`AppliedChange` record with the
    actual post-apply hashes. Never writes the index or HEAD, never touches other paths.

    Raises ``SpotPatchError`` with ``APPLY_CONFLICT`` — HEAD moved, a git operation is in progress,
    a touched path changed since the job started (message names it, relative), the diff no longer
    applies, or a path changed while applying (rolled back) — in all of which nothing was changed;
    ``REPO_BLOCKED`` when ``root`` is no longer a repository top level; ``CHANGESET_REJECTED`` for
    an unsafe path; ``INVALID_STATE`` for an empty diff; ``INTERNAL`` when the record is
    inconsistent or a failed write could not be rolled back.
    """
    journal = journal or NULL_JOURNAL
    patch = diff.encode("utf-8", "surrogateescape")
    if not patch.strip():
        raise SpotPatchError(ErrorCode.INVALID_STATE, "the change is empty; nothing to apply")
    await _guard_repository(root, expected_head, ErrorCode.APPLY_CONFLICT, "apply")
    paths = await _touched_paths(root, patch)
    _check_record(paths, baseline_hashes, result_hashes)
    before = await _hash_paths(root, paths)
    changed = _mismatches(before, baseline_hashes)
    if changed:
        raise SpotPatchError(
            ErrorCode.APPLY_CONFLICT,
            f"not applied; these files changed since the job started: {_list(changed)}",
        )
    ok, why = await _git_apply(root, patch, reverse=False, check_only=True)
    if not ok:
        raise SpotPatchError(ErrorCode.APPLY_CONFLICT, f"not applied; the change no longer applies cleanly: {why}")
    record = AppliedChange(diff=diff, paths=paths, baseline_hashes=dict(baseline_hashes))
    await journal.begin("apply", record)
    ok, why = await _git_apply(root, patch, reverse=False, check_only=False)
    after = await _hash_paths(root, paths)
    if not ok:
        if not _mismatches(after, baseline_hashes):
            raise SpotPatchError(ErrorCode.APPLY_CONFLICT, f"not applied; git apply failed: {why}")
        raise SpotPatchError(
            ErrorCode.INTERNAL, f"apply failed part-way; check these files by hand: {_list(paths)} ({why})"
        )
    if result_hashes is not None:
        wrong = _mismatches(after, result_hashes)
        if wrong:
            await _roll_back(root, patch, paths, baseline_hashes, wrong)
    record.post_hashes = after
    await journal.end("apply", record)
    return record


def _check_record(
    paths: list[str], baseline: dict[str, str | None], result: dict[str, str | None] | None
) -> None:
    unsafe = [p for p in paths if not _safe_path(p)]
    if unsafe:
        raise SpotPatchError(ErrorCode.CHANGESET_REJECTED, "the change names a path outside the working tree")
    if not paths:
        raise SpotPatchError(ErrorCode.INVALID_STATE, "the change is empty; nothing to apply")
    if set(paths) != set(baseline) or (result is not None and set(paths) != set(result)):
        raise SpotPatchError(ErrorCode.INTERNAL, "the change record does not match its diff")


async def _roll_back(
    root: Path, patch: bytes, paths: list[str], baseline: dict[str, str | None], wrong: list[str]
) -> None:
    """Undo an apply whose result differs from the worktree's; always raises."""
    ok, why = await _git_apply(root, patch, reverse=True, check_only=False)
    restored = ok and not _mismatches(await _hash_paths(root, paths), baseline)
    if restored:
        raise SpotPatchError(
            ErrorCode.APPLY_CONFLICT,
            f"not applied; these files changed while applying: {_list(wrong)}",
        )
    raise SpotPatchError(
        ErrorCode.INTERNAL,
        f"apply gave unexpected content and could not be rolled back; check by hand: {_list(paths)}",
    )


# ---------------------------------------------------------------- revert


async def revert_change(
    root: Path, applied: AppliedChange, *, expected_head: str, journal: ChangeJournal | None = None
) -> None:
    """Reverse-apply exactly ``applied.diff`` in the working tree of ``root`` (DESIGN.md §8).

    Requires HEAD == ``expected_head``, no git operation in progress and every touched path still
    at its post-apply hash; afterwards every touched path must equal its baseline hash. Index, HEAD
    and all other paths (staged, unstaged or untracked) are untouched.

    Raises ``SpotPatchError`` with ``REVERT_CONFLICT`` — HEAD moved, an operation is in progress, a
    touched path changed after apply (message names it, relative; "resolve by hand"), or the
    reverse patch no longer applies — in all of which nothing was changed; ``REPO_BLOCKED`` when
    ``root`` is no longer a repository top level; ``INTERNAL`` when the reverse apply failed or
    left a path different from its baseline (message lists the paths to check).
    """
    journal = journal or NULL_JOURNAL
    paths = list(applied.paths)
    patch = applied.diff.encode("utf-8", "surrogateescape")
    await _guard_repository(root, expected_head, ErrorCode.REVERT_CONFLICT, "revert")
    if not paths or set(paths) != set(applied.post_hashes) or not all(_safe_path(p) for p in paths):
        raise SpotPatchError(ErrorCode.INTERNAL, "the applied-change record is inconsistent")
    changed = _mismatches(await _hash_paths(root, paths), applied.post_hashes)
    if changed:
        raise SpotPatchError(
            ErrorCode.REVERT_CONFLICT,
            f"not reverted; these files changed after apply: {_list(changed)}; resolve by hand",
        )
    ok, why = await _git_apply(root, patch, reverse=True, check_only=True)
    if not ok:
        raise SpotPatchError(
            ErrorCode.REVERT_CONFLICT, f"not reverted; the change no longer reverses cleanly ({why}); resolve by hand"
        )
    await journal.begin("revert", applied)
    ok, why = await _git_apply(root, patch, reverse=True, check_only=False)
    wrong = _mismatches(await _hash_paths(root, paths), applied.baseline_hashes)
    if not ok or wrong:
        detail = f" ({why})" if not ok else ""
        raise SpotPatchError(
            ErrorCode.INTERNAL,
            f"revert did not restore the baseline; check these files by hand: {_list(wrong or paths)}{detail}",
        )
    await journal.end("revert", applied)

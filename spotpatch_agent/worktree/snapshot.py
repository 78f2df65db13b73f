"""Include-local-changes (docs/design.md §8): the user's staged, unstaged and untracked state, copied into a
job's worktree.

Used by :func:`~spotpatch_agent.worktree.create.create_worktree` after the detached worktree exists
at the recorded HEAD and before its baseline commit::

    take_snapshot(root, head, limits)      git status → bounded regular untracked paths → limits →
                                           git diff-index --binary HEAD (staged + unstaged vs HEAD) →
                                           SHA-256 of the user's bytes of every changed/untracked path
    install_snapshot(snap, root, wt)       git apply of that diff in the worktree; untracked files
                                           copied byte for byte, no symlink followed
    verify_snapshot(snap, root, wt)        HEAD, diff hash, untracked path set and every digest re-read;
                                           any difference fails (REPO_BLOCKED, retryable)

Every read of the user's repository is read-only: ``git status``/``git diff-index`` run with
``GIT_OPTIONAL_LOCKS=0``. ``git diff HEAD`` (porcelain) is never used: it rewrites the index to refresh
stat information even then. Nothing here writes the user's index, HEAD, refs or files.

Submodules are outside the snapshot (``--ignore-submodules=all``): a worktree never checks one out, so
its local state (moved commit, dirty content) stays the user's and never enters a baseline or a diff.

Test seam: :data:`BEFORE_VERIFY` (module attribute, ``None`` in production) is awaited between
:func:`install_snapshot` and :func:`verify_snapshot`, so a test can change the user's tree there.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import Limits
from spotpatch_agent.worktree.git import describe, run_git
from spotpatch_agent.worktree.health import LocalStatus, read_status
from spotpatch_agent.worktree.repo import resolve_head

__all__ = [
    "BEFORE_VERIFY",
    "LocalSnapshot",
    "include_local_changes",
    "install_snapshot",
    "read_regular",
    "take_snapshot",
    "verify_snapshot",
]

#: Test seam, see the module docstring. Awaited with no arguments when set.
BEFORE_VERIFY: Callable[[], Awaitable[None]] | None = None

#: The diff of the local changes may hold a deleted file's whole content: at most this many bytes
#: beyond twice ``localSnapshotMaxBytes``.
_DIFF_SLACK = 64 * 1024

_RACE = "the working tree changed while the job was starting ({}); try again"

_POSIX_DIR_FD = os.name == "posix" and os.open in os.supports_dir_fd


@dataclass(frozen=True)
class LocalSnapshot:
    """The user's local changes at one instant (paths relative POSIX).

    ``head``: the recorded HEAD. ``diff``: ``git diff-index --binary HEAD`` bytes, ``diff_sha`` their
    SHA-256 hex. ``changed``: tracked paths with a staged or unstaged change. ``untracked``: untracked
    regular files. ``digests``: path → SHA-256 hex of the user's bytes (``None``: absent) for every
    changed and untracked path. ``executable``: the untracked paths with an executable bit.
    ``untracked_bytes``: the exact bytes hashed for each untracked path (what is copied).
    ``max_bytes``: the ``localSnapshotMaxBytes`` in force (bounds every later read).
    """

    head: str
    diff: bytes
    diff_sha: str
    changed: tuple[str, ...]
    untracked: tuple[str, ...]
    digests: dict[str, str | None]
    executable: frozenset[str]
    max_bytes: int
    untracked_bytes: dict[str, bytes] = field(default_factory=dict, repr=False)


async def include_local_changes(root: Path, worktree: Path, head: str, limits: Limits) -> LocalSnapshot:
    """Snapshot ``root``'s local changes, install them in ``worktree`` (at ``head``) and re-verify.

    Raises ``SpotPatchError(REPO_BLOCKED)`` — retryable when the user's tree changed meanwhile
    ("the working tree changed while the job was starting; try again"), not retryable for a symlink,
    non-regular item, a change over the snapshot limits or a change git cannot reproduce in the
    worktree — and :class:`~spotpatch_agent.errors.GitError` when git fails. docs/design.md §8.
    """
    snap = await take_snapshot(root, head, limits)
    await install_snapshot(snap, root, worktree)
    if BEFORE_VERIFY is not None:
        await BEFORE_VERIFY()
    await verify_snapshot(snap, root, worktree)
    return snap


# ---------------------------------------------------------------- snapshot


async def take_snapshot(root: Path, head: str, limits: Limits) -> LocalSnapshot:
    """Read the local changes of ``root`` against ``head`` (see :class:`LocalSnapshot`).

    Raises ``SpotPatchError(REPO_BLOCKED)`` for a conflict, a symbolic link or non-regular item among
    the changes, or more than ``localSnapshotMaxFiles`` paths / ``localSnapshotMaxBytes`` bytes
    (docs/design.md §4); retryable if HEAD is no longer ``head``.
    """
    status = await read_status(root)
    if await resolve_head(root) != head:
        raise _race("HEAD moved")
    _refuse_unsnapshottable(status)
    paths = sorted(set(status.changed) | set(status.untracked))
    max_files, max_bytes = limits.get("localSnapshotMaxFiles"), limits.get("localSnapshotMaxBytes")
    if len(paths) > max_files:
        raise _over_limit(f"{len(paths)} changed or untracked paths (limit {max_files})")
    contents = await anyio.to_thread.run_sync(_read_user_files, root, paths, max_bytes)
    diff = await _local_diff(root, head)
    if len(diff) > _diff_cap(max_bytes):
        raise _over_limit(f"a local diff of {len(diff)} bytes (limit {_diff_cap(max_bytes)})")
    executable = frozenset(p for p in status.untracked if (content := contents[p]) is not None and content[1])
    return LocalSnapshot(
        head=head,
        diff=diff,
        diff_sha=hashlib.sha256(diff).hexdigest(),
        changed=tuple(sorted(status.changed)),
        untracked=tuple(sorted(status.untracked)),
        digests={p: None if c is None else hashlib.sha256(c[0]).hexdigest() for p, c in contents.items()},
        executable=executable,
        max_bytes=max_bytes,
        untracked_bytes={p: c[0] for p in status.untracked if (c := contents[p]) is not None},
    )


def _refuse_unsnapshottable(status: LocalStatus) -> None:
    if status.counts.conflicted:
        raise SpotPatchError(ErrorCode.REPO_BLOCKED, "the repository cannot be isolated: conflicts")
    for rel in status.untracked:
        if rel.endswith("/"):
            raise SpotPatchError(ErrorCode.REPO_BLOCKED, f"untracked {rel} is a nested repository, not a regular file")
    if status.symlinks:
        raise SpotPatchError(ErrorCode.REPO_BLOCKED, f"the local change to {status.symlinks[0]} is a symbolic link")


def _diff_cap(max_bytes: int) -> int:
    return 2 * max_bytes + _DIFF_SLACK


async def _local_diff(root: Path, head: str) -> bytes:
    """``git diff-index --binary`` of ``head`` against the working tree (staged + unstaged)."""
    result = await run_git(
        ["diff-index", "--binary", "--full-index", "--no-renames", "--no-ext-diff", "--no-textconv",
         "--no-color", "--ignore-submodules=all", "--src-prefix=a/", "--dst-prefix=b/", head, "--"],
        cwd=root,
        read_only=True,
        timeout=120,
    )
    return result.stdout


def _read_user_files(root: Path, paths: list[str], max_bytes: int) -> dict[str, tuple[bytes, bool] | None]:
    """Each path's bytes and executable bit (``None``: absent) within one byte budget."""
    out: dict[str, tuple[bytes, bool] | None] = {}
    budget = max_bytes
    for rel in paths:
        found = read_regular(root, rel, budget)
        out[rel] = found
        if found is not None:
            budget -= len(found[0])
    return out


# ---------------------------------------------------------------- install


async def install_snapshot(snap: LocalSnapshot, root: Path, worktree: Path) -> None:
    """Apply ``snap.diff`` in ``worktree`` (``git apply``, its working files only) and write the
    snapshot's untracked bytes there (executable bit kept; no symlink followed or created).

    Raises ``SpotPatchError(REPO_BLOCKED)`` when git cannot apply the diff there, retryable when an
    untracked file vanished since the snapshot.
    """
    if snap.diff:
        result = await run_git(
            ["apply", "--binary", "--whitespace=nowarn", "-"],
            cwd=worktree, input=snap.diff, check=False, timeout=120, redact=[worktree],
        )
        if result.returncode != 0:
            raise SpotPatchError(
                ErrorCode.REPO_BLOCKED,
                "the local changes could not be reproduced in the worktree: " + describe(result, worktree, root),
            )
    await anyio.to_thread.run_sync(_copy_untracked, snap, worktree)


def _copy_untracked(snap: LocalSnapshot, worktree: Path) -> None:
    for rel in snap.untracked:
        data = snap.untracked_bytes.get(rel)
        if data is None:  # listed by git status, gone before it could be read
            raise _race(f"{rel} vanished")
        _write_file(worktree, rel, data, rel in snap.executable)


def _write_file(worktree: Path, rel: str, data: bytes, executable: bool) -> None:
    """Write ``data`` at ``worktree/rel``, creating real parent directories; never through a symlink."""
    parent = worktree
    for part in rel.split("/")[:-1]:
        parent = parent / part
        try:
            st = os.lstat(parent)
        except FileNotFoundError:
            os.mkdir(parent, 0o755)
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise SpotPatchError(ErrorCode.REPO_BLOCKED, f"untracked {rel} lies under a path that is not a directory")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(parent / rel.rsplit("/", 1)[-1], flags, 0o644)
    try:
        with os.fdopen(fd, "wb", closefd=False) as out:
            out.write(data)
        if hasattr(os, "fchmod"):  # Windows: no executable bit to keep
            os.fchmod(fd, 0o755 if executable else 0o644)
    finally:
        os.close(fd)


# ---------------------------------------------------------------- verify


async def verify_snapshot(snap: LocalSnapshot, root: Path, worktree: Path) -> None:
    """Re-read ``root`` and compare with ``snap`` and with what ``worktree`` now holds (docs/design.md §8).

    In order: HEAD, the diff's hash, the untracked path set, each path's digest in ``root``; any
    difference raises retryable ``SpotPatchError(REPO_BLOCKED)`` "the working tree changed while the
    job was starting (…); try again". Then each path's digest in ``worktree`` must equal the
    snapshot's, else non-retryable ``REPO_BLOCKED`` (git reproduced a change differently, e.g. under a
    line-ending or filter attribute).
    """
    if await resolve_head(root) != snap.head:
        raise _race("HEAD moved")
    diff = await _local_diff(root, snap.head)
    if len(diff) > _diff_cap(snap.max_bytes) or hashlib.sha256(diff).hexdigest() != snap.diff_sha:
        raise _race("the staged or unstaged changes differ")
    status = await read_status(root)
    if sorted(status.untracked) != list(snap.untracked):
        raise _race("untracked files were added or removed")
    user, copied = await anyio.to_thread.run_sync(_digests_both, snap, root, worktree)
    for rel, digest in snap.digests.items():
        if user[rel] != digest:
            raise _race(f"{rel} changed")
    for rel, digest in snap.digests.items():
        if copied[rel] != digest:
            raise SpotPatchError(
                ErrorCode.REPO_BLOCKED,
                f"the local change to {rel} could not be reproduced byte for byte in the worktree "
                "(a line-ending or filter attribute?)",
            )


Digests = dict[str, str | None]


def _digests_both(snap: LocalSnapshot, root: Path, worktree: Path) -> tuple[Digests, Digests]:
    def digest(base: Path, rel: str) -> str | None:
        try:
            found = read_regular(base, rel, snap.max_bytes)
        except SpotPatchError:
            return "!not-a-regular-file-or-too-large"  # never equals a digest
        return None if found is None else hashlib.sha256(found[0]).hexdigest()

    return ({rel: digest(root, rel) for rel in snap.digests}, {rel: digest(worktree, rel) for rel in snap.digests})


# ---------------------------------------------------------------- reading without following links


def read_regular(root: Path, rel: str, max_bytes: int) -> tuple[bytes, bool] | None:
    """The bytes and executable bit of the regular file ``root/rel``; ``None`` when it is absent.

    No symlink is followed, neither the last component (``O_NOFOLLOW``) nor a parent directory (each
    opened relative to the previous one); a FIFO is opened non-blocking and refused. Raises
    ``SpotPatchError(REPO_BLOCKED)`` for a symlink or non-regular item, or more than ``max_bytes``
    bytes (``local-changes-over-limit``).
    """
    try:
        fd = _open_nofollow(root, rel)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        if not _symlinked_parent(root, rel):
            return None  # a parent is now a regular file: the path is absent
        raise SpotPatchError(ErrorCode.REPO_BLOCKED, f"{rel} lies under a symbolic link") from None
    except OSError:
        raise SpotPatchError(ErrorCode.REPO_BLOCKED, f"{rel} is a symbolic link or not a regular file") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SpotPatchError(ErrorCode.REPO_BLOCKED, f"{rel} is not a regular file")
        too_many = f"more than localSnapshotMaxBytes in the local changes (at {rel})"
        if st.st_size > max_bytes:
            raise _over_limit(too_many)
        chunks, total = [], 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise _over_limit(too_many)
        return b"".join(chunks), bool(st.st_mode & 0o111)
    finally:
        os.close(fd)


def _open_nofollow(root: Path, rel: str) -> int:
    parts = rel.split("/")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    if not _POSIX_DIR_FD:  # Windows: no dir_fd; lstat each component first (a small TOCTOU window)
        path = root
        for part in parts:
            path = path / part
            if stat.S_ISLNK(os.lstat(path).st_mode):
                raise OSError("symbolic link")
        return os.open(path, flags)
    dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            next_fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
            os.close(dir_fd)
            dir_fd = next_fd
        return os.open(parts[-1], flags, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def _symlinked_parent(root: Path, rel: str) -> bool:
    path = root
    for part in rel.split("/")[:-1]:
        path = path / part
        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                return True
        except OSError:
            return False
    return False


def _race(what: str) -> SpotPatchError:
    return SpotPatchError(ErrorCode.REPO_BLOCKED, _RACE.format(what), retryable=True)


def _over_limit(what: str) -> SpotPatchError:
    return SpotPatchError(ErrorCode.REPO_BLOCKED, f"local-changes-over-limit: {what}")

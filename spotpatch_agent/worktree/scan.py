"""What a check may not leave in a job worktree before host git reads it again (issue 25; docs/security.md §6).

A check writes anywhere in the worktree. After it, the engine runs git on the host there (the fingerprint's
``git status``, later ``git add --all`` and the diffs), unconfined. Three things a check can leave make that
unsafe or unbounded, and none of them is a change a user could review:

- a ``.git`` (directory, gitfile or symlink; any name that is ``.git`` on HFS+ or NTFS) anywhere below the
  worktree root: a repository of the check's
  making, with its own config (filters, hooks, fsmonitor). git does not descend into it today (every call
  ignores submodules: git_runner.py), but nothing of it may be left for a later command to find;
- a FIFO, socket or device file: git opens a ``.gitignore`` or ``.gitattributes`` wherever it is, and a FIFO
  there blocks git until its timeout (the job stalls 120 s);
- a regular file over ``editableFileMaxBytes`` that was not there (same size, mtime and inode) before the
  check: ``git add --all`` would write it into the user's object store, where it stays as an unreachable
  object long after validation rejected the changeset.

:func:`scan_worktree` walks the whole tree with ``lstat`` semantics (``os.scandir``, no symlink followed, no
directory skipped: an ignored directory is walked too) and names each :class:`Hazard`.
:func:`remove_hazards` deletes the ``.git``s and special files (a ``.git`` directory with everything in it),
again without following a symlink, so that no host git command ever runs on a tree that holds one; the root's
own ``.git`` (the worktree's gitfile; a directory where a check runs in a checkout itself) is the only one
allowed. A large file is named, not deleted (it may be the user's tracked file, rewritten), and
:func:`oversized_to_stage` — asked by validation before it stages — keeps it out of the object store.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import anyio

from spotpatch_agent.errors import JobFailure
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.tree_remove import DIR_FLAGS, remove_tree_at
from spotpatch_agent.worktree.git import run_git

__all__ = ["MAX_HAZARDS", "RULE", "UNLISTED", "Hazard", "TreeScan", "after_check", "before_check", "describe_hazards",
           "left_behind", "oversized_to_stage", "remove_hazards", "scan_in_thread", "scan_worktree"]

#: What a check must not leave, for messages.
RULE = ("a check must not leave a git repository (.git) or a FIFO, socket or device file in the worktree, "
        "nor a file over editableFileMaxBytes that git would stage (a change holding one is rejected)")

#: Why a directory below the root that cannot be listed (nested past PATH_MAX from ``/``) is a hazard.
UNLISTED = "a directory SpotPatch cannot list, where git could still read"

#: Hazards named per scan (the walk stops collecting after this many; one is enough to refuse the tree).
MAX_HAZARDS = 20

#: A large file as seen before a check: (relative path, size in bytes, mtime in ns, inode).
LargeFile = tuple[str, int, int, int]


@dataclass(frozen=True)
class Hazard:
    """One entry host git must not meet: ``path`` relative POSIX, ``reason`` a short phrase for the model
    and the job's error (``"a git repository inside the worktree"``), ``is_dir`` whether it is a directory,
    ``large`` whether it is only too big (harmless when git ignores it: ``git add --all`` never stages it)."""

    path: str
    reason: str
    is_dir: bool = False
    large: bool = False


@dataclass(frozen=True)
class TreeScan:
    """A walk's result: the ``hazards`` found (at most :data:`MAX_HAZARDS`) and every regular file over
    the size cap (``large``), to compare the tree after a check with the tree before it."""

    hazards: tuple[Hazard, ...] = ()
    large: frozenset[LargeFile] = field(default_factory=frozenset)


#: Code points HFS+ ignores in a name (git's ``is_hfs_dotgit``): ``.g\u200cit`` is ``.git`` there.
_HFS_IGNORED = frozenset("\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                         "\u206a\u206b\u206c\u206d\u206e\u206f\ufeff")


def _is_dotgit(name: str) -> bool:
    """Whether ``name`` is ``.git`` on some file system git runs on: any case, HFS+'s ignored code points
    removed, NTFS's trailing dots and spaces stripped, or NTFS's 8.3 name ``GIT~1`` (git's ``is_hfs_dotgit``,
    ``is_ntfs_dotgit``)."""
    folded = "".join(c for c in name if c not in _HFS_IGNORED).casefold().rstrip(". ")
    return folded in (".git", "git~1")


def _kind(mode: int) -> str | None:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe): git would block reading it"
    if stat.S_ISSOCK(mode):
        return "a socket file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    return None


def scan_worktree(root: Path, *, max_file_bytes: int, known_large: frozenset[LargeFile] | None = None) -> TreeScan:
    """Walk ``root`` (not following symlinks) and return what host git must not meet (module docstring).

    ``max_file_bytes``: the size cap (``editableFileMaxBytes``). ``known_large``: the ``large`` set of the scan
    before the check; a regular file over the cap is a hazard unless it is in that set unchanged (``None``:
    nothing is compared, only recorded). Raises ``OSError`` when the root itself cannot be listed. A directory
    below it is never skipped: one without read permission is made its owner's (``u+rwx``: the worktree is the
    engine's) and listed; one that still cannot be listed is a hazard (:data:`UNLISTED`), since git may read in
    it all the same — it opens ``<dir>/.gitattributes`` by name (search permission is enough), and it lists by
    the path *relative* to the worktree, which stays under PATH_MAX where the absolute one passes it."""
    hazards: list[Hazard] = []
    large: set[LargeFile] = set()
    base = os.fspath(root)
    stack: list[str] = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            entries = _listing(base, rel_dir)
        except FileNotFoundError:
            if not rel_dir:
                raise
            continue  # gone since its parent was listed
        except OSError as exc:
            if not rel_dir:
                raise
            hazards.append(Hazard(rel_dir, f"{UNLISTED} ({exc.strerror or type(exc).__name__})", is_dir=True))
            if len(hazards) >= MAX_HAZARDS:
                return TreeScan(tuple(hazards), frozenset(large))
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:  # gone since the listing
                continue
            except OSError as exc:  # its path is past PATH_MAX from / (git's relative one need not be)
                hazards.append(Hazard(rel, f"{UNLISTED} ({exc.strerror or type(exc).__name__})", is_dir=True))
                if len(hazards) >= MAX_HAZARDS:
                    return TreeScan(tuple(hazards), frozenset(large))
                continue
            mode = st.st_mode
            if _is_dotgit(entry.name):
                if rel_dir or entry.name.casefold() != ".git" or not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                    hazards.append(Hazard(rel, "a git repository (.git) inside the worktree",
                                          is_dir=stat.S_ISDIR(mode)))
                continue  # the root's own .git: git's, never walked
            if stat.S_ISDIR(mode):
                stack.append(rel)
            elif stat.S_ISREG(mode):
                if st.st_size > max_file_bytes:
                    key = (rel, st.st_size, st.st_mtime_ns, st.st_ino)
                    large.add(key)
                    if known_large is not None and key not in known_large:
                        hazards.append(Hazard(rel, f"a file of {st.st_size} bytes, over editableFileMaxBytes = "
                                                   f"{max_file_bytes}", large=True))
            elif not stat.S_ISLNK(mode):
                hazards.append(Hazard(rel, _kind(mode) or "a special file"))
            if len(hazards) >= MAX_HAZARDS:
                return TreeScan(tuple(hazards), frozenset(large))
    return TreeScan(tuple(hazards), frozenset(large))


def _listing(base: str, rel_dir: str) -> list[os.DirEntry[str]]:
    """The entries of ``rel_dir`` below ``base``; a directory without read permission (a check's ``chmod 311``)
    is given ``u+rwx`` and listed again. Raises ``OSError`` when it still cannot be listed."""
    path = os.path.join(base, rel_dir) if rel_dir else base
    try:
        with os.scandir(path) as listing:
            return list(listing)
    except PermissionError:
        if not rel_dir:
            raise
        st = os.lstat(path)  # listed as a directory, not a symlink (nothing of the check runs any more)
        if not stat.S_ISDIR(st.st_mode):
            raise
        os.chmod(path, stat.S_IMODE(st.st_mode) | stat.S_IRWXU)
        with os.scandir(path) as listing:
            return list(listing)


def remove_hazards(root: Path, hazards: tuple[Hazard, ...]) -> None:
    """Delete each hazard below ``root`` without following a symlink, at any depth: its parent directory is
    opened one component at a time from the root (``O_NOFOLLOW``: a symlinked component means the tree moved
    since the scan, and is refused), then a directory is removed with everything in it
    (:func:`~spotpatch_agent.tree_remove.remove_tree_at`) and anything else unlinked, relative to that
    descriptor — so a hazard past PATH_MAX from ``/`` goes too. A directory on the way the check made
    unreadable (``chmod 000``) is made its owner's again. Raises ``OSError`` when one cannot be removed; one
    already gone is fine."""
    real_root = os.path.realpath(root)
    for hazard in hazards:
        *parents, name = hazard.path.split("/")
        parent = _open_parent(real_root, parents, hazard.path)
        if parent is None:
            continue
        try:
            try:
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(st.st_mode):
                remove_tree_at(parent, name)
            else:
                os.unlink(name, dir_fd=parent)
        finally:
            os.close(parent)


def _open_parent(real_root: str, parts: list[str], shown: str) -> int | None:
    """A descriptor of ``real_root/parts…`` opened component by component without following a symlink;
    ``None`` when a component is gone. Raises ``OSError`` naming ``shown`` when one is not a directory."""
    fd = os.open(real_root, DIR_FLAGS)
    for part in parts:
        try:
            try:
                child = os.open(part, DIR_FLAGS, dir_fd=fd)
            except PermissionError:
                os.chmod(part, stat.S_IRWXU, dir_fd=fd)  # a directory the check made unreadable
                child = os.open(part, DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            os.close(fd)
            return None
        except OSError:
            os.close(fd)
            raise OSError(f"{shown}: its directory moved during the scan") from None
        os.close(fd)
        fd = child
    return fd


def describe_hazards(hazards: tuple[Hazard, ...]) -> str:
    """``a/.git (a git repository (.git) inside the worktree), b (a FIFO …)`` — relative paths only."""
    shown = ", ".join(f"{h.path} ({h.reason})" for h in hazards[:5])
    return shown + (f" and {len(hazards) - 5} more" if len(hazards) > 5 else "")


def left_behind(check_id: str, found: tuple[Hazard, ...]) -> str:
    """What the model (``run_check``) or the job's error is told about the hazards ``after_check`` found."""
    removed = [h.path for h in found if not h.large]
    kept = [h.path for h in found if h.large]
    text = f"Check {check_id} left {describe_hazards(found)} in the worktree."
    if removed:
        text += (" SpotPatch removed " + ("it" if len(found) == 1 else ", ".join(removed))
                 + " before reading the worktree again.")
    if kept:
        text += (" " + ", ".join(kept) + (" stays" if len(kept) == 1 else " stay") + ", but a change that holds "
                 "such a file is rejected: delete or shrink it in the check, or write it under an ignored directory.")
    return text + f" Rule: {RULE}."


async def before_check(root: Path, *, max_file_bytes: int) -> TreeScan:
    """The scan before a check runs (its ``large`` set is what :func:`after_check` compares with). Raises
    ``JobFailure(CHECK_FAILED)`` when the tree already holds a hazard: no check, and no git command, runs on it."""
    scan = await anyio.to_thread.run_sync(partial(scan_worktree, root, max_file_bytes=max_file_bytes))
    if scan.hazards:
        raise JobFailure(ErrorCode.CHECK_FAILED, f"The worktree holds {describe_hazards(scan.hazards)}; no check "
                         f"or git command runs on it ({RULE}).")
    return scan


async def after_check(root: Path, *, max_file_bytes: int, before: TreeScan) -> tuple[Hazard, ...]:
    """Scan ``root`` after a check; remove every ``.git`` and special file it left before host git reads
    the tree, and name every new or changed file over the cap that git would stage (``git check-ignore``,
    run once nothing else is left: it reads ignore files only; a dependency install or a build output under
    an ignored directory is the check's business). A large file is kept — it may be a tracked file of the
    user's, a lockfile the check rewrote — and :func:`oversized_to_stage` keeps it out of the object store.
    Returns what was found (``large`` ones kept, the others removed; empty: nothing). Raises
    ``JobFailure(CHECK_FAILED)`` when one cannot be removed, ``GitError`` when ``check-ignore`` times out.
    Runs to the end under cancellation (a killed check's leftovers must still go before the worktree is
    used again)."""
    with anyio.CancelScope(shield=True):
        scan = await _scan(root, max_file_bytes, before)
        removed = tuple(h for h in scan.hazards if not h.large)
        if removed:
            try:
                await anyio.to_thread.run_sync(remove_hazards, root, removed)
            except OSError:
                _still(removed)
            scan = await _scan(root, max_file_bytes, before)
            _still(tuple(h for h in scan.hazards if not h.large))
        large = tuple(h for h in scan.hazards if h.large)
        if large:
            ignored = await _ignored(root, [h.path for h in large])
            large = tuple(h for h in large if h.path not in ignored)
    return removed + large


async def oversized_to_stage(root: Path, *, max_file_bytes: int) -> tuple[str, int] | None:
    """The first file ``git add --all`` in ``root`` would store as a new blob over ``max_file_bytes``, as
    ``(relative path, size)``, or ``None``: an untracked file git does not ignore, or a tracked file git
    sees changed whose size is not its index entry's (a file the same size as before — a rewritten lockfile
    — adds at most what the repository already holds). Checked before staging, so a check's 200 MB file never
    reaches the user's object store (issue 25). Raises ``GitError`` when git fails."""
    others = await run_git(["ls-files", "-z", "--others", "--exclude-standard"], cwd=root, read_only=True,
                           redact=[root], timeout=300)
    changed = await run_git(["diff-files", "-z", "--name-only", "--ignore-submodules=all"], cwd=root,
                            read_only=True, redact=[root], timeout=300)
    big = partial(_big, root, max_file_bytes)
    for raw in others.stdout.split(b"\0"):
        if raw and (size := big(raw)) is not None:
            return os.fsdecode(raw), size
    tracked = {raw: size for raw in changed.stdout.split(b"\0") if raw and (size := big(raw)) is not None}
    if not tracked:
        return None
    listed = await run_git(["ls-files", "-s", "-z", "--", *(":(literal)" + os.fsdecode(r) for r in tracked)],
                           cwd=root, read_only=True, redact=[root])
    oids = {rec.split(b"\t", 1)[1]: rec.split(b" ")[1] for rec in listed.stdout.split(b"\0") if b"\t" in rec}
    sizes = await run_git(["cat-file", "--batch-check"], cwd=root, read_only=True, redact=[root],
                          input=b"".join(oid + b"\n" for oid in oids.values()))
    recorded = dict(zip(oids, (line.split(b" ")[-1] for line in sizes.stdout.splitlines()), strict=False))
    for raw, size in tracked.items():
        if recorded.get(raw) != str(size).encode():
            return os.fsdecode(raw), size
    return None


def _big(root: Path, max_file_bytes: int, raw: bytes) -> int | None:
    try:
        st = os.lstat(os.path.join(os.fsencode(root), raw))
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) and st.st_size > max_file_bytes else None


async def scan_in_thread(root: Path, *, max_file_bytes: int) -> TreeScan:
    """:func:`scan_worktree` in a worker thread, nothing compared (so no large file is a hazard)."""
    return await anyio.to_thread.run_sync(partial(scan_worktree, root, max_file_bytes=max_file_bytes))


async def _scan(root: Path, max_file_bytes: int, before: TreeScan) -> TreeScan:
    return await anyio.to_thread.run_sync(partial(scan_worktree, root, max_file_bytes=max_file_bytes,
                                                  known_large=before.large))


def _still(hazards: tuple[Hazard, ...]) -> None:
    if hazards:
        raise JobFailure(ErrorCode.CHECK_FAILED, f"A check left {describe_hazards(hazards)} in the worktree and "
                         f"it could not be removed; the job stops before any git command reads the tree ({RULE}).")


async def _ignored(root: Path, paths: list[str]) -> set[str]:
    """The ``paths`` git ignores (``check-ignore`` with the index: a tracked file is never ignored). When git
    cannot tell (a path inside a submodule's directory), none: every one is reported."""
    data = b"".join(os.fsencode(p) + b"\0" for p in paths)
    out = await run_git(["check-ignore", "-z", "--stdin"], cwd=root, input=data, check=False, read_only=True,
                        redact=[root])
    if out.returncode not in (0, 1):
        return set()
    return {os.fsdecode(p) for p in out.stdout.split(b"\0") if p}

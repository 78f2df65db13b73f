"""Repository health (docs/design.md §8): may a job isolate this repository, and does it need consent?

A diagnosis of this instant, not a lock: creation, Apply and Revert re-read the disk themselves.
Nothing here writes — ``git status`` and ``git check-ignore`` run with ``GIT_OPTIONAL_LOCKS=0`` so they
never refresh the user's index, and an ``index.lock`` is only ever named, never deleted.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from spotpatch_agent.errors import GitError
from spotpatch_agent.protocol.models import HealthCounts, HealthDetail, Limits, RepoHealth
from spotpatch_agent.worktree.git import run_git
from spotpatch_agent.worktree.health_details import LOCAL_CHANGES, detail, health_message, template_folder
from spotpatch_agent.worktree.repo import RepoLayout, locate, operation_reasons, resolve_head, same_path

__all__ = ["repo_health", "read_status", "LocalStatus", "blocked_message", "hidden_non_regular", "over_limits",
           "health_message"]

#: Mode git reports for a symbolic link.
_SYMLINK_MODE = "120000"


@dataclass
class LocalStatus:
    """Parsed ``git status --porcelain=v2``: counts plus the paths behind them (relative POSIX).

    ``changed`` holds every tracked path with a staged or unstaged change (deleted ones included,
    submodules excluded), ``untracked`` every untracked path (a nested repository shows as
    ``dir/``), ``submodules`` every submodule with a changed commit or content, ``symlinks`` every
    changed path whose working-tree entry is a symbolic link, ``ignored_dirs`` the ignored
    directories (``dir/``; only when asked for), ``conflicted`` the unmerged paths.
    """

    counts: HealthCounts = field(default_factory=HealthCounts)
    changed: list[str] = field(default_factory=list)
    untracked: list[str] = field(default_factory=list)
    submodules: list[str] = field(default_factory=list)
    symlinks: list[str] = field(default_factory=list)
    ignored_dirs: list[str] = field(default_factory=list)
    conflicted: list[str] = field(default_factory=list)

    @property
    def dirty(self) -> bool:
        return bool(self.changed or self.untracked or self.submodules)


async def read_status(root: Path, *, ignored: bool = False) -> LocalStatus:
    """Staged, unstaged, untracked and conflicted entries of the working tree at ``root``.

    Uses ``git status --porcelain=v2 -z --untracked-files=all --no-renames`` (read-only), plus
    ``--ignored=matching`` when ``ignored`` (fills ``ignored_dirs``). Raises
    :class:`~spotpatch_agent.errors.GitError` if git fails.
    """
    args = ["status", "--porcelain=v2", "-z", "--untracked-files=all", "--no-renames", "--ignore-submodules=none"]
    if ignored:
        args.append("--ignored=matching")
    result = await run_git(args, cwd=root, read_only=True)
    return _parse_status(result.stdout)


def _parse_status(raw: bytes) -> LocalStatus:
    out = LocalStatus()
    fields = raw.split(b"\0")
    i = 0
    while i < len(fields):
        entry = fields[i].decode("utf-8", "surrogateescape")
        i += 1
        if not entry:
            continue
        kind = entry[0]
        if kind == "?":
            out.untracked.append(entry[2:])
            out.counts.untracked += 1
        elif kind == "!":
            if entry.endswith("/"):
                out.ignored_dirs.append(entry[2:])
        elif kind in "12":
            # 1 XY sub mH mI mW hH hI path / 2 XY sub mH mI mW hH hI score path
            parts = entry.split(" ", 8 if kind == "1" else 9)
            xy, sub, worktree_mode, path = parts[1], parts[2], parts[5], parts[-1]
            if kind == "2":
                i += 1  # the original path of a rename/copy follows as its own field
            out.counts.staged += xy[0] != "."
            out.counts.unstaged += xy[1] != "."
            _add_changed(out, path, sub, worktree_mode)
        elif kind == "u":
            # u XY sub m1 m2 m3 mW h1 h2 h3 path
            parts = entry.split(" ", 10)
            out.counts.conflicted += 1
            out.conflicted.append(parts[-1])
            _add_changed(out, parts[-1], parts[2], parts[6])
    return out


def _add_changed(out: LocalStatus, path: str, sub: str, worktree_mode: str) -> None:
    if sub.startswith("S"):
        out.submodules.append(path)
        return
    out.changed.append(path)
    if worktree_mode == _SYMLINK_MODE:
        out.symlinks.append(path)


async def repo_health(root: Path, limits: Limits) -> RepoHealth:
    """The health of the repository whose top level must be ``root`` (docs/design.md §8).

    Returns ``RepoHealth{state, reasons, counts, details}``:

    - ``blocked`` with one or more stable reasons — ``not-a-git-repository``, ``not-top-level``,
      ``head-unresolvable`` (unborn, or naming a missing ref or object), ``merge-in-progress``,
      ``rebase-in-progress``, ``am-in-progress``, ``cherry-pick-in-progress``,
      ``revert-in-progress``, ``bisect-in-progress``, ``conflicts``, ``index-locked`` (the git
      directory holds ``index.lock``; see :func:`blocked_message`), ``untracked-symlink``,
      ``untracked-not-regular`` (a nested repository, or a FIFO, socket or device anywhere in the
      non-ignored tree — git never lists those, so they are found by a directory walk),
      ``local-symlink`` (a staged or unstaged change leaves a symbolic link in the working tree),
      ``local-changes-over-limit`` (see :func:`over_limits`);
    - ``consent-required`` when healthy but with staged, unstaged or untracked changes (a changed
      submodule counts too; its state never enters a worktree);
    - ``clean`` otherwise.

    ``counts`` are entries of ``git status`` (a path staged and unstaged counts in both).
    ``details`` has one ``HealthDetail{reason, paths, morePaths, fix}`` per reason, in order (one
    ``local-changes`` detail when ``consent-required``): the relative paths the reason is about, untracked
    ones shown as their untracked folder (``.venv/``), and the fix (:mod:`.health_details`). Never
    writes. Raises :class:`~spotpatch_agent.errors.GitError` only when git itself misbehaves on
    a repository it did recognise.
    """
    layout = await locate(root)
    if layout is None:
        return _blocked(root, {"not-a-git-repository": []})
    if not same_path(layout.toplevel, root):
        return _blocked(root, {"not-top-level": []})
    found: dict[str, list[str]] = {}  # reason → the relative paths it is about, in order of discovery
    head = await resolve_head(root)
    if head is None:
        found["head-unresolvable"] = []
    for reason in operation_reasons(layout):
        found[reason] = [_lock_name(root, layout)] if reason == "index-locked" else []
    try:
        status = await read_status(root, ignored=True)
    except GitError:
        if head is None:  # e.g. HEAD holds the id of a missing object: git status itself refuses
            return _blocked(root, found)
        raise
    if status.counts.conflicted:
        found["conflicts"] = status.conflicted
    for reason, paths in _untracked_reasons(root, status.untracked).items():
        found.setdefault(reason, []).extend(paths)
    hidden = await hidden_non_regular(root, status.ignored_dirs)
    if hidden:
        found.setdefault("untracked-not-regular", []).extend(hidden)
    if status.symlinks:
        found["local-symlink"] = status.symlinks
    if over_limits(root, status, limits):
        found["local-changes-over-limit"] = [*status.changed, *status.untracked]
    if found:
        return await _blocked_with_folders(root, found, status, limits)
    if status.dirty:
        cache: dict[str, bool] = {}
        folders = await _untracked_dirs(root) if any(
            template_folder(root, rel, cache) for rel in status.untracked) else []
        changes = detail(root, LOCAL_CHANGES, [*status.changed, *status.submodules, *status.untracked],
                         untracked=status.untracked, untracked_dirs=folders)
        return RepoHealth(state="consent-required", counts=status.counts, details=[changes])
    return RepoHealth(state="clean", counts=status.counts)


def _blocked(root: Path, found: dict[str, list[str]], counts: HealthCounts | None = None,
             details: list[HealthDetail] | None = None) -> RepoHealth:
    details = details if details is not None else [detail(root, reason, paths) for reason, paths in found.items()]
    return RepoHealth(state="blocked", reasons=list(found), counts=counts or HealthCounts(), details=details)


_FOLDER_REASONS = ("untracked-symlink", "untracked-not-regular", "local-changes-over-limit")


async def _blocked_with_folders(root: Path, found: dict[str, list[str]], status: LocalStatus,
                                limits: Limits) -> RepoHealth:
    """Blocked health whose untracked paths are shown as git's untracked folders (``dir/``): one more
    read-only ``git status --untracked-files=normal`` (:func:`_untracked_dirs`), run only when a reason
    lists untracked paths. A ``consent-required`` tree pays it only when an untracked path lies in a
    virtualenv, ``node_modules`` or build folder."""
    folders = await _untracked_dirs(root) if any(reason in found for reason in _FOLDER_REASONS) else []
    sizes = _local_size(root, status) if "local-changes-over-limit" in found else None
    details = [detail(root, reason, paths, untracked=status.untracked, untracked_dirs=folders, limits=limits,
                      sizes=sizes) for reason, paths in found.items()]
    return _blocked(root, found, status.counts, details)


async def _untracked_dirs(root: Path) -> list[str]:
    """git's collapsed untracked folders (``dir/``: nothing in them is tracked), from a read-only
    ``git status --untracked-files=normal``; empty if git fails (paths are then shown one by one)."""
    result = await run_git(["status", "--porcelain=v2", "-z", "--untracked-files=normal"], cwd=root,
                           check=False, read_only=True)
    if result.returncode != 0:
        return []
    return [f[2:].decode("utf-8", "surrogateescape") for f in result.stdout.split(b"\0")
            if f.startswith(b"? ") and f.endswith(b"/")]


def blocked_message(health: RepoHealth) -> str:
    """A one-line explanation of a blocked ``health`` for an error message (relative paths only): each
    reason with its paths and fix (:func:`~spotpatch_agent.worktree.health_details.health_message`).

    ``index-locked`` names the lock file relative to the root (``.git/index.lock``); SpotPatch never
    deletes the lock (another git process may hold it). docs/design.md §8."""
    return health_message(health)


def _lock_name(root: Path, layout: RepoLayout) -> str:
    lock = layout.git_dir / "index.lock"
    try:
        return lock.relative_to(Path(os.path.realpath(root))).as_posix()
    except ValueError:
        return "index.lock in the repository's git directory"


async def hidden_non_regular(root: Path, ignored_dirs: list[str]) -> list[str]:
    """Non-ignored FIFOs, sockets and devices under ``root`` (relative POSIX paths, sorted).

    ``git status`` never lists such entries, so a snapshot would miss them silently; this walks the
    working tree (no symlink followed) skipping ``.git``, the ``ignored_dirs`` and nested
    repositories, then drops what ``git check-ignore`` says is ignored. Fails closed: if
    check-ignore fails, every candidate counts. docs/design.md §8 "non-regular untracked items".
    """
    skip = {d.rstrip("/") for d in ignored_dirs}
    candidates = await anyio.to_thread.run_sync(_walk_non_regular, root, skip)
    if not candidates:
        return []
    data = b"".join(c.encode("utf-8", "surrogateescape") + b"\0" for c in candidates)
    result = await run_git(["check-ignore", "-z", "--stdin"], cwd=root, input=data, check=False, read_only=True)
    ignored = set()
    if result.returncode in (0, 1):
        ignored = {f.decode("utf-8", "surrogateescape") for f in result.stdout.split(b"\0") if f}
    return sorted(c for c in candidates if c not in ignored)


def _walk_non_regular(root: Path, skip: set[str]) -> list[str]:
    found: list[str] = []
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(root / rel_dir if rel_dir else root) as it:
                entries = list(it)
        except OSError:
            continue  # vanished or unreadable: git status reports what it could not read
        if rel_dir and any(e.name == ".git" for e in entries):
            continue  # a nested repository or submodule: not part of this working tree
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if entry.is_symlink() or entry.is_file(follow_symlinks=False):
                continue  # symlinks are judged from git status (untracked) or are tracked content
            if entry.is_dir(follow_symlinks=False):
                if rel != ".git" and rel not in skip:
                    stack.append(rel)
            else:
                found.append(rel)
    return found


def _untracked_reasons(root: Path, untracked: list[str]) -> dict[str, list[str]]:
    """``untracked-symlink`` / ``untracked-not-regular`` → the untracked paths behind each."""
    reasons: dict[str, list[str]] = {}
    for rel in untracked:
        try:
            st = os.lstat(root / rel.rstrip("/"))
        except OSError:
            continue  # vanished since status ran; the next check will see the new state
        if stat.S_ISLNK(st.st_mode):
            reasons.setdefault("untracked-symlink", []).append(rel)
        elif not stat.S_ISREG(st.st_mode):
            reasons.setdefault("untracked-not-regular", []).append(rel)
    return reasons


def _local_size(root: Path, status: LocalStatus) -> tuple[int, int]:
    """``(paths, bytes)`` of the local changes: changed plus untracked paths, and the bytes of their
    regular working-tree files (the measure of :func:`over_limits`)."""
    paths = set(status.changed) | set(status.untracked)
    total = 0
    for rel in paths:
        try:
            st = os.lstat(root / rel.rstrip("/"))
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            total += st.st_size
    return len(paths), total


def over_limits(root: Path, status: LocalStatus, limits: Limits) -> bool:
    """Whether the local changes exceed the snapshot limits (docs/design.md §4, §8).

    More than ``localSnapshotMaxFiles`` changed plus untracked paths, or more than
    ``localSnapshotMaxBytes`` bytes in those paths' regular working-tree files.
    """
    paths = set(status.changed) | set(status.untracked)
    if len(paths) > limits.get("localSnapshotMaxFiles"):
        return True
    budget = limits.get("localSnapshotMaxBytes")
    total = 0
    for rel in paths:
        try:
            st = os.lstat(root / rel.rstrip("/"))
        except OSError:
            continue  # deleted in the working tree: no bytes to snapshot
        if stat.S_ISREG(st.st_mode):
            total += st.st_size
            if total > budget:
                return True
    return False

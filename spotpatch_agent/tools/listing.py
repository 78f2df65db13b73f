"""The allowed-file listing of a job worktree (docs/design.md §7, docs/architecture.md *Cost model*).

:class:`Listing` is one version's answer. :func:`full_listing` checks every path git lists on the
filesystem; :func:`index_listing` takes the tracked side from git's index (:mod:`.git_index`) and checks on
disk only what may differ from it. Both apply the path policy's name rules
(:func:`~spotpatch_agent.policy.paths.is_readable_name`, :func:`~spotpatch_agent.policy.paths.readable_names`)
and give the same files (tests/tools/test_scale_equivalence.py). ``WorktreeContext`` caches the result per
version and decides which one to use.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from spotpatch_agent.errors import GitError
from spotpatch_agent.policy.paths import is_readable_name
from spotpatch_agent.tools._git import GitOutput
from spotpatch_agent.tools.git_index import GitCall, GitIndex


@dataclass(frozen=True)
class Listing:
    """Allowed files of one worktree version: sorted relative POSIX ``files``; ``truncated`` when git's
    listing exceeded the output bound (very large repositories)."""

    files: tuple[str, ...]
    truncated: bool

    @functools.cached_property
    def file_set(self) -> frozenset[str]:
        """``files`` as a set, for membership tests."""
        return frozenset(self.files)

    def matching(self, pattern: str, match: Callable[[str], object]) -> list[str]:
        """The files that ``match`` (from :func:`~spotpatch_agent.tools.globs.compile_glob` of ``pattern``)
        accepts, in order.

        For ``**``, which accepts every path without a "." or ".." segment, a single look at the joined
        listing usually shows that no listed path even has a segment starting with "." (then all match)."""
        if pattern == "**":
            joined = "\n".join(self.files)
            if "/." not in joined and "\n." not in joined and not joined.startswith("."):
                return list(self.files)
        return [path for path in self.files if match(path)]


async def full_listing(root: Path, git: GitCall, max_bytes: int) -> Listing:
    """Every path of ``git ls-files --cached --others --exclude-standard`` checked on the filesystem
    (:func:`filter_listing`). ``truncated`` when git's output passed its bound (the last entry is dropped)."""
    out = await git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
    raw = out.stdout.split(b"\0")
    if out.truncated and raw:
        raw.pop()  # the last entry may be cut
    files = await anyio.to_thread.run_sync(filter_listing, root, raw, max_bytes)
    return Listing(files=files, truncated=out.truncated)


async def index_listing(
    root: Path, git: GitCall, index: GitIndex, max_bytes: int, dirty: Callable[[], Awaitable[bytes | None]]
) -> Listing | None:
    """The listing from git's index, valid only while no check ran (``WorktreeContext.mark_external_change``).

    Tracked entries come from ``git ls-files -s --debug`` (:meth:`GitIndex.entries`: mode and the size git
    recorded from ``lstat``). ``dirty()`` names (NUL-separated) the tracked paths that may differ from the
    index, or returns None when it cannot tell. Those, the untracked files (``git ls-files --others
    --exclude-standard``), unmerged, empty and unusual entries get the full filesystem check. The remaining
    entries are on disk exactly as the index says: regular files (mode 100644/100755) of the recorded size,
    under real directories (git never tracks a path through a symlink). Symlinks (120000) and submodules
    (160000) are dropped. Returns None (caller falls back to :func:`full_listing`) when any output is
    truncated or unexpected.
    """
    tracked: list[tuple[list[str], list[bytes]] | None] = []
    others: list[GitOutput] = []

    async def index_side() -> None:
        changed = await dirty()
        if changed is None:
            tracked.append(None)
            return
        base = await index.entries(max_bytes)
        tracked.append(None if base is None else base.split(changed))

    async def others_side() -> None:
        others.append(await git("ls-files", "-z", "--others", "--exclude-standard"))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(index_side)
            tg.start_soon(others_side)
    except BaseExceptionGroup as group:  # one side's git failed: the tool's own error, not a group of them
        raise _only_git_errors(group) from None
    split = tracked[0]
    if split is None or others[0].truncated:
        return None
    trusted, check = split
    check.extend(item for item in others[0].stdout.split(b"\0") if item)
    if check:
        files = await anyio.to_thread.run_sync(_merge_checked, root, trusted, check, max_bytes)
    else:
        files = tuple(trusted)  # the index is sorted by path bytes, which is str order for UTF-8
    return Listing(files=files, truncated=False)


def _only_git_errors(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first :class:`GitError` of ``group`` when every exception in it (nested groups included) is one — what
    the executor answers as the tool's failure; else ``group`` itself (a bug, reported as such)."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(exc.exceptions)
        else:
            leaves.append(exc)
    return leaves[0] if leaves and all(isinstance(e, GitError) for e in leaves) else group


def filter_listing(root: Path, raw: list[bytes], max_bytes: int) -> tuple[str, ...]:
    """The paths of ``raw`` (git's path bytes) that are allowed files, sorted, each once: UTF-8,
    :func:`~spotpatch_agent.policy.paths.is_readable_name`, every parent a real directory (no symlink), a
    regular file of at most ``max_bytes`` bytes. Runs in a worker thread (one ``lstat`` per path)."""
    # Hot loop (20k+ paths): string paths instead of pathlib, one lstat per file, parent directories
    # checked once (an ok directory implies all its ancestors were checked and are real directories).
    dirs_ok: dict[str, bool] = {"": True}
    kept: set[str] = set()
    base = os.fspath(root)
    join = os.path.join
    lstat = os.lstat
    is_reg = stat.S_ISREG
    for item in raw:
        try:
            rel = item.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if not rel or rel in kept or not is_readable_name(rel):
            continue
        parent = rel.rpartition("/")[0]
        ok = dirs_ok.get(parent)
        if ok is None:
            ok = _dir_ok(base, parent, dirs_ok)
        if not ok:
            continue
        try:
            st = lstat(join(base, rel))
        except OSError:
            continue
        if is_reg(st.st_mode) and st.st_size <= max_bytes:
            kept.add(rel)
    return tuple(sorted(kept))


def _merge_checked(root: Path, trusted: list[str], check: list[bytes], max_bytes: int) -> tuple[str, ...]:
    kept = set(trusted)
    kept.update(filter_listing(root, check, max_bytes))
    return tuple(sorted(kept))


def _dir_ok(base: str, rel_dir: str, cache: dict[str, bool]) -> bool:
    """Whether every component of ``rel_dir`` (relative to ``base``) is a real directory (no symlink)."""
    ok = cache.get(rel_dir)
    if ok is None:
        parent = rel_dir.rpartition("/")[0]
        ok = _dir_ok(base, parent, cache)
        if ok:
            try:
                ok = stat.S_ISDIR(os.lstat(os.path.join(base, rel_dir)).st_mode)
            except OSError:
                ok = False
        cache[rel_dir] = ok
    return ok


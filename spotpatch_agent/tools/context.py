"""The worktree as the tools see it: version counter, per-version caches, listing, fingerprint.

One :class:`WorktreeContext` per job worktree (owned by the executor). ``version`` starts at 0 and is bumped
by every write that touched the disk (and by :meth:`WorktreeContext.bump` for host-side changes such as a
check that rewrote files); listings and reads are cached per version only, so a read after a write can
never return stale content (DESIGN.md §6 "Caches of listings and reads are per worktree version").
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
from wcmatch import glob as wcglob

from spotpatch_agent.policy.paths import (
    BOM,
    PathDenied,
    is_ignored,
    is_protected,
    load_allowed,
    normalize_rel_path,
)
from spotpatch_agent.protocol.models import Limits
from spotpatch_agent.tools._git import GitOutput, run_git

logger = logging.getLogger(__name__)

_GLOB_FLAGS = wcglob.GLOBSTAR | wcglob.BRACE | wcglob.DOTGLOB | wcglob.FORCEUNIX
_GLOB_EXPANSION_LIMIT = 256


def compile_glob(pattern: str) -> Callable[[str], bool]:
    """A matcher for a relative POSIX path: ``**`` spans directories, ``{a,b}`` braces, dotfiles match.

    Matching is against the whole relative path and case-sensitive (``*.ts`` matches top-level files only;
    ``**/*.ts`` any depth). Raises ``ValueError`` for a pattern wcmatch cannot compile or whose braces expand
    to more than 256 patterns.
    """
    try:
        matcher = wcglob.compile(pattern, flags=_GLOB_FLAGS, limit=_GLOB_EXPANSION_LIMIT)
    except Exception as exc:  # wcmatch raises a private PatternLimitException or ValueError
        raise ValueError("invalid glob") from exc
    return matcher.match


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


@dataclass(frozen=True)
class TextFile:
    """An allowed text file: ``rel``, raw ``data`` bytes (BOM included) and display ``lines`` (BOM and
    each line's trailing CR stripped; no trailing empty line for a final newline)."""

    rel: str
    data: bytes
    lines: tuple[str, ...]


def display_lines(data: bytes) -> tuple[str, ...]:
    """Display lines of UTF-8 text bytes: BOM and each line's trailing CR removed, no final empty line."""
    body = data[len(BOM) :] if data.startswith(BOM) else data
    text = body.decode("utf-8")
    if not text:
        return ()
    parts = text.split("\n")
    if parts[-1] == "":
        parts.pop()
    return tuple(p[:-1] if p.endswith("\r") else p for p in parts)


class WorktreeContext:
    """Shared state of the tools of one job worktree: ``root``, effective ``limits``, ``version``, caches."""

    def __init__(self, root: Path, limits: Limits) -> None:
        self.root = Path(root)
        self.limits = limits
        self._version = 0
        self._listing: Listing | None = None
        self._reads: dict[str, TextFile | None] = {}

    @property
    def version(self) -> int:
        """The worktree version: 0 at start, +1 per change made or reported through :meth:`bump`."""
        return self._version

    def bump(self) -> None:
        """Record that the worktree changed: drop every cached listing and read."""
        self._version += 1
        self._listing = None
        self._reads = {}

    async def git(
        self,
        *args: str,
        max_bytes: int = 32 * 1024 * 1024,
        ok_codes: tuple[int, ...] = (0,),
        config: tuple[str, ...] = (),
    ) -> GitOutput:
        """Run a fixed-argv git command in the worktree (see :func:`spotpatch_agent.tools._git.run_git`)."""
        return await run_git(self.root, *args, max_bytes=max_bytes, ok_codes=ok_codes, config=config)

    # ------------------------------------------------------------ listing

    async def allowed_files(self) -> Listing:
        """Tracked and untracked-not-ignored files, minus protected, symlinked, non-regular, oversized or
        unnormalizable paths (DESIGN.md §7). Binary files are not detected here (read_file refuses them).
        Cached per version."""
        version = self._version
        if self._listing is not None:
            return self._listing
        out = await self.git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
        raw = out.stdout.split(b"\0")
        if out.truncated and raw:
            raw.pop()  # the last entry may be cut
        max_bytes = self.limits.get("editableFileMaxBytes")
        files = await anyio.to_thread.run_sync(_filter_listing, self.root, raw, max_bytes)
        listing = Listing(files=files, truncated=out.truncated)
        if version == self._version:
            self._listing = listing
        return listing

    # ------------------------------------------------------------ reads

    async def read_text(self, raw: str) -> TextFile | None:
        """The allowed text file at untrusted path ``raw``, or None when it is not allowed for reading
        (normalization, protected, git-ignored, filesystem policy; reasons are logged, never returned).
        Cached per version."""
        try:
            rel = normalize_rel_path(raw)
        except PathDenied as denied:
            logger.debug("read denied: %s", denied.reason)
            return None
        version = self._version
        if rel in self._reads:
            return self._reads[rel]
        result = await self._load_for_read(rel)
        if version == self._version:
            self._reads[rel] = result
        return result

    async def _load_for_read(self, rel: str) -> TextFile | None:
        if is_protected(rel):
            logger.debug("read denied: protected")
            return None
        listing = self._listing
        # A path in this version's listing is tracked or untracked-not-ignored: git would not call it
        # ignored, so the per-file ``git check-ignore`` process is skipped (search_text reads many hits).
        if (listing is None or rel not in listing.file_set) and await is_ignored(self.root, rel):
            logger.debug("read denied: ignored")
            return None
        max_bytes = self.limits.get("editableFileMaxBytes")
        try:
            allowed = await anyio.to_thread.run_sync(
                lambda: load_allowed(self.root, rel, for_write=False, max_bytes=max_bytes)
            )
        except PathDenied as denied:
            logger.debug("read denied: %s", denied.reason)
            return None
        return TextFile(rel=rel, data=allowed.data, lines=display_lines(allowed.data))

    # ------------------------------------------------------------ fingerprint

    async def fingerprint(self) -> str:
        """SHA-256 (hex) over ``git status --porcelain=v2 -z --untracked-files=all`` and the content of
        every path it lists (regular file bytes, symlink target, or a type marker). Two equal fingerprints
        mean the worktree's change set and the bytes of every changed path are equal (DESIGN.md §6)."""
        out = await self.git("status", "--porcelain=v2", "-z", "--untracked-files=all", "--ignored=no")
        if out.truncated:
            raise OSError("git status output exceeded its bound")
        paths = _status_paths(out.stdout)
        return await anyio.to_thread.run_sync(_digest_status, self.root, out.stdout, paths)


def _filter_listing(root: Path, raw: list[bytes], max_bytes: int) -> tuple[str, ...]:
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
            if not rel or rel in kept or normalize_rel_path(rel) != rel or is_protected(rel):
                continue
        except (UnicodeDecodeError, PathDenied):
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


def _status_paths(out: bytes) -> list[bytes]:
    """Paths named by ``git status --porcelain=v2 -z`` records (renames give both paths)."""
    records = out.split(b"\0")
    paths: list[bytes] = []
    i = 0
    while i < len(records):
        rec = records[i]
        i += 1
        if rec.startswith(b"1 "):
            paths.append(rec.split(b" ", 8)[8])
        elif rec.startswith(b"2 "):
            paths.append(rec.split(b" ", 9)[9])
            if i < len(records):
                paths.append(records[i])
                i += 1
        elif rec.startswith(b"u "):
            paths.append(rec.split(b" ", 10)[10])
        elif rec.startswith(b"? "):
            paths.append(rec[2:])
    return paths


def _digest_status(root: Path, status: bytes, paths: list[bytes]) -> str:
    digest = hashlib.sha256(status)
    for raw in sorted(set(paths)):
        digest.update(b"\0" + raw + b"\0")
        full = os.path.join(os.fsencode(root), raw)
        try:
            st = os.lstat(full)
        except OSError:
            digest.update(b"<missing>")
            continue
        if stat.S_ISLNK(st.st_mode):
            digest.update(b"<link>" + os.readlink(full))
        elif stat.S_ISREG(st.st_mode):
            with open(full, "rb") as handle:
                digest.update(hashlib.file_digest(handle, "sha256").digest())
        else:
            digest.update(b"<other>%o" % stat.S_IFMT(st.st_mode))
    return digest.hexdigest()

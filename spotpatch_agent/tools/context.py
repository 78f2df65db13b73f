"""The worktree as the tools see it: version counter, per-version caches, listing, fingerprint.

One :class:`WorktreeContext` per job worktree (owned by the executor). ``version`` starts at 0 and is bumped
by every write that touched the disk (and by :meth:`WorktreeContext.bump` for host-side changes such as a
check that rewrote files); listings and reads are cached per version only, so a read after a write can
never return stale content (docs/design.md §6 "Caches of listings and reads are per worktree version").
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import hashlib
import itertools
import logging
import os
import re
import stat
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
from wcmatch import glob as wcglob

from spotpatch_agent.policy.paths import (  # the private regex: see _SCAN
    _PROTECTED_READ,
    BOM,
    MAX_PATH_CHARS,
    PathDenied,
    is_ignored,
    is_protected,
    load_allowed,
    normalize_rel_path,
)
from spotpatch_agent.errors import GitError
from spotpatch_agent.protocol.models import Limits
from spotpatch_agent.protocol.errors import ToolErrorCode
from spotpatch_agent.tools._git import GitOutput, run_git
from spotpatch_agent.tools.base import ToolDef, ToolResult, arguments_guidance, check_pattern

logger = logging.getLogger(__name__)

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
        """The files that ``match`` (from :func:`compile_glob` of ``pattern``) accepts, in order.

        For ``**``, which accepts every path without a "." or ".." segment, a single look at the joined
        listing usually shows that no listed path even has a segment starting with "." (then all match)."""
        if pattern == "**":
            joined = "\n".join(self.files)
            if "/." not in joined and "\n." not in joined and not joined.startswith("."):
                return list(self.files)
        return [path for path in self.files if match(path)]


@dataclass(frozen=True)
class TextFile:
    """An allowed text file: ``rel``, raw ``data`` bytes (BOM included) and display ``lines`` (BOM and
    each line's trailing CR stripped; no trailing empty line for a final newline)."""

    rel: str
    data: bytes
    lines: tuple[str, ...]


def beyond_symlink(root: Path | str, rel: str) -> bool:
    """Whether a directory on the way to ``rel`` is a symlink (or cannot be looked at): such a path is
    never read, and one in a ``git check-ignore`` batch makes git fail for all of them."""
    parts = rel.split("/")[:-1]
    path = os.fspath(root)
    for part in parts:
        path = os.path.join(path, part)
        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                return True
        except FileNotFoundError:
            return False
        except OSError:
            return True
    return False


def display_lines(data: bytes) -> tuple[str, ...]:
    """Display lines of UTF-8 text bytes: BOM and each line's trailing CR removed, no final empty line."""
    body = data.removeprefix(BOM)
    text = body.decode("utf-8")
    if not text:
        return ()
    parts = text.split("\n")
    if parts[-1] == "":
        parts.pop()
    return tuple(p.removesuffix("\r") for p in parts)


class WorktreeContext:
    """Shared state of the tools of one job worktree: ``root``, effective ``limits``, ``version``, caches."""

    def __init__(self, root: Path, limits: Limits, *, focus: dict[str, tuple[int, ...]] | None = None) -> None:
        self.root = Path(root)
        self.limits = limits
        #: The job's targets' offered lines per relative path (``read_file`` without a range starts near them).
        self.focus: dict[str, tuple[int, ...]] = dict(focus or {})
        self._version = 0
        self._listing: Listing | None = None
        self._reads: dict[str, TextFile | None] = {}
        # False while every change to the worktree came through SpotPatch's own write tools: git's index
        # (plus ``git diff-files``) then describes the tracked files. A check (arbitrary commands) ends that.
        self._external = False
        # True once a SpotPatch write tool ran: tracked files may then differ from the index (edited,
        # deleted), which ``git diff-files`` reports. Before that the worktree is the checkout itself.
        self._written = False
        # The paths SpotPatch's write tools named before writing (:meth:`note_written`): the only tracked files
        # that can differ from the index while no check ran. ``_unnamed_write`` once a write call touched the
        # disk without naming its paths: from then on ``git diff-files`` finds them instead.
        self._written_paths: set[str] = set()
        self._unnamed_write = False
        self._write_call: tuple[int, bool] | None = None  # (version at the call's start, paths named)
        # Parsed ``git ls-files -s --debug`` output, keyed by the index file's lstat (git replaces the index
        # file on every write, so an unchanged key means unchanged content): (index path, key, entries).
        self._index_path: str | None = None
        self._index_cache: tuple[tuple[int, ...], _IndexBase] | None = None
        # Per path: (index file key, bytes of a small index holding that path's entry and every
        # ``.gitattributes`` entry) for the whitespace check (:meth:`diff_check`); None = no usable entry.
        self._check_indexes: dict[str, tuple[tuple[int, ...], bytes | None]] = {}

    @property
    def version(self) -> int:
        """The worktree version: 0 at start, +1 per change made or reported through :meth:`bump`."""
        return self._version

    def bump(self) -> None:
        """Record that the worktree changed: drop every cached listing and read."""
        self._version += 1
        self._listing = None
        self._reads = {}

    def mark_external_change(self) -> None:
        """Record that something other than SpotPatch's write tools (a check) may touch or have touched the
        worktree: from now on every listed file gets the full filesystem check. Drops the cached listing; the
        version is bumped by whoever changed the files (:meth:`bump`)."""
        self._external = True
        self._listing = None

    def mark_own_write(self) -> None:
        """Record that a SpotPatch write tool is about to run: from now on the listing checks on disk the
        tracked files the write tools named (:meth:`note_written`). Drops the cached listing (the tool bumps the
        version when it touches the disk). Pair with :meth:`end_own_write`."""
        self._written = True
        self._listing = None
        self._write_call = (self._version, False)

    def note_written(self, rels: Sequence[str]) -> None:
        """Name the paths the running write tool may write, create or delete (before it writes them)."""
        self._written_paths.update(rels)
        if self._write_call is not None:
            self._write_call = (self._write_call[0], True)

    def end_own_write(self) -> None:
        """The write tool of :meth:`mark_own_write` returned: if it changed the worktree without naming its
        paths, the listing asks ``git diff-files`` from now on (whole-worktree, but never stale)."""
        call, self._write_call = self._write_call, None
        if call is not None and call[0] != self._version and not call[1]:
            self._unnamed_write = True

    @property
    def externally_changed(self) -> bool:
        """Whether :meth:`mark_external_change` was called (the listing no longer trusts git's index)."""
        return self._external

    async def git(
        self,
        *args: str,
        max_bytes: int = 32 * 1024 * 1024,
        ok_codes: tuple[int, ...] = (0,),
        config: tuple[str, ...] = (),
        sink: Callable[[bytes], Awaitable[bool]] | None = None,
    ) -> GitOutput:
        """Run a fixed-argv git command in the worktree (see :func:`spotpatch_agent.tools._git.run_git`)."""
        return await run_git(self.root, *args, max_bytes=max_bytes, ok_codes=ok_codes, config=config, sink=sink)

    # ------------------------------------------------------------ listing

    async def allowed_files(self) -> Listing:
        """Tracked and untracked-not-ignored files, minus protected, symlinked, non-regular, oversized or
        unnormalizable paths (docs/design.md §7). Binary files are not detected here (read_file refuses them).
        Cached per version."""
        version = self._version
        if self._listing is not None:
            return self._listing
        max_bytes = self.limits.get("editableFileMaxBytes")
        listing = None if self._external else await self._fast_listing(max_bytes)
        if listing is None:
            listing = await self._full_listing(max_bytes)
        if version == self._version:
            self._listing = listing
        return listing

    async def allowed_among(self, rels: Sequence[str]) -> frozenset[str]:
        """The paths of ``rels`` that :meth:`allowed_files` lists, for paths git names as tracked or untracked
        and not ignored (``git grep --untracked --exclude-standard`` hits): this version's listing when it is
        cached, else the listing's own per-path decision for just these paths (name policy, real parent
        directories, a regular file within ``editableFileMaxBytes``), the same answer without listing the
        whole worktree."""
        listing = self._listing
        if listing is not None:
            return frozenset(rel for rel in rels if rel in listing.file_set)
        if not rels:
            return frozenset()
        max_bytes = self.limits.get("editableFileMaxBytes")
        raw = [rel.encode("utf-8", errors="surrogateescape") for rel in rels]
        return frozenset(await anyio.to_thread.run_sync(_filter_listing, self.root, raw, max_bytes))

    async def _full_listing(self, max_bytes: int) -> Listing:
        """Every listed path checked on the filesystem (lstat of the file and of each parent directory)."""
        out = await self.git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
        raw = out.stdout.split(b"\0")
        if out.truncated and raw:
            raw.pop()  # the last entry may be cut
        files = await anyio.to_thread.run_sync(_filter_listing, self.root, raw, max_bytes)
        return Listing(files=files, truncated=out.truncated)

    async def _fast_listing(self, max_bytes: int) -> Listing | None:
        """The listing from git's index, valid only while no check ran (see :meth:`mark_external_change`).

        Tracked entries come from ``git ls-files -s --debug`` (mode and the size git recorded from ``lstat``).
        Until a write tool ran, the worktree is the checkout git recorded; after one (:meth:`mark_own_write`),
        the paths the write tools named (:meth:`note_written`) are the only tracked files that can differ
        (or, after a write that named none, ``git diff-files`` names every tracked path whose ``lstat`` no
        longer matches the index: content, size, type change, deletion, a symlink on the leading path).
        Those, the untracked files, unmerged, empty and unusual entries get the full filesystem check. The remaining entries are
        on disk exactly as the index says: regular files (mode 100644/100755) of the recorded size, under real
        directories (git never tracks a path through a symlink). Symlinks (120000) and submodules (160000) are
        dropped. Returns None (caller falls back to the full check) when any output is truncated or unexpected.
        """
        tracked: list[tuple[list[str], list[bytes]] | None] = []
        others: list[GitOutput] = []

        async def index_side() -> None:
            dirty = b""
            if self._written and self._unnamed_write:
                out = await self.git("diff-files", "-z", "--name-only", "--ignore-submodules=all")
                if out.truncated:
                    tracked.append(None)
                    return
                dirty = out.stdout
            elif self._written:
                dirty = b"\0".join(rel.encode("utf-8", errors="surrogateescape") for rel in sorted(self._written_paths))
            base = await self._index_entries(max_bytes)
            tracked.append(None if base is None else base.split(dirty))

        async def others_side() -> None:
            others.append(await self.git("ls-files", "-z", "--others", "--exclude-standard"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(index_side)
            tg.start_soon(others_side)
        split = tracked[0]
        if split is None or others[0].truncated:
            return None
        trusted, check = split
        check.extend(item for item in others[0].stdout.split(b"\0") if item)
        if check:
            files = await anyio.to_thread.run_sync(_merge_checked, self.root, trusted, check, max_bytes)
        else:
            files = tuple(trusted)  # the index is sorted by path bytes, which is str order for UTF-8
        return Listing(files=files, truncated=False)

    async def _index_entries(self, max_bytes: int) -> _IndexBase | None:
        """The index read as :class:`_IndexBase`, reused while the index file is unchanged.

        ``git ls-files -z -s --debug`` is parsed as it streams (about 220 bytes per entry: 43 MB for 200,000
        files), so memory holds the kept paths, never the whole output; a bound of 1 GiB of output (about
        five million entries) still applies."""
        index_path = await self._git_index_path()
        key = _file_key(index_path)
        cached = self._index_cache
        if key is not None and cached is not None and cached[0] == key and cached[1].max_bytes == max_bytes:
            return cached[1]
        parser = _IndexParser(max_bytes)
        out = await self.git("ls-files", "-z", "-s", "--debug", max_bytes=_INDEX_OUTPUT_MAX_BYTES, sink=parser.feed)
        base = None if out.truncated else await parser.finish()
        if base is not None and key is not None and _file_key(index_path) == key:
            self._index_cache = (key, base)
        return base

    async def _git_index_path(self) -> str:
        """Absolute path of the worktree's own index file (asked once)."""
        if self._index_path is None:
            out = await self.git("rev-parse", "--path-format=absolute", "--git-path", "index")
            self._index_path = out.stdout.rstrip(b"\n").decode("utf-8", errors="surrogateescape")
        return self._index_path

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

    async def read_texts(self, rels: Sequence[str]) -> dict[str, TextFile | None]:
        """:meth:`read_text` for several normalized paths at once (the project context, ``spotpatch_agent.context``):
        one ``git check-ignore`` for all the paths not already cached or listed, then the filesystem policy
        for each. Same answers as :meth:`read_text` and the same per-version cache, so a later ``read_file``
        of one of them reads nothing again. A git error counts as "ignored" for every path (fails closed)."""
        version = self._version
        out: dict[str, TextFile | None] = {rel: self._reads[rel] for rel in rels if rel in self._reads}
        todo = [rel for rel in dict.fromkeys(rels) if rel not in out]
        allowed: list[str] = []
        for rel in todo:
            try:
                ok = normalize_rel_path(rel) == rel and not is_protected(rel)
            except PathDenied:
                ok = False
            if ok and beyond_symlink(self.root, rel):
                ok = False  # never readable; and git check-ignore would fail the whole batch for it
            if ok:
                allowed.append(rel)
            else:
                out[rel] = None
        listing = self._listing
        unknown = [rel for rel in allowed if listing is None or rel not in listing.file_set]
        ignored: set[str] = set()
        if unknown:
            try:
                # One path per output line (``-z`` needs ``--stdin``); a path git would C-quote (a '"' in
                # it) cannot be matched back, so it counts as ignored.
                res = await self.git("check-ignore", "--", *unknown, max_bytes=1024 * 1024, ok_codes=(0, 1))
                ignored = set(unknown) if res.truncated else set(res.stdout.decode("utf-8", "replace").split("\n"))
                ignored.update(rel for rel in unknown if '"' in rel)
            except (GitError, OSError):
                ignored = set(unknown)
        max_bytes = self.limits.get("editableFileMaxBytes")

        def load_all() -> dict[str, TextFile | None]:
            loaded: dict[str, TextFile | None] = {}
            for rel in allowed:
                if rel in ignored:
                    loaded[rel] = None
                    continue
                try:
                    got = load_allowed(self.root, rel, for_write=False, max_bytes=max_bytes)
                except PathDenied:
                    loaded[rel] = None
                    continue
                loaded[rel] = TextFile(rel=rel, data=got.data, lines=display_lines(got.data))
            return loaded

        loaded = await anyio.to_thread.run_sync(load_all) if allowed else {}
        out.update(loaded)
        if version == self._version:
            for rel in todo:
                self._reads[rel] = out[rel]
        return out

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

    # ------------------------------------------------------------ the write tools' git and fingerprint

    async def diff_check(self, rel: str, config: tuple[str, ...] = ()) -> GitOutput:
        """``git diff --check --no-color --no-ext-diff -- :(literal)<rel>`` (the worktree file against the index),
        exit codes 0 and 2 accepted, output bounded to 1 MiB.

        The same command, but git reads a small index instead of the worktree's (whose size grows with the
        repository): the path's own entry plus every ``.gitattributes`` entry (attributes of a deleted
        ``.gitattributes`` come from the index), taken with one ``git ls-files -s`` and kept while the index
        file is unchanged (SpotPatch's tools never write the index; a check may, and then the file changes).
        A path without exactly one ordinary stage-0 entry (untracked, unmerged, intent-to-add, not a regular
        file) is checked against the real index as before.
        """
        args = ("diff", "--check", "--no-color", "--no-ext-diff", "--", f":(literal){rel}")
        small = await self._check_index(rel)
        if small is None:
            return await self.git(*args, ok_codes=(0, 2), max_bytes=1024 * 1024, config=config)
        target = self._check_index_file()
        with open(target, "wb") as handle:
            handle.write(small)
        return await run_git(self.root, *args, ok_codes=(0, 2), max_bytes=1024 * 1024, config=config,
                             index_file=target)

    def _check_index_file(self) -> str:
        assert self._index_path is not None
        return os.path.join(os.path.dirname(self._index_path), "spotpatch-check.index")

    async def _check_index(self, rel: str) -> bytes | None:
        index_path = await self._git_index_path()
        key = _file_key(index_path)
        cached = self._check_indexes.get(rel)
        if key is not None and cached is not None and cached[0] == key:
            return cached[1]
        out = await self.git("ls-files", "-s", "-z", "--", f":(literal){rel}", ":(glob)**/.gitattributes",
                             max_bytes=1024 * 1024)
        small = None if out.truncated else await self._build_check_index(rel, out.stdout)
        if key is not None and _file_key(index_path) == key:
            self._check_indexes[rel] = (key, small)
        return small

    async def _build_check_index(self, rel: str, listed: bytes) -> bytes | None:
        own: list[tuple[str, str, str]] = []
        cacheinfo: list[str] = []
        for record in listed.split(b"\0"):
            if not record:
                continue
            head, tab, raw_path = record.partition(b"\t")
            fields = head.split(b" ")
            if not tab or len(fields) != 3:
                return None
            mode, oid, stage = (f.decode("ascii", errors="replace") for f in fields)
            path = raw_path.decode("utf-8", errors="surrogateescape")
            if path == rel:
                own.append((mode, oid, stage))
            elif stage != "0":
                return None
            if "\0" in path or path.startswith("-"):
                return None
            cacheinfo += ["--cacheinfo", mode, oid, path]
        if len(own) != 1 or own[0][0] not in ("100644", "100755") or own[0][2] != "0" or own[0][1] in _EMPTY_BLOBS:
            return None
        target = self._check_index_file()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target)
        try:
            await run_git(self.root, "update-index", "--add", *cacheinfo, index_file=target, max_bytes=64 * 1024)
            with open(target, "rb") as handle:
                return handle.read()
        except GitError:
            return None

    async def write_fingerprint(self, rels: Sequence[str]) -> str:
        """A digest of the paths ``rels`` as they are on disk (type, executable bit, bytes or link target, or
        missing): what a write tool compares before and after undoing its edit.

        Exactly as decisive as comparing :meth:`fingerprint` there: a write tool runs alone under the
        executor's write gate (no other tool, no check), the engine is the only writer of a job worktree
        besides checks (which :meth:`fingerprint` brackets), and the tool itself writes only ``rels`` (and a
        same-directory temp file that it renames or removes). So between two moments of one such call the
        worktree can differ only at ``rels``, and it is unchanged exactly when they are. The cost is that of
        reading these files, whatever the size of the repository.
        """
        paths = sorted(set(rels))
        if len(paths) <= 8:
            return _digest_paths(self.root, paths)
        return await anyio.to_thread.run_sync(_digest_paths, self.root, paths)

    # ------------------------------------------------------------ fingerprint

    async def fingerprint(self) -> str:
        """SHA-256 (hex) over ``git status --porcelain=v2 -z --untracked-files=all`` and the content of
        every path it lists (regular file bytes, symlink target, or a type marker). Two equal fingerprints
        mean the worktree's change set and the bytes of every changed path are equal (docs/design.md §6)."""
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


# One ``git ls-files -z -s --debug`` entry: "<mode> <oid> <stage>\t<path>\0" then the cached stat lines.
_INDEX_ENTRY = re.compile(
    rb"([0-7]{6}) [0-9a-f]{40,64} ([0-3])\t([^\0]+)\0"
    rb"  ctime: [^\n]*\n  mtime: [^\n]*\n  dev: [^\n]*\n  uid: [^\n]*\n  size: ([0-9]+)\tflags: [0-9a-f]+\n"
)
# Fast listing checks, equivalent per path to ``normalize_rel_path``'s fast path (``_FAST_PATH``: ASCII
# segments of [A-Za-z0-9._ +@-], none empty, none ending in "." or " ", no Windows device name) and to
# ``is_protected`` (``_PROTECTED_READ``). Over "/" + "\n/".join(paths) every segment start follows a "/",
# so the policy's leading "(?:^|/)" becomes a literal "/" that the regex engine scans for quickly.
_FAST_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._ +@-/\n"
_FAST_BAD = (b"//", b"/\n", b"\n/", b"\n\n", b"./", b".\n", b" /", b" \n")
_PROTECTED_BODY = _PROTECTED_READ.pattern.replace("(?:^|/)", "").replace(r"\Z", "$").replace("[^/]", "[^/\\n]")
_SCAN = re.compile(
    rf"/(?:(?P<device>(?:con|prn|aux|nul|com[0-9]|lpt[0-9])(?:[./\n]|\Z))|{_PROTECTED_BODY})",
    _PROTECTED_READ.flags | re.MULTILINE,
)
_REGULAR_MODES = (b"100644", b"100755")
_SKIPPED_MODES = (b"120000", b"160000")


def _file_key(path: str) -> tuple[int, ...] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


_INDEX_OUTPUT_MAX_BYTES = 1024 * 1024 * 1024
# Parse the streamed index in batches of about this many bytes (in a worker thread).
_INDEX_BATCH_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class _IndexBase:
    """The index as the fast listing needs it, before looking at what changed on disk: ``trusted`` the
    paths (sorted) that are on disk exactly as recorded while git's stat data still matches (regular files
    of 1..``max_bytes`` recorded bytes whose names pass the policy), ``check`` the raw paths that always get
    the filesystem check (unmerged, empty, unusual modes). Symlinks, submodules, oversized regular files and
    refused names are in neither."""

    trusted: tuple[str, ...]
    check: tuple[bytes, ...]
    max_bytes: int

    def split(self, dirty: bytes) -> tuple[list[str], list[bytes]]:
        """``(trusted, check)`` once ``dirty`` (NUL-separated paths whose stat no longer matches the index,
        from ``git diff-files``) is known: those move from ``trusted`` (or from nowhere) to ``check``."""
        dirty_raw = [item for item in dirty.split(b"\0") if item]
        if not dirty_raw:
            return list(self.trusted), list(self.check)
        moved = {item.decode("utf-8", errors="surrogateescape") for item in dirty_raw}
        return [rel for rel in self.trusted if rel not in moved], [*self.check, *dirty_raw]


class _IndexParser:
    """Streaming parse of ``git ls-files -z -s --debug`` into an :class:`_IndexBase` (``feed`` each chunk,
    then ``finish``). Any output that is not exactly a sequence of entries makes ``finish`` return None."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._tail = b""
        self._trusted: list[str] = []
        self._check: list[bytes] = []
        self._ok = True

    async def feed(self, chunk: bytes) -> bool:
        self._pending.append(chunk)
        self._pending_size += len(chunk)
        if self._pending_size >= _INDEX_BATCH_BYTES:
            await self._flush(final=False)
        return self._ok

    async def finish(self) -> _IndexBase | None:
        await self._flush(final=True)
        if not self._ok or self._tail:
            return None
        return _IndexBase(tuple(self._trusted), tuple(self._check), self.max_bytes)

    async def _flush(self, *, final: bool) -> None:
        data = self._tail + b"".join(self._pending)
        self._pending, self._pending_size = [], 0
        if final:
            cut = len(data)
        else:
            cut = _last_entry_end(data)
        self._tail = data[cut:]
        if cut and self._ok:
            self._ok = await anyio.to_thread.run_sync(self._parse, data[:cut])

    def _parse(self, data: bytes) -> bool:
        entries = _INDEX_ENTRY.findall(data)
        if len(entries) != data.count(b"\0"):  # every NUL ends a path: each entry must have parsed
            return False
        max_bytes = self.max_bytes
        candidates: list[bytes] = []
        check = self._check
        for mode, stage, path, size in entries:
            if stage != b"0":
                check.append(path)
            elif mode in _REGULAR_MODES:
                recorded = int(size)
                if recorded == 0:
                    check.append(path)
                elif recorded <= max_bytes:
                    candidates.append(path)
            elif mode not in _SKIPPED_MODES:
                check.append(path)
        if candidates:
            self._trusted.extend(_filter_names(candidates))
        return True


def _last_entry_end(data: bytes) -> int:
    """Offset just after the last entry of ``data`` that is surely complete (0 when there is none).

    An entry is ``<mode> <oid> <stage>\\t<path>\\0`` and five lines of cached stat data (no NUL, no newline
    inside a line). So the entry holding the next-to-last NUL is complete: it ends at the fifth newline after
    that NUL, whatever its path or the next one holds."""
    last = data.rfind(b"\0")
    previous = data.rfind(b"\0", 0, last) if last > 0 else -1
    if previous < 0:
        return 0
    pos = previous
    for _ in range(5):
        pos = data.find(b"\n", pos + 1)
        if pos < 0 or pos > last:
            return 0
    return pos + 1


def _merge_checked(root: Path, trusted: list[str], check: list[bytes], max_bytes: int) -> tuple[str, ...]:
    kept = set(trusted)
    kept.update(_filter_listing(root, check, max_bytes))
    return tuple(sorted(kept))


def _filter_names(raw: list[bytes]) -> list[str]:
    """The paths of ``raw`` that decode as UTF-8, are already normalized and are not protected.

    Same decisions as ``normalize_rel_path(rel) == rel and not is_protected(rel)`` per path (the tests
    compare them), but for a listing of plain ASCII paths both checks are a few passes over the joined
    listing; anything unusual takes the per-path functions.
    """
    blob = b"\n".join(raw)
    if (
        not raw
        or blob.translate(None, _FAST_CHARS)  # a character outside the fast set (so also non-ASCII, "\n")
        or blob.count(b"\n") != len(raw) - 1  # a "\n" inside a path
        or max(map(len, raw)) > MAX_PATH_CHARS
        or any(bad in blob for bad in _FAST_BAD)
        or blob.startswith(b"/")
        or blob.endswith((b"/", b".", b" "))
    ):
        return _filter_names_slow(raw)
    text = "/" + blob.decode("ascii").replace("\n", "\n/")
    hits: list[int] = []
    for m in _SCAN.finditer(text.lower()):
        if m.lastgroup == "device":
            return _filter_names_slow(raw)
        hits.append(m.start())
    rels = text[1:].split("\n/")
    if not hits:
        return rels
    starts = list(itertools.accumulate((len(rel) + 2 for rel in rels[:-1]), initial=0))
    bad = {bisect.bisect_right(starts, pos) - 1 for pos in hits}
    return [rel for i, rel in enumerate(rels) if i not in bad]


def _filter_names_slow(raw: list[bytes]) -> list[str]:
    kept: list[str] = []
    for item in raw:
        try:
            rel = item.decode("utf-8")
            if normalize_rel_path(rel) != rel or is_protected(rel):
                continue
        except (UnicodeDecodeError, PathDenied):
            continue
        kept.append(rel)
    return kept


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


_EMPTY_BLOBS = ("e69de29bb2d1d6434b8b29ae775ad8c2e48c5391",
                "473a0f4c3be8a93681a267e3b1e9a7dcda1185436fe141f7749120a303721813")


def _digest_paths(root: Path, rels: list[str]) -> str:
    digest = hashlib.sha256()
    for rel in rels:
        raw = rel.encode("utf-8", errors="surrogateescape")
        digest.update(b"\0" + raw + b"\0")
        full = os.path.join(os.fsencode(root), raw)
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            digest.update(b"<missing>")
            continue
        if stat.S_ISLNK(st.st_mode):
            digest.update(b"<link>" + os.readlink(full))
        elif stat.S_ISREG(st.st_mode):
            digest.update(b"<x>" if st.st_mode & stat.S_IXUSR else b"<f>")
            with open(full, "rb") as handle:
                digest.update(hashlib.file_digest(handle, "sha256").digest())
        else:
            digest.update(b"<other>%o" % stat.S_IFMT(st.st_mode))
    return digest.hexdigest()


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

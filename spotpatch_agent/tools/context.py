"""The worktree as the tools see it: version counter, per-version caches, reads, listing, fingerprints.

One :class:`WorktreeContext` per job worktree (owned by the executor). ``version`` starts at 0 and is bumped
by every write that touched the disk (and by :meth:`WorktreeContext.bump` for host-side changes such as a
check that rewrote files); listings and reads are cached per version only, so a read after a write can
never return stale content (docs/design.md §6 "Caches of listings and reads are per worktree version").

The context holds the state and decides; the work is in its neighbours: :mod:`.listing` builds the
listing (the whole filesystem check, or git's index plus what may differ from it), :mod:`.git_index` reads
git's index and keeps each answer while the index file is unchanged, :mod:`.fingerprint` digests paths as
they are on disk, :mod:`.globs` compiles the tools' ``glob`` argument. The name rules come from the path
policy (:mod:`spotpatch_agent.policy.paths`).
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio

from spotpatch_agent.errors import GitError
from spotpatch_agent.policy.paths import (
    BOM,
    PathDenied,
    check_ignore,
    is_ignored,
    is_protected,
    is_readable_name,
    load_allowed,
    normalize_rel_path,
)
from spotpatch_agent.protocol.config import EditFormat
from spotpatch_agent.protocol.models import CheckConfig, Limits
from spotpatch_agent.tools._git import GitOutput, tool_git
from spotpatch_agent.tools.fingerprint import paths_digest, status_digest
from spotpatch_agent.tools.git_index import GitIndex
from spotpatch_agent.tools.listing import Listing, filter_listing, full_listing, index_listing

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TextFile:
    """An allowed text file: ``rel``, raw ``data`` bytes (BOM included) and display ``lines`` (BOM and
    each line's trailing CR stripped; no trailing empty line for a final newline)."""

    rel: str
    data: bytes
    lines: tuple[str, ...]


@dataclass(frozen=True)
class PageText:
    """One picked element's text on the page (``text``, at most 500 characters), the target ``index`` it
    belongs to and its located source (``rel`` normalized, ``line`` 1-based), when the page gave one. Made by
    :func:`~spotpatch_agent.tools.hints.page_texts`; held here, read by ``replace_text``'s page-text hint."""

    index: int
    text: str
    rel: str | None = None
    line: int | None = None


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
        #: Set by the executor, read by tools/run_check.py only: the job's trusted checks (the only commands
        #: ``run_check`` may run), the trusted config's sandbox policy for them, and the user's checkout the
        #: confined check must not see (checks/runner.py).
        self.checks: tuple[CheckConfig, ...] = ()
        self.check_sandbox: Literal["required", "warn"] = "required"
        self.project_root: Path | None = None
        #: Set by the executor from the model profile: ``anchors`` makes ``read_file`` and ``search_text`` show
        #: each line with its anchor (tools/anchors.py).
        self.edit_format: EditFormat = "replace"
        #: Set by the engine (engine/job.py): the picked elements' page text and located source lines, which
        #: ``replace_text`` recognises when a model uses page text as ``oldText`` (tools/hints.py).
        self.page_texts: tuple[PageText, ...] = ()
        #: Narrow reads (a few lines) per relative path so far: ``read_file`` hints at a range from the second.
        self.narrow_reads: dict[str, int] = {}
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
        # What git's index says (listing entries, submodules, small check indexes), kept while the index file
        # is unchanged.
        self._index = GitIndex(self.root, self.git)

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
        """Run a fixed-argv git command in the worktree (see :func:`spotpatch_agent.tools._git.tool_git`)."""
        return await tool_git(self.root, *args, max_bytes=max_bytes, ok_codes=ok_codes, config=config, sink=sink)

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
        return frozenset(await anyio.to_thread.run_sync(filter_listing, self.root, raw, max_bytes))

    async def _full_listing(self, max_bytes: int) -> Listing:
        """Every listed path checked on the filesystem (lstat of the file and of each parent directory)."""
        return await full_listing(self.root, self.git, max_bytes)

    async def _fast_listing(self, max_bytes: int) -> Listing | None:
        """The listing from git's index (:func:`~spotpatch_agent.tools.listing.index_listing`), valid only
        while no check ran (see :meth:`mark_external_change`); None when it cannot be used.

        Until a write tool ran, the worktree is the checkout git recorded; after one (:meth:`mark_own_write`),
        the paths the write tools named (:meth:`note_written`) are the only tracked files that can differ
        (or, after a write that named none, ``git diff-files`` names every tracked path whose ``lstat`` no
        longer matches the index: content, size, type change, deletion, a symlink on the leading path)."""
        return await index_listing(self.root, self.git, self._index, max_bytes, self._dirty_paths)

    async def _dirty_paths(self) -> bytes | None:
        """The tracked paths (NUL-separated) that may differ from the index, None when git's answer is cut."""
        if self._written and self._unnamed_write:
            out = await self.git("diff-files", "-z", "--name-only", "--ignore-submodules=all")
            return None if out.truncated else out.stdout
        if self._written:
            return b"\0".join(rel.encode("utf-8", errors="surrogateescape") for rel in sorted(self._written_paths))
        return b""

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
            ok = is_readable_name(rel)
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
        args = ("diff", "--check", "--no-color", "--no-ext-diff", "--ignore-submodules=all", "--", f":(literal){rel}")
        small = await self._index.check_index(rel)
        if small is None:
            return await self.git(*args, ok_codes=(0, 2), max_bytes=1024 * 1024, config=config)
        target = self._index.check_index_file()
        with open(target, "wb") as handle:
            handle.write(small)
        return await tool_git(self.root, *args, ok_codes=(0, 2), max_bytes=1024 * 1024, config=config,
                             index_file=target)

    async def ignored(self, rel: str) -> bool:
        """:func:`~spotpatch_agent.policy.paths.is_ignored` for the normalized path ``rel``, the same answer
        without reading the whole index each time: ``git check-ignore --no-index`` matches the exclude
        patterns alone, and a path no pattern ignores is not ignored, tracked or not, unless it lies inside a
        submodule (git then fails, which counts as ignored). The submodule paths come from the index once
        while the index file is unchanged. Any other case asks git with the index, as before."""
        if await check_ignore(self.root, rel, no_index=True) == 1:
            links = await self._index.submodules()
            if links is not None and not any(rel.startswith(link + "/") for link in links):
                return False
        return await is_ignored(self.root, rel)

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
            return paths_digest(self.root, paths)
        return await anyio.to_thread.run_sync(paths_digest, self.root, paths)

    # ------------------------------------------------------------ fingerprint

    async def fingerprint(self) -> str:
        """SHA-256 (hex) over ``git status --porcelain=v2 -z --untracked-files=all`` and the content of
        every path it lists (regular file bytes, symlink target, or a type marker). Two equal fingerprints
        mean the worktree's change set and the bytes of every changed path are equal (docs/design.md §6)."""
        out = await self.git("status", "--porcelain=v2", "-z", "--untracked-files=all", "--ignored=no",
                             "--ignore-submodules=all")
        if out.truncated:
            raise OSError("git status output exceeded its bound")
        return await anyio.to_thread.run_sync(status_digest, self.root, out.stdout)



"""A job worktree's git index as the tools read it, each answer kept while the index file is unchanged.

Git replaces the index file on every write, so its ``lstat`` (inode, device, size, mtime, ctime) is the
cache key: an unchanged key means unchanged content. :class:`GitIndex` answers

- :meth:`GitIndex.entries` — the tracked side of the fast listing (:class:`IndexBase`), parsed from
  ``git ls-files -z -s --debug`` as it streams (:class:`IndexParser`);
- :meth:`GitIndex.submodules` — the submodule (gitlink) paths, for ``WorktreeContext.ignored``;
- :meth:`GitIndex.check_index` — a small index (one path's entry plus every ``.gitattributes`` entry) for
  ``replace_text``'s whitespace check (``WorktreeContext.diff_check``).

SpotPatch's tools never write the index; a check may, and then the file (and the key) changes.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from spotpatch_agent.errors import GitError
from spotpatch_agent.policy.paths import readable_names
from spotpatch_agent.tools._git import GitOutput, tool_git

# One ``git ls-files -z -s --debug`` entry: "<mode> <oid> <stage>\t<path>\0" then the cached stat lines.
_INDEX_ENTRY = re.compile(
    rb"([0-7]{6}) [0-9a-f]{40,64} ([0-3])\t([^\0]+)\0"
    rb"  ctime: [^\n]*\n  mtime: [^\n]*\n  dev: [^\n]*\n  uid: [^\n]*\n  size: ([0-9]+)\tflags: [0-9a-f]+\n"
)
_REGULAR_MODES = (b"100644", b"100755")
_SKIPPED_MODES = (b"120000", b"160000")
_INDEX_OUTPUT_MAX_BYTES = 1024 * 1024 * 1024
# Parse the streamed index in batches of about this many bytes (in a worker thread).
_INDEX_BATCH_BYTES = 4 * 1024 * 1024
_EMPTY_BLOBS = ("e69de29bb2d1d6434b8b29ae775ad8c2e48c5391",
                "473a0f4c3be8a93681a267e3b1e9a7dcda1185436fe141f7749120a303721813")

#: ``WorktreeContext.git``: a fixed-argv git command in the worktree.
GitCall = Callable[..., Awaitable[GitOutput]]


def file_key(path: str) -> tuple[int, ...] | None:
    """The cache key of a file: its ``lstat`` (inode, device, size, mtime ns, ctime ns), None if absent."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass(frozen=True)
class IndexBase:
    """The index as the fast listing needs it, before looking at what changed on disk: ``trusted`` the
    paths (sorted) that are on disk exactly as recorded while git's stat data still matches (regular files
    of 1..``max_bytes`` recorded bytes whose names pass the policy), ``check`` the raw paths that always get
    the filesystem check (unmerged, empty, unusual modes). Symlinks, submodules, oversized regular files and
    refused names are in neither."""

    trusted: tuple[str, ...]
    check: tuple[bytes, ...]
    max_bytes: int
    gitlinks: frozenset[str] = frozenset()

    def split(self, dirty: bytes) -> tuple[list[str], list[bytes]]:
        """``(trusted, check)`` once ``dirty`` (NUL-separated paths whose stat no longer matches the index,
        from ``git diff-files``) is known: those move from ``trusted`` (or from nowhere) to ``check``."""
        dirty_raw = [item for item in dirty.split(b"\0") if item]
        if not dirty_raw:
            return list(self.trusted), list(self.check)
        moved = {item.decode("utf-8", errors="surrogateescape") for item in dirty_raw}
        return [rel for rel in self.trusted if rel not in moved], [*self.check, *dirty_raw]


class IndexParser:
    """Streaming parse of ``git ls-files -z -s --debug`` into an :class:`IndexBase` (``feed`` each chunk,
    then ``finish``). Any output that is not exactly a sequence of entries makes ``finish`` return None."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._tail = b""
        self._trusted: list[str] = []
        self._check: list[bytes] = []
        self._gitlinks: list[str] = []
        self._ok = True

    async def feed(self, chunk: bytes) -> bool:
        """Take one chunk of output; False once the output is known to be malformed (stop git)."""
        self._pending.append(chunk)
        self._pending_size += len(chunk)
        if self._pending_size >= _INDEX_BATCH_BYTES:
            await self._flush(final=False)
        return self._ok

    async def finish(self) -> IndexBase | None:
        """The parsed index, or None when the output was not exactly a sequence of entries."""
        await self._flush(final=True)
        if not self._ok or self._tail:
            return None
        return IndexBase(tuple(self._trusted), tuple(self._check), self.max_bytes, frozenset(self._gitlinks))

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
            if mode == b"160000":
                self._gitlinks.append(path.decode("utf-8", errors="surrogateescape"))
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
            self._trusted.extend(readable_names(candidates))
        return True


class _GitlinkCollector:
    """Keeps the submodule paths (mode 160000) of streamed ``git ls-files -z -s`` output."""

    def __init__(self) -> None:
        self.links: list[str] = []
        self.tail = b""

    async def feed(self, chunk: bytes) -> bool:
        records = (self.tail + chunk).split(b"\0")
        self.tail = records.pop()
        for record in records:
            if record.startswith(b"160000 "):
                self.links.append(record.partition(b"\t")[2].decode("utf-8", errors="surrogateescape"))
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


class GitIndex:
    """The index of the worktree at ``root``, read through ``git`` (``WorktreeContext.git``); one per
    ``WorktreeContext``. Every answer is kept while the index file's ``lstat`` is unchanged."""

    def __init__(self, root: Path, git: GitCall) -> None:
        self.root = root
        self._git = git
        self._path: str | None = None
        self._entries: tuple[tuple[int, ...], IndexBase] | None = None
        # Per path: (index file key, bytes of a small index holding that path's entry and every
        # ``.gitattributes`` entry) for the whitespace check; None = no usable entry.
        self._check_indexes: dict[str, tuple[tuple[int, ...], bytes | None]] = {}
        self._gitlinks: tuple[tuple[int, ...], frozenset[str]] | None = None

    async def path(self) -> str:
        """Absolute path of the worktree's own index file (asked once)."""
        if self._path is None:
            out = await self._git("rev-parse", "--path-format=absolute", "--git-path", "index")
            self._path = out.stdout.rstrip(b"\n").decode("utf-8", errors="surrogateescape")
        return self._path

    async def entries(self, max_bytes: int) -> IndexBase | None:
        """The index read as :class:`IndexBase` for ``max_bytes`` (``editableFileMaxBytes``), or None when
        git's output is truncated or unexpected.

        ``git ls-files -z -s --debug`` is parsed as it streams (about 220 bytes per entry: 43 MB for 200,000
        files), so memory holds the kept paths, never the whole output; a bound of 1 GiB of output (about
        five million entries) still applies."""
        index_path = await self.path()
        key = file_key(index_path)
        cached = self._entries
        if key is not None and cached is not None and cached[0] == key and cached[1].max_bytes == max_bytes:
            return cached[1]
        parser = IndexParser(max_bytes)
        out = await self._git("ls-files", "-z", "-s", "--debug", max_bytes=_INDEX_OUTPUT_MAX_BYTES, sink=parser.feed)
        base = None if out.truncated else await parser.finish()
        if base is not None and key is not None and file_key(index_path) == key:
            self._entries = (key, base)
        return base

    async def submodules(self) -> frozenset[str] | None:
        """The submodule (gitlink) paths of the index, or None when git's output is truncated. Taken from
        the parsed :meth:`entries` when they are current, else from ``git ls-files -z -s``."""
        index_path = await self.path()
        key = file_key(index_path)
        cached = self._gitlinks
        if key is not None and cached is not None and cached[0] == key:
            return cached[1]
        listing = self._entries
        if key is not None and listing is not None and listing[0] == key:
            links = listing[1].gitlinks
        else:
            collector = _GitlinkCollector()
            out = await self._git("ls-files", "-z", "-s", max_bytes=_INDEX_OUTPUT_MAX_BYTES, sink=collector.feed)
            if out.truncated or collector.tail:
                return None
            links = frozenset(collector.links)
        if key is not None and file_key(index_path) == key:
            self._gitlinks = (key, links)
        return links

    def check_index_file(self) -> str:
        """Where the small index of :meth:`check_index` is written: next to the real index (call
        :meth:`path` first)."""
        assert self._path is not None
        return os.path.join(os.path.dirname(self._path), "spotpatch-check.index")

    async def check_index(self, rel: str) -> bytes | None:
        """The bytes of a small index holding ``rel``'s entry and every ``.gitattributes`` entry, or None
        when ``rel`` has not exactly one ordinary stage-0 entry (untracked, unmerged, intent-to-add, not a
        regular file, empty blob) or git's answer is unusable: then the caller uses the real index."""
        index_path = await self.path()
        key = file_key(index_path)
        cached = self._check_indexes.get(rel)
        if key is not None and cached is not None and cached[0] == key:
            return cached[1]
        out = await self._git("ls-files", "-s", "-z", "--", f":(literal){rel}", ":(glob)**/.gitattributes",
                              max_bytes=1024 * 1024)
        small = None if out.truncated else await self._build_check_index(rel, out.stdout)
        if key is not None and file_key(index_path) == key:
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
        target = self.check_index_file()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target)
        try:
            await tool_git(self.root, "update-index", "--add", *cacheinfo, index_file=target, max_bytes=64 * 1024)
            with open(target, "rb") as handle:
                return handle.read()
        except GitError:
            return None

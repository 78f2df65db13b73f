"""Digests of worktree paths as they are on disk: the write tools' and the checks' fingerprints (docs/design.md §6).

- :func:`paths_digest` — the named paths only (``WorktreeContext.write_fingerprint``): type, executable
  bit, bytes or link target, or missing.
- :func:`status_digest` — ``git status --porcelain=v2 -z`` output plus the content of every path it names
  (``WorktreeContext.fingerprint``).

Both hash each path the same way (:func:`_digest_files`); they differ in what they start from, whether the
executable bit is recorded, and which ``lstat`` errors read as "missing". The digests live in memory only:
a value is compared with another of the same function in the same process.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path


def paths_digest(root: Path, rels: Sequence[str]) -> str:
    """SHA-256 (hex) of the relative paths ``rels`` (in the given order) under ``root``: per path its
    bytes, then ``<missing>``, ``<link>`` and the target, or ``<x>``/``<f>`` (executable bit) and the
    file's SHA-256, or ``<other>`` and the file type. Raises ``OSError`` for an ``lstat`` failure other
    than a missing file, or a file that cannot be read."""
    raws = (rel.encode("utf-8", errors="surrogateescape") for rel in rels)
    return _digest_files(b"", root, raws, exec_bit=True, missing=(FileNotFoundError,))


def status_digest(root: Path, status: bytes) -> str:
    """SHA-256 (hex) of ``status`` (``git status --porcelain=v2 -z`` output) followed by each path it
    names (:func:`status_paths`, sorted, once): ``<missing>`` when it cannot be ``lstat``-ed, ``<link>``
    and the target, the file's SHA-256, or ``<other>`` and the file type. Raises ``OSError`` for a file
    that cannot be read."""
    return _digest_files(status, root, sorted(set(status_paths(status))), exec_bit=False, missing=(OSError,))


def status_paths(out: bytes) -> list[bytes]:
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


def _digest_files(
    seed: bytes, root: Path, raws: Iterable[bytes], *, exec_bit: bool, missing: tuple[type[OSError], ...]
) -> str:
    """SHA-256 (hex) of ``seed`` then, per raw relative path: ``\\0 path \\0`` and what is on disk there."""
    digest = hashlib.sha256(seed)
    base = os.fsencode(root)
    for raw in raws:
        digest.update(b"\0" + raw + b"\0")
        full = os.path.join(base, raw)
        try:
            st = os.lstat(full)
        except missing:
            digest.update(b"<missing>")
            continue
        if stat.S_ISLNK(st.st_mode):
            digest.update(b"<link>" + os.readlink(full))
        elif stat.S_ISREG(st.st_mode):
            if exec_bit:
                digest.update(b"<x>" if st.st_mode & stat.S_IXUSR else b"<f>")
            with open(full, "rb") as handle:
                digest.update(hashlib.file_digest(handle, "sha256").digest())
        else:
            digest.update(b"<other>%o" % stat.S_IFMT(st.st_mode))
    return digest.hexdigest()

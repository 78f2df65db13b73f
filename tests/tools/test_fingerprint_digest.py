"""The two worktree digests, byte for byte (tools/fingerprint.py; docs/design.md §6 fingerprint rule).

Each digest is recomputed here from its written-out definition, so folding the two hashing loops into one
(issue 21) cannot change a value: ``paths_digest`` records the executable bit and reads only a missing file
as ``<missing>``; ``status_digest`` starts from git's status output and reads any ``lstat`` failure as
``<missing>``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from spotpatch_agent.tools.fingerprint import paths_digest, status_digest, status_paths


def _tree(root: Path) -> None:
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.ts").write_bytes(b"export const a = 1;\n")
    (root / "run.sh").write_bytes(b"#!/bin/sh\n")
    os.chmod(root / "run.sh", 0o755)
    os.symlink("src/a.ts", root / "link.ts")
    os.mkfifo(root / "pipe")
    (root / "empty.txt").write_bytes(b"")


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def test_paths_digest_is_the_written_definition(tmp_path: Path) -> None:
    _tree(tmp_path)
    rels = ["src/a.ts", "run.sh", "link.ts", "pipe", "empty.txt", "gone.ts", "src/new/deeper.ts"]
    expected = hashlib.sha256()
    for rel, part in zip(rels, [
        b"<f>" + _sha(b"export const a = 1;\n"),
        b"<x>" + _sha(b"#!/bin/sh\n"),
        b"<link>src/a.ts",
        b"<other>%o" % 0o010000,  # S_IFIFO
        b"<f>" + _sha(b""),
        b"<missing>",
        b"<missing>",
    ], strict=True):
        expected.update(b"\0" + rel.encode() + b"\0" + part)
    assert paths_digest(tmp_path, rels) == expected.hexdigest()
    assert paths_digest(tmp_path, []) == hashlib.sha256().hexdigest()


def test_paths_digest_raises_for_a_path_under_a_file(tmp_path: Path) -> None:
    _tree(tmp_path)
    with pytest.raises(NotADirectoryError):
        paths_digest(tmp_path, ["src/a.ts/x"])


def test_status_digest_is_the_written_definition(tmp_path: Path) -> None:
    _tree(tmp_path)
    status = (
        b"1 .M N... 100644 100644 100644 0123 4567 src/a.ts\0"
        b"2 R. N... 100644 100644 100644 0123 4567 R100 run.sh\0old name.sh\0"
        b"u UU N... 100644 100644 100644 100644 0123 4567 89ab src/a.ts/x\0"
        b"? pipe\0? link.ts\0? empty.txt\0# branch.oid 0123\0"
    )
    assert status_paths(status) == [b"src/a.ts", b"run.sh", b"old name.sh", b"src/a.ts/x", b"pipe", b"link.ts",
                                    b"empty.txt"]
    parts = {
        b"empty.txt": _sha(b""),
        b"link.ts": b"<link>src/a.ts",
        b"old name.sh": b"<missing>",
        b"pipe": b"<other>%o" % 0o010000,
        b"run.sh": _sha(b"#!/bin/sh\n"),  # no executable-bit marker here: git's status shows mode changes
        b"src/a.ts": _sha(b"export const a = 1;\n"),
        b"src/a.ts/x": b"<missing>",  # any lstat failure (here ENOTDIR) reads as missing
    }
    expected = hashlib.sha256(status)
    for raw in sorted(parts):
        expected.update(b"\0" + raw + b"\0" + parts[raw])
    assert status_digest(tmp_path, status) == expected.hexdigest()

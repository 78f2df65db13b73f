"""patch_images: a post-image by exact hunk application equals what git produces, or is refused (None)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from spotpatch_agent.worktree.patch_images import (
    apply_exact,
    parse_sections,
    plain_header,
)

LONG = b"".join(b"line %d\n" % i for i in range(1, 60))

CASES: dict[str, tuple[bytes, bytes]] = {
    "one-change": (b"a\nb\nc\n", b"a\nB\nc\n"),
    "two-hunks-far-apart": (LONG, LONG.replace(b"line 3\n", b"LINE 3\n").replace(b"line 50\n", b"")),
    "add-at-end-without-newline": (b"a\nb", b"a\nb\nc"),
    "newline-added-at-end": (b"a\nb", b"a\nb\n"),
    "newline-removed-at-end": (b"a\nb\n", b"a\nb"),
    "new-file": (b"", b"x\ny\n"),
    "emptied": (b"x\ny\n", b""),
    "crlf-content": (b"one\r\ntwo\r\n", b"one\r\nTWO\r\n"),
    "diff-looking-lines": (b"+a\n-b\n\\c\n@@ d\n", b"+a\n-B\n\\c\n@@ d\n diff --git x\n"),
    "insert-at-top": (b"b\nc\n", b"a\nb\nc\n"),
    "non-utf8-bytes": (b"caf\xe9\n", b"caf\xe9 au lait\n"),
}


def git_diff(tmp_path: Path, old: bytes, new: bytes) -> bytes:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(old)
    b.write_bytes(new)
    out = subprocess.run(["git", "diff", "--no-index", "--full-index", "--no-color", "-U3", "a", "b"], cwd=tmp_path,
                         capture_output=True, check=False)
    assert out.returncode == 1, out.stderr
    return out.stdout


@pytest.mark.parametrize("name", CASES)
def test_exact_application_reproduces_git(tmp_path: Path, name: str) -> None:
    old, new = CASES[name]
    [section] = parse_sections(git_diff(tmp_path, old, new))
    assert section.has_index and not section.binary
    assert apply_exact(section, old) == new


def test_a_pre_image_that_differs_anywhere_is_refused(tmp_path: Path) -> None:
    old, new = CASES["two-hunks-far-apart"]
    [section] = parse_sections(git_diff(tmp_path, old, new))
    assert apply_exact(section, old.replace(b"line 52\n", b"line 52 edited\n")) is None  # context of hunk 2
    assert apply_exact(section, b"line 0\n" + old) is None  # shifted: git would search, we refuse
    assert apply_exact(section, None) is None


def test_binary_sections_and_metadata(tmp_path: Path) -> None:
    patch = git_diff(tmp_path, b"\x00\x01", b"\x00\x02")  # "Binary files a and b differ"
    [section] = parse_sections(patch)
    assert section.binary and apply_exact(section, b"\x00\x01") is None
    created = parse_sections(b"diff --git a/n b/n\nnew file mode 100755\nindex " + b"0" * 40 + b".." + b"e" * 40
                             + b"\n--- /dev/null\n+++ b/n\n@@ -0,0 +1 @@\n+x\n")
    assert created[0].old_oid is None and created[0].new_oid == "e" * 40 and created[0].new_mode == "100755"
    assert apply_exact(created[0], None) == b"x\n"


def test_plain_header_is_none_when_git_would_quote() -> None:
    assert plain_header("src/ünï côde.md") == "diff --git a/src/ünï côde.md b/src/ünï côde.md".encode()
    assert plain_header('say "hi".txt') is None and plain_header("tab\there") is None

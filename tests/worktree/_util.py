"""Helpers of the worktree suite: whole-repository snapshots that prove "nothing changed", digests, and
where worktrees go."""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

from tests.conftest import GIT_IDENTITY


def run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """``git args`` in ``cwd`` without optional locks (never refreshes the index); stdout text."""
    full_env = {**os.environ, **GIT_IDENTITY, "GIT_OPTIONAL_LOCKS": "0", **(env or {})}
    out = subprocess.run(["git", *args], cwd=cwd, env=full_env, check=True, capture_output=True)
    return out.stdout.decode("utf-8", "surrogateescape")


def files(root: Path) -> dict[str, bytes | str]:
    """Every entry under ``root`` except ``.git``: relative path -> bytes (files) or a type tag."""
    found: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not (Path(dirpath) == root and d == ".git")]
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[rel] = "symlink:" + os.readlink(path)
            elif path.is_dir():
                found[rel] = "dir"
            else:
                found[rel] = path.read_bytes()
    return found


def snapshot(root: Path) -> dict[str, object]:
    """Working files, index (raw bytes and ``ls-files -s``), staged diff, status, HEAD and refs."""
    index = root / ".git" / "index"
    return {
        "files": files(root),
        "index_sha": hashlib.sha256(index.read_bytes()).hexdigest() if index.exists() else None,
        "stage": run(root, "ls-files", "--stage", "-z"),
        "cached": run(root, "diff", "--cached", "--binary", "--no-color"),
        "status": run(root, "status", "--porcelain", "-z", "--untracked-files=all"),
        "head": run(root, "rev-parse", "HEAD"),
        "refs": run(root, "for-each-ref"),
    }


def worktree_list(root: Path) -> list[Path]:
    """Paths of every registered worktree of ``root`` (main one included)."""
    out = run(root, "worktree", "list", "--porcelain", "-z")
    return [Path(f[len("worktree "):]) for f in out.split("\0") if f.startswith("worktree ")]


def temp_base() -> Path:
    """Where a job worktree goes without a usable ``node_modules``: ``<tempdir>/spotpatch-worktrees``."""
    return Path(tempfile.gettempdir()) / "spotpatch-worktrees"


def sha(data: bytes) -> str:
    """SHA-256 hex digest of ``data`` (the digests apply/revert record)."""
    return hashlib.sha256(data).hexdigest()

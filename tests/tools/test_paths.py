"""Path policy (docs/design.md §7): normalization, the protected list, the filesystem checks, git ignore."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spotpatch_agent.policy.paths import (
    PathDenied,
    is_ignored,
    is_protected,
    is_readable_name,
    load_allowed,
    normalize_rel_path,
    readable_names,
    resolve_allowed,
)
from tests.conftest import git


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("src/App.tsx", "src/App.tsx"),
        ("a", "a"),
        ("src/页面/按钮.vue", "src/页面/按钮.vue"),
        ("cafe\u0301.ts", "caf\u00e9.ts"),  # NFD -> NFC
        (".env.example", ".env.example"),
        ("a/.hidden/b", "a/.hidden/b"),
    ],
)
def test_normalize_accepts(raw: str, expected: str) -> None:
    assert normalize_rel_path(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "/etc/passwd",
        "//server/share",
        "C:/Windows",
        "c:foo",
        "src\\App.tsx",
        "..\\x",
        "../x",
        "a/../b",
        "./a",
        "a/./b",
        "a//b",
        "a/",
        "a\0b",
        "a\nb",
        "a\x1bb",
        "a\u202eb",
        "%2e%2e/x",
        "a%2Fb",
        "src/%2e",
        "file.txt:stream",
        ".env.",
        "a /b",
        "NUL",
        "con.txt",
        "NODE_M~1/x",
        "x" * 2000,
    ],
)
def test_normalize_rejects(raw: str) -> None:
    with pytest.raises(PathDenied):
        normalize_rel_path(raw)


@pytest.mark.parametrize(
    "rel",
    [
        ".git/config",
        "sub/.git/HEAD",
        ".GIT/config",
        ".git",
        ".spotpatch/x",
        "node_modules/x/index.js",
        "packages/a/node_modules/b.js",
        "Node_Modules/x",
        ".env",
        ".ENV",
        ".env.local",
        "app/.env.production",
        "certs/server.pem",
        "a.KEY",
        "client.p12",
        "id_rsa",
        "home/id_ed25519.pub",
        ".npmrc",
        "sub/.netrc",
        ".pypirc",
        "package-lock.json",
        "pnpm-lock.yaml",
        "yarn.lock",
        "bun.lockb",
        "poetry.lock",
        "uv.lock",
        "Cargo.lock",
        "web/PACKAGE-LOCK.JSON",
        "dist/index.js",
        "packages/ui/dist/a.js",
        "build/x",
        ".vite/deps/a.js",
        "coverage/lcov.info",
        ".next/x",
        ".nuxt/x",
        ".svelte-kit/x",
        "out/x",
        "Dist/x",
    ],
)
def test_protected(rel: str) -> None:
    assert is_protected(rel)
    assert is_protected(rel, for_write=True)


@pytest.mark.parametrize(
    "rel",
    [
        "src/App.tsx",
        "package.json",
        "vite.config.ts",
        ".gitignore",
        "src/dist.ts",
        "build.ts",
        "docs/env.md",
        "src/keys.ts",
    ],
)
def test_not_protected(rel: str) -> None:
    assert not is_protected(rel)
    assert not is_protected(rel, for_write=True)


def test_env_example_is_read_only() -> None:
    assert not is_protected(".env.example")
    assert not is_protected("app/.ENV.EXAMPLE")
    assert is_protected(".env.example", for_write=True)


def protected_by_segments(rel: str, *, for_write: bool = False) -> bool:
    """The protected list of docs/security.md §4 written out segment by segment (is_protected's reference)."""
    segments = [s.casefold() for s in rel.split("/")]
    if any(s in (".git", ".spotpatch", "node_modules") for s in segments):
        return True
    generated = ("dist", "build", ".vite", "coverage", ".next", ".nuxt", ".svelte-kit", "out")
    if any(s in generated for s in segments[:-1]):
        return True
    name = segments[-1]
    if name == ".env" or name.startswith(".env."):
        return for_write or name != ".env.example"
    lockfiles = ("package-lock.json", "pnpm-lock.yaml", "yarn.lock", "bun.lockb", "poetry.lock", "uv.lock",
                 "cargo.lock")
    return (name.endswith((".pem", ".key", ".p12")) or name.startswith("id_")
            or name in (".npmrc", ".netrc", ".pypirc") or name in lockfiles)


NAME_SAMPLES = [
    "src/App.tsx", "a", ".env", ".env.example", "x/.ENV.Example", ".env.local", ".envrc", "env/.env.x/y",
    "dist", "dist/a", "a/dist", "a/dist/b", "x/Dist/y", "outline/x", "out/x", "x/out", ".vite", ".vite/x",
    ".git", ".gitignore", "a/.git", "a/.git/b", ".github/x", "node_modules", "a/node_modules/b",
    "Node_Modules/x", ".spotpatch", ".spotpatchrc", "k.pem", "k.pem/x", "k.PEM", "x.pem.bak", "pem", ".key",
    "a.p12", "id_rsa", "x/ID_rsa.pub", "grid_x", "yarn.lock", "x/Cargo.lock", "cargo.lock.ts", ".npmrc",
    "x/.netrc", "pypirc", "coverage", "coverage/x", ".svelte-kit/x", ".nuxt/x", ".next", "build.ts",
    "a/build/b", "页面/.env", "页面/ok.ts", "con", "con.txt", "a b", "a~1", "a.", "a//b", "", "/a", "a/../b",
]  # fmt: skip


@pytest.mark.parametrize("for_write", [False, True])
def test_is_protected_matches_the_segment_by_segment_rules(for_write: bool) -> None:
    for rel in NAME_SAMPLES:
        if rel:
            assert is_protected(rel, for_write=for_write) == protected_by_segments(rel, for_write=for_write), rel


def test_a_readable_name_is_canonical_and_not_protected_for_reading() -> None:
    for rel in NAME_SAMPLES:
        try:
            canonical = normalize_rel_path(rel) == rel
        except PathDenied:
            canonical = False
        assert is_readable_name(rel) == (canonical and not protected_by_segments(rel)), rel
    assert is_readable_name(".env.example") and not is_readable_name("cafe\u0301.ts")  # NFD is not canonical
    raw = [rel.encode() for rel in NAME_SAMPLES] + [b"\xff.ts", b"ok.ts"]
    assert readable_names(raw) == [rel for rel in NAME_SAMPLES if is_readable_name(rel)] + ["ok.ts"]
    assert readable_names([]) == []


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.ts").write_text("export const a = 1;\n")
    (root / "bom.ts").write_bytes(b"\xef\xbb\xbfconst x = '\xe4\xb8\xad';\n")
    (root / "bin.dat").write_bytes(b"abc\0def")
    (root / "latin1.txt").write_bytes(b"caf\xe9\n")
    (root / "big.txt").write_text("x" * 200)
    (tmp_path / "outside.txt").write_text("secret\n")
    os.symlink(tmp_path / "outside.txt", root / "link.txt")
    os.symlink("src", root / "srclink")
    os.symlink("missing", root / "dangling.txt")
    return root


def test_load_allowed_accepts_text_and_bom(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    file = load_allowed(root, "src/a.ts", for_write=True, max_bytes=100)
    assert file.rel == "src/a.ts" and file.data == b"export const a = 1;\n"
    assert load_allowed(root, "bom.ts", for_write=False, max_bytes=100).data.startswith(b"\xef\xbb\xbf")
    assert resolve_allowed(root, "src/a.ts", for_write=False, max_bytes=100) == root / "src" / "a.ts"


@pytest.mark.parametrize(
    "rel",
    [
        "bin.dat",
        "latin1.txt",
        "big.txt",
        "link.txt",
        "srclink/a.ts",
        "dangling.txt",
        "src",
        "missing.ts",
        "../outside.txt",
    ],
)
def test_load_allowed_denies(tmp_path: Path, rel: str) -> None:
    root = _tree(tmp_path)
    with pytest.raises(PathDenied):
        load_allowed(root, rel, for_write=False, max_bytes=100)


def test_fifo_is_denied_without_blocking(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    os.mkfifo(root / "pipe")
    with pytest.raises(PathDenied):
        load_allowed(root, "pipe", for_write=False, max_bytes=100)


def test_hard_link_to_a_file_outside_the_root_is_denied(tmp_path: Path) -> None:
    """A check can hard-link a file from outside the worktree into it; its bytes must not reach the model
    (breaker finding). Git never creates hard links in a checkout, so a second link is refused."""
    root = _tree(tmp_path)
    outside = tmp_path / "outside-secret.txt"
    outside.write_text("outside secret\n")
    os.link(outside, root / "linked.txt")
    with pytest.raises(PathDenied):
        load_allowed(root, "linked.txt", for_write=False, max_bytes=100)


@pytest.mark.anyio
async def test_is_ignored_agrees_with_git(repo_factory) -> None:
    root = repo_factory({".gitignore": "*.log\n", "src/a.ts": "a\n"})
    (root / "debug.log").write_text("x\n")
    (root / "forced.log").write_text("tracked\n")
    git(root, "add", "-f", "forced.log")
    assert not await is_ignored(root, "forced.log")  # tracked files are never ignored (as in ls-files)
    assert await is_ignored(root, "debug.log")
    assert await is_ignored(root, "never-created.log")
    assert not await is_ignored(root, "src/a.ts")
    assert not await is_ignored(root, "src/new.ts")

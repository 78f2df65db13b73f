"""The listing's fast path (git's index) against the full filesystem check, and the fallback after a check."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from wcmatch import glob as wcglob

from spotpatch_agent.policy.paths import PathDenied, is_protected, normalize_rel_path, readable_names
from spotpatch_agent.protocol.models import CheckConfig, Limits
from spotpatch_agent.tools import ToolExecutor
from spotpatch_agent.tools.globs import compile_glob
from tests.conftest import git, make_repo
from tests.tools._support import create, delete, update
from tests.tools.conftest import call

pytestmark = pytest.mark.anyio

MAX = 1024
A = "one\ntwo\nthree\n"


def tricky_repo(root: Path) -> Path:
    """Tracked symlinks (to a file, a dir, dangling), a big file, protected files; untracked extras."""
    make_repo(root, {
        "src/a.ts": "export const a = 1;\n",
        "src/b.ts": "export const b = 2;\n",
        "a.txt": A,
        "gone.txt": A,
        "empty.txt": "",
        "big.txt": "x" * (MAX + 1),
        "exact.txt": "y" * MAX,
        ".env": "SECRET=1\n",
        ".env.example": "SECRET=\n",
        "package-lock.json": "{}\n",
        "dist/out.js": "x\n",
        "node_modules/m/index.js": "x\n",
        "keys/id_rsa": "k\n",
        "docs/README.md": "# r\n",
    })  # fmt: skip
    os.symlink("src/a.ts", root / "link_file.ts")
    os.symlink("src", root / "link_dir")
    os.symlink("nowhere.ts", root / "dangling.ts")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "links")
    (root / "untracked.ts").write_text("u\n")
    (root / "untracked_big.ts").write_text("z" * (MAX + 1))
    (root / "sub").mkdir()
    (root / "sub/new.ts").write_text("n\n")
    os.symlink("a.txt", root / "untracked_link.ts")
    return root


def executor_for(root: Path, checks: tuple[CheckConfig, ...] = ()) -> ToolExecutor:
    return ToolExecutor(root, Limits(editable_file_max_bytes=MAX), checks=checks)


async def both(executor: ToolExecutor) -> tuple[tuple[str, ...], tuple[str, ...]]:
    ctx = executor._ctx
    fast = await ctx._fast_listing(MAX)
    full = await ctx._full_listing(MAX)
    assert fast is not None
    return fast.files, full.files


async def test_fast_and_full_listings_agree_on_a_fresh_worktree(tmp_path: Path) -> None:
    executor = executor_for(tricky_repo(tmp_path / "repo"))
    fast, full = await both(executor)
    assert fast == full
    assert set(fast) == {
        "src/a.ts", "src/b.ts", "a.txt", "gone.txt", "empty.txt", "exact.txt", ".env.example",
        "docs/README.md", "untracked.ts", "sub/new.ts",
    }  # fmt: skip
    listed = await executor.execute("list_files", call(glob="**", maxResults=100))
    assert listed.output.splitlines()[1:] == list(full)


async def test_fast_and_full_listings_agree_after_own_writes(tmp_path: Path) -> None:
    root = tricky_repo(tmp_path / "repo")
    executor = executor_for(root)
    await executor.execute("list_files", call(glob="**", maxResults=100))  # caches the fast listing
    assert (await executor.execute("replace_text", call(path="a.txt", oldText="two", newText="TWO"))).ok
    assert (await executor.execute("apply_patch", call(patch=create("src/c.ts", "c")))).ok
    assert (await executor.execute("apply_patch", call(patch=delete("gone.txt", "one", "two", "three")))).ok
    assert (await executor.execute("apply_patch", call(patch=update("a.txt", "TWO", "2")))).ok
    fast, full = await both(executor)
    assert fast == full
    assert "src/c.ts" in fast and "gone.txt" not in fast and "a.txt" in fast
    listed = await executor.execute("list_files", call(glob="**", maxResults=100))
    assert listed.output.splitlines()[1:] == list(full)


async def test_a_write_state_listing_sees_tracked_files_changed_on_disk(tmp_path: Path) -> None:
    # Once a write call changed the disk without naming its paths (note_written), git diff-files names every
    # tracked path whose disk state left the index.
    root = tricky_repo(tmp_path / "repo")
    executor = executor_for(root)
    executor._ctx.mark_own_write()
    (root / "src/b.ts").unlink()
    os.symlink("a.ts", root / "src/b.ts")  # tracked file replaced by a symlink
    (root / "exact.txt").write_text("y" * (MAX + 1))  # grows over the limit
    (root / "docs").rename(root / "docs2")
    os.symlink("docs2", root / "docs")  # a tracked file now behind a symlinked directory
    executor._ctx.bump()
    executor._ctx.end_own_write()
    fast, full = await both(executor)
    assert fast == full
    assert not {"src/b.ts", "exact.txt", "docs/README.md"} & set(fast)


async def test_a_write_state_listing_checks_the_named_paths(tmp_path: Path) -> None:
    # A write call that named its paths: exactly those tracked paths are checked on disk again.
    root = tricky_repo(tmp_path / "repo")
    executor = executor_for(root)
    ctx = executor._ctx
    ctx.mark_own_write()
    ctx.note_written(["src/b.ts", "exact.txt", "docs/README.md"])
    (root / "src/b.ts").unlink()
    os.symlink("a.ts", root / "src/b.ts")
    (root / "exact.txt").write_text("y" * (MAX + 1))
    (root / "docs").rename(root / "docs2")
    os.symlink("docs2", root / "docs")
    ctx.bump()
    ctx.end_own_write()
    assert not ctx._unnamed_write
    fast, full = await both(executor)
    assert fast == full
    assert not {"src/b.ts", "exact.txt", "docs/README.md"} & set(fast)


@pytest.mark.parametrize(("script", "dropped"), [
    ("ln -s a.txt made_link.ts", "made_link.ts"),
    ("head -c 2000 /dev/zero | tr '\\0' x > made_big.ts", "made_big.ts"),
    ("rm src/b.ts && ln -s a.ts src/b.ts", "src/b.ts"),
    ("head -c 2000 /dev/zero | tr '\\0' x > exact.txt", "exact.txt"),
    ("mv docs docs2 && ln -s docs2 docs", "docs/README.md"),
])  # fmt: skip
async def test_after_a_check_the_listing_checks_every_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, dropped: str
) -> None:
    root = tricky_repo(tmp_path / "repo")
    check = CheckConfig(id="mk", name="make things", command="sh", args=["-c", script])
    executor = executor_for(root, checks=(check,))
    before = await executor.execute("list_files", call(glob="**", maxResults=100))
    result = await executor.execute("run_check", call(checkId="mk"))
    # A file over editableFileMaxBytes that git would stage is named to the model (issue 25), and kept.
    assert result.ok or f"{dropped} (a file of 2000 bytes" in result.output, result.output
    assert executor._ctx.externally_changed
    assert os.path.lexists(root / dropped)

    async def no_fast_path(max_bytes: int) -> None:
        raise AssertionError("the index must not be trusted after a check")

    monkeypatch.setattr(executor._ctx, "_fast_listing", no_fast_path)
    after = await executor.execute("list_files", call(glob="**", maxResults=100))
    full = await executor._ctx._full_listing(MAX)
    assert after.output.splitlines()[1:] == list(full.files)
    assert dropped not in full.files
    assert before.ok


async def test_search_text_shows_only_readable_allowed_files(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {
        "ok.ts": "needle\n",
        "latin1.ts": b"needle \xff\n",
        "big.ts": "needle\n" + "x" * MAX,
        ".env": "needle\n",
    })  # fmt: skip
    os.symlink("ok.ts", root / "link.ts")
    executor = executor_for(root)
    result = await executor.execute("search_text", call(query="needle", glob=None, maxResults=10))
    assert result.output.splitlines() == ["1 hits.", "ok.ts:1: needle"]


NAMES = [
    "a.ts", "src/a.ts", "A/B.TS", ".env", ".env.local", ".ENV.example", ".env.example", "x/.env.example",
    "id_rsa", "x/id_ed25519.pub", "k.pem", "k.KEY", "dist/a.js", "x/dist", "x/Dist/y", "out", "out/x",
    "layout/x", "node_modules", "a/node_modules/b", ".git/config", ".github/x.yml", ".gitignore", "yarn.lock",
    "x/Cargo.lock", "con", "con.txt", "x/CON/y", "console.ts", "com1", "com10", "lpt9.x", "a.", "a /b", "a b",
    "a//b", "/a", "a/", "a~1", "a:b", "a%2eb", "é.ts", "x/naïve.ts", ".svelte-kit/x", ".vite", "x/.vite/y",
    "a+b@c-d_e.ts", "..", "a/../b", ". /x", "x.p12", "x/.npmrc", "pypirc", "a\tb", "coverage/x", "coverage",
]  # fmt: skip


def reference_names(raw: list[bytes]) -> list[str]:
    kept = []
    for item in raw:
        try:
            rel = item.decode("utf-8")
            if normalize_rel_path(rel) != rel or is_protected(rel):
                continue
        except (UnicodeDecodeError, PathDenied):
            continue
        kept.append(rel)
    return kept


def test_joined_name_checks_match_the_policy() -> None:
    raw = [name.encode() for name in NAMES]
    assert readable_names(raw) == reference_names(raw)
    plain = [n.encode() for n in NAMES if n.isascii() and normalize_rel_path_ok(n)]
    assert readable_names(plain) == reference_names(plain)
    for name in NAMES:  # one at a time, so no single odd name sends the whole batch to the slow path
        assert readable_names([b"ok.ts", name.encode()]) == reference_names([b"ok.ts", name.encode()])


def normalize_rel_path_ok(name: str) -> bool:
    try:
        return normalize_rel_path(name) == name
    except PathDenied:
        return False


@pytest.mark.parametrize("pattern", [
    "**", "*", "*.ts", "**/*.ts", "src/**", "src/**/*.{ts,tsx}", "{a,b}/*", "a/[!b]*", ".*", "**/.env*",
    "a?c", "**/dist/**", "[a-c]*/**/x",
])  # fmt: skip
def test_compiled_glob_matches_wcmatch(pattern: str) -> None:
    flags = wcglob.GLOBSTAR | wcglob.BRACE | wcglob.DOTGLOB | wcglob.FORCEUNIX
    reference = wcglob.compile(pattern, flags=flags, limit=256).match
    ours = compile_glob(pattern)
    paths = [*NAMES, "src/x.ts", "src/a/b.tsx", "a/b", "b/c", "abc", "a/bc", "a/cb", ".hidden/x", "x/./y",
             "x/../y", "./x", "src", "src/", "", "a/b/c/x", "b/q/x", "x\n", "src/a.ts\n"]  # fmt: skip
    for path in paths:
        assert bool(ours(path)) == bool(reference(path)), (pattern, path)


async def test_the_parsed_index_is_reused_only_while_the_index_file_is_unchanged(tmp_path: Path) -> None:
    root = tricky_repo(tmp_path / "repo")
    executor = executor_for(root)
    first, _ = await both(executor)
    cached = executor._ctx._index._entries
    again, _ = await both(executor)
    assert executor._ctx._index._entries is cached and again == first
    git(root, "add", "untracked_big.ts")  # the index file is replaced: parse it again
    git(root, "rm", "-q", "--cached", "src/b.ts")
    fast, full = await both(executor)
    assert executor._ctx._index._entries is not cached
    assert fast == full and "untracked_big.ts" not in fast and "src/b.ts" in fast

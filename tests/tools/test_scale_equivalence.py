"""The cheaper listing, search, ignore and whitespace paths of issue 17 give the same answers as before.

Randomized trees hold what the policy filters: ignored files (and tracked files matching an ignore pattern),
symlinks (to files, to directories, dangling, tracked and untracked), protected names, binary, empty and
oversized files, non-UTF-8 and unusual names, files under build directories in any letter case. The listing is
compared with a straightforward reference (git's own listing, each path checked on disk by the policy), the
search with a copy of the search_text code before issue 17 (git grep with exclude pathspecs, output bounded as
one buffer), ``is_ignored`` with one ``git check-ignore`` and ``diff_check`` with ``git diff --check`` on the
worktree's own index.
"""

from __future__ import annotations

import os
import random
import stat
import subprocess
from pathlib import Path

import pytest

from spotpatch_agent.policy.paths import PathDenied, is_ignored, is_protected, normalize_rel_path, readable_names
from spotpatch_agent.protocol.models import Limits
from spotpatch_agent.tools import ToolExecutor
from spotpatch_agent.tools import git_index as index_module
from spotpatch_agent.tools import search_text as search_module
from spotpatch_agent.tools.base import ToolResult
from spotpatch_agent.tools.context import WorktreeContext
from spotpatch_agent.tools.globs import glob_matcher
from tests.conftest import git
from tests.tools.conftest import call

pytestmark = pytest.mark.anyio

MAX = 2048
NEEDLE = "needleX"

_DIRS = ["src", "src/app", "lib", "Node_Modules/pkg", "node_modules/x", "DIST", "build/sub", "pkg/out", "ignored",
         "deep/a/b/c", "spaced dir", "caf\u00e9", ".hidden", ".spotpatch", "keys", "Coverage/x", "-dash"]
_NAMES = ["a.ts", "b.tsx", "c.md", ".env", ".env.local", ".env.example", "id_rsa", "package-lock.json",
          "x.log", "keep.log", "con.ts", "trail.", "tab\tname.ts", "new\nline.ts", "\u00e9t\u00e9.ts",
          "e\u0301te.ts", "UPPER.TS", "space name.ts", "-lead.ts", "q\"uote.ts", "x.pem", "data.bin"]


def _write(path: bytes, data: bytes, mode: int = 0o644) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)
    os.chmod(path, mode)


def _content(rng: random.Random) -> bytes:
    kind = rng.choice(["text", "text", "text", "needle", "needle", "empty", "binary", "big", "badutf8", "crlf"])
    if kind == "empty":
        return b""
    if kind == "binary":
        return b"head " + NEEDLE.encode() + b"\0tail\n"
    if kind == "big":
        return (NEEDLE + " big\n").encode() * (MAX // 8)
    if kind == "badutf8":
        return b"caf\xe9 " + NEEDLE.encode() + b"\n"
    if kind == "crlf":
        return f"one\r\n{NEEDLE} two\r\n".encode()
    lines = [f"line {rng.randint(0, 99)}" for _ in range(rng.randint(1, 5))]
    if kind == "needle":
        lines.insert(rng.randint(0, len(lines)), f"const v = '{NEEDLE}';")
    return ("\n".join(lines) + "\n").encode()


def random_repo(root: Path, seed: int, files: int = 120) -> Path:
    """A committed repository with tracked oddities, then untracked and ignored files on top (the worktree
    matches its index, as a job worktree does when it starts)."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    base = os.fsencode(root)
    _write(base + b"/.gitignore", b"*.log\n!keep.log\nignored/\n*.tmp\n")
    made: list[bytes] = []
    for _ in range(files):
        rel = f"{rng.choice(_DIRS)}/{rng.choice(_NAMES)}".encode()
        if rng.random() < 0.05:
            rel = rng.choice(_DIRS).encode() + b"/raw\xff\xfe.ts"  # not UTF-8
        made.append(rel)
        _write(base + b"/" + rel, _content(rng), 0o755 if rng.random() < 0.1 else 0o644)
    os.symlink("src", root / "link_dir")
    os.symlink("a.ts", root / "src/link_file.ts")
    os.symlink("nowhere.ts", root / "dangling.ts")
    git(root, "add", "-A")
    git(root, "add", "-f", "--", *(os.fsdecode(r) for r in made[:3]))  # some may match ignore patterns
    _write(base + b"/x.log", b"tracked but ignored " + NEEDLE.encode() + b"\n")
    git(root, "add", "-f", "x.log")
    git(root, "commit", "-q", "-m", "random")
    for _ in range(files // 4):  # untracked: plain, ignored, in new directories
        folder = rng.choice(_DIRS + ["fresh", "fresh/deeper"])
        rel = f"{folder}/u{rng.randint(0, 999)}{rng.choice(['.ts', '.log', '.tmp', ''])}"
        _write(base + b"/" + rel.encode(), _content(rng))
    os.symlink("lib", root / "untracked_link_dir")
    if (root / "lib").is_dir():
        os.symlink("../src/a.ts", root / "lib/untracked_link.ts")
    return root


def reference_listing(root: Path, max_bytes: int) -> list[str]:
    """git's listing of tracked and untracked-not-ignored paths, each decided by the policy on disk."""
    out = subprocess.run(["git", "-c", "core.quotepath=off", "ls-files", "-z", "--cached", "--others",
                          "--exclude-standard"], cwd=root, check=True, capture_output=True).stdout
    kept: set[str] = set()
    for raw in out.split(b"\0"):
        if not raw:
            continue
        try:
            rel = raw.decode("utf-8")
            if normalize_rel_path(rel) != rel or is_protected(rel):
                continue
        except (UnicodeDecodeError, PathDenied):
            continue
        parts = rel.split("/")
        if not all(stat.S_ISDIR(os.lstat(root.joinpath(*parts[:i])).st_mode) for i in range(1, len(parts))):
            continue
        try:
            st = os.lstat(root / rel)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_size <= max_bytes:
            kept.add(rel)
    return sorted(kept)


# ---------------------------------------------------------------- the search_text code before issue 17 (oracle)

_OLD_EXCLUDES = tuple(
    f":(exclude,icase,glob)**/{d}/**"
    for d in ("node_modules", ".spotpatch", "dist", "build", ".vite", "coverage", ".next", ".nuxt", ".svelte-kit",
              "out")
)


async def old_search_text(ctx: WorktreeContext, query: str, glob: str | None, max_results: int, raw_cap: int) -> str:
    match = None
    if glob is not None:
        compiled = glob_matcher(search_module.SEARCH_TEXT, glob)
        assert not isinstance(compiled, ToolResult)
        match = compiled
    listing = await ctx.allowed_files()
    out = await ctx.git(
        "grep", "-F", "-n", "-I", "--no-color", "-z", "--untracked", "--exclude-standard", "--full-name",
        "-e", query, "--", *_OLD_EXCLUDES, max_bytes=raw_cap, ok_codes=(0, 1),
    )  # fmt: skip
    cap = min(max_results, ctx.limits.get("searchMaxResults"))
    hits = [hit for hit in search_module._parse_hits(out.stdout)
            if hit[0] in listing.file_set and (match is None or match(hit[0]))]
    shown, more_hits = search_module._select(os.fspath(ctx.root), hits, cap, ctx.limits.get("editableFileMaxBytes"))
    more = out.truncated or more_hits
    if not shown:
        header = "No matches in allowed files." if not more else "No complete matches could be shown."
    elif more:
        header = f"Showing the first {len(shown)} hits; there are more. Narrow the query or the glob."
    else:
        header = f"{len(shown)} hits."
    return "\n".join([header, *shown])


# ---------------------------------------------------------------- listing


def _executor(root: Path) -> ToolExecutor:
    return ToolExecutor(root, Limits(editable_file_max_bytes=MAX, list_max_results=5000))


async def _listed(executor: ToolExecutor) -> list[str]:
    result = await executor.execute("list_files", call(glob="**", maxResults=5000))
    assert result.ok
    return result.output.splitlines()[1:]


@pytest.mark.parametrize("seed", range(6))
async def test_listing_matches_the_reference_on_random_trees(tmp_path: Path, seed: int) -> None:
    root = random_repo(tmp_path / "repo", seed)
    executor = _executor(root)
    reference = reference_listing(root, MAX)
    assert await _listed(executor) == reference
    ctx = executor.context
    fast = await ctx._fast_listing(MAX)
    assert fast is not None and list(fast.files) == reference  # the index path itself, not a fallback
    assert list((await ctx._full_listing(MAX)).files) == reference


@pytest.mark.parametrize("seed", range(4))
async def test_listing_matches_the_reference_after_random_writes(tmp_path: Path, seed: int) -> None:
    rng = random.Random(1000 + seed)
    root = random_repo(tmp_path / "repo", seed)
    executor = _executor(root)
    for step in range(12):
        executor.invalidate()
        searched = await executor.execute("search_text", call(query="line", glob=None, maxResults=1000))
        assert searched.output == await old_search_text(executor.context, "line", None, 1000, 8 * 1024 * 1024)
        listed = await _listed(executor)
        assert listed == reference_listing(root, MAX), step
        texts = [rel for rel in listed
                 if b"line" in (root / rel).read_bytes() and not is_protected(rel, for_write=True)]
        kind = rng.choice(["replace", "grow", "create", "delete"])
        if kind in ("replace", "grow") and texts:
            rel = rng.choice(texts)
            old = (root / rel).read_text()
            first = old.splitlines(keepends=True)[0]
            new = first + ("padding line\n" * (MAX // 40) if kind == "grow" else "")
            if old.count(first) == 1:
                result = await executor.execute("replace_text", call(path=rel, oldText=first, newText=new + "x\n"))
                assert result.ok or result.code in ("PATCH_REJECTED",), result.output
        elif kind == "create":
            rel = f"made{step}/new{step}.ts"
            patch = f"diff --git a/{rel} b/{rel}\nnew file mode 100644\n--- /dev/null\n+++ b/{rel}\n@@ -0,0 +1 @@\n+n\n"
            assert (await executor.execute("apply_patch", call(patch=patch))).ok
        elif kind == "delete" and texts:
            rel = rng.choice(texts)
            data = (root / rel).read_text()
            lines = data.split("\n")[:-1]
            if data.endswith("\n") and "\r" not in data and lines and not os.stat(root / rel).st_mode & stat.S_IXUSR:
                body = "".join(f"-{line}\n" for line in lines)
                patch = (f"diff --git a/{rel} b/{rel}\ndeleted file mode 100644\n"
                         f"--- a/{rel}\n+++ /dev/null\n@@ -1,{len(lines)} +0,0 @@\n{body}")
                result = await executor.execute("apply_patch", call(patch=patch))
                assert result.ok, result.output
    assert await _listed(executor) == reference_listing(root, MAX)


async def test_a_large_index_listing_is_never_cut_by_a_buffer_bound(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # Before issue 17 the index listing was one buffered git output under a 32 MiB bound: past about 155,000
    # files it was cut and every listing fell back to checking each file on disk. Here every buffered git output
    # is bounded to 16 KiB (the index output of this tree is about ten times that): the listing still comes
    # from the index, complete.
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    for i in range(800):
        _write(os.fsencode(root / f"d{i % 20}/file{i}.ts"), b"x\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "many")
    real_git = WorktreeContext.git

    async def small_buffers(self, *args, max_bytes=32 * 1024 * 1024, sink=None, **kwargs):
        return await real_git(self, *args, max_bytes=max_bytes if sink else min(max_bytes, 16 * 1024), sink=sink,
                              **kwargs)

    monkeypatch.setattr(WorktreeContext, "git", small_buffers)
    ctx = _executor(root).context
    fast = await ctx._fast_listing(MAX)
    assert fast is not None and not fast.truncated
    assert list(fast.files) == reference_listing(root, MAX)
    monkeypatch.setattr(index_module, "_INDEX_OUTPUT_MAX_BYTES", 16 * 1024)  # its own bound still applies
    ctx = _executor(root).context
    assert await ctx._fast_listing(MAX) is None


@pytest.mark.parametrize("seed", range(3))
async def test_the_streamed_index_parse_does_not_depend_on_chunk_boundaries(tmp_path: Path, seed: int) -> None:
    root = random_repo(tmp_path / "repo", seed)
    # a path holding the text that ends an entry in the --debug output
    _write(os.fsencode(root / "odd\tflags: 0\nname.ts"), b"x\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "odd")
    out = subprocess.run(["git", "ls-files", "-z", "-s", "--debug"], cwd=root, check=True,
                         capture_output=True).stdout
    whole = index_module.IndexParser(MAX)
    await whole.feed(out)
    expected = await whole.finish()
    assert expected is not None and len(expected.trusted) > 10
    rng = random.Random(seed)
    for batch in (1, 7, 100, 4096):
        parser = index_module.IndexParser(MAX)
        original = index_module._INDEX_BATCH_BYTES
        index_module._INDEX_BATCH_BYTES = batch
        try:
            pos = 0
            while pos < len(out):
                size = rng.randint(1, 300)
                assert await parser.feed(out[pos : pos + size])
                pos += size
            got = await parser.finish()
        finally:
            index_module._INDEX_BATCH_BYTES = original
        assert got == expected, batch
    assert await _listed(_executor(root)) == reference_listing(root, MAX)


# ---------------------------------------------------------------- search


@pytest.mark.parametrize("seed", range(5))
async def test_search_matches_the_old_search_on_random_trees(tmp_path: Path, seed: int,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    root = random_repo(tmp_path / "repo", seed)
    executor = _executor(root)
    for cap in (8 * 1024 * 1024, 4000, 700, 90):
        monkeypatch.setattr(search_module, "_RAW_OUTPUT_MAX_BYTES", cap)
        for query, glob in ((NEEDLE, None), ("line", None), ("line", "**/*.ts"), ("'", "src/**"), ("zzz", None)):
            executor.invalidate()  # no cached listing: the search decides for its hit files alone
            new = await executor.execute("search_text", call(query=query, glob=glob, maxResults=1000))
            old = await old_search_text(executor.context, query, glob, 1000, cap)
            assert new.ok and new.output == old, (cap, query, glob)


async def test_search_drops_hits_under_build_directories_before_they_count(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # Many hits in tracked build output (any letter case) come first in git's order; the bound counts only the
    # others, as the old exclude pathspecs made git do.
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    for d in ("Build", "a/node_modules/x", "DIST", "coverage", "a/.next"):
        for i in range(30):
            _write(os.fsencode(root / f"{d}/f{i}.ts"), f"{NEEDLE} {i}\n".encode() * 3)
    for i in range(5):
        _write(os.fsencode(root / f"src/s{i}.ts"), f"{NEEDLE} kept {i}\n".encode())
    _write(os.fsencode(root / "src/build"), f"{NEEDLE} a file named build\n".encode())
    _write(os.fsencode(root / "src/long.ts"), (NEEDLE + "x" * 5000 + "\n").encode())  # over MAX: not shown
    _write(os.fsencode(root / "Build/zlong.ts"), (NEEDLE + "y" * 200_000 + "\n").encode())  # skipped as it streams
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "build output")
    executor = _executor(root)
    outputs = {}
    for cap in (8 * 1024 * 1024, 2000, 300, 120, 60):
        monkeypatch.setattr(search_module, "_RAW_OUTPUT_MAX_BYTES", cap)
        executor.invalidate()
        new = await executor.execute("search_text", call(query=NEEDLE, glob=None, maxResults=1000))
        old = await old_search_text(executor.context, NEEDLE, None, 1000, cap)
        assert new.output == old, cap
        outputs[cap] = new.output
    whole = outputs[8 * 1024 * 1024]
    assert whole.startswith("6 hits.") and "src/s4.ts:1:" in whole and "src/build:1:" in whole
    assert outputs[120] != whole and outputs[120].startswith("Showing the first 1 hits")  # the bound did cut


# ---------------------------------------------------------------- ignore and whitespace checks


@pytest.mark.parametrize("listed_first", [False, True])
async def test_ignored_matches_one_check_ignore_call(tmp_path: Path, listed_first: bool) -> None:
    # WorktreeContext.ignored asks check-ignore --no-index first; the answer must be the one of a single
    # git check-ignore with the index, submodules included (git fails inside one: counts as ignored).
    root = random_repo(tmp_path / "repo", 7)
    head = git(root, "rev-parse", "HEAD").strip()
    git(root, "update-index", "--add", "--cacheinfo", f"160000,{head},vendor/mod")  # a submodule entry
    git(root, "commit", "-q", "-m", "submodule")
    (root / "vendor/mod").mkdir(parents=True)
    paths = ["x.log", "keep.log", "ignored/a.ts", "src/a.ts", "fresh/u1.tmp", "nope/none.ts", "a.tmp",
             "link_dir/a.ts", "dangling.ts", "src/link_file.ts", ".gitignore", "Node_Modules/pkg/a.ts",
             "vendor/mod", "vendor/mod/a.ts", "vendor/mod/deep/b.ts", "vendor/modx/a.ts", "vendor/a.ts"]
    paths += [os.fsdecode(p) for p in subprocess.run(["git", "ls-files", "-z", "--others", "--cached"], cwd=root,
                                                      capture_output=True, check=True).stdout.split(b"\0") if p][:80]
    paths += [os.fsdecode(p) for p in subprocess.run(["git", "ls-files", "-z", "--others", "--ignored",
                                                       "--exclude-standard"], cwd=root, capture_output=True,
                                                      check=True).stdout.split(b"\0") if p]
    ctx = WorktreeContext(root, Limits(editable_file_max_bytes=MAX))
    if listed_first:
        await ctx.allowed_files()  # the submodule paths then come from the parsed index
    answers = {}
    for rel in paths:
        if "\0" in rel:
            continue
        one = subprocess.run(["git", "check-ignore", "-q", "--", rel], cwd=root).returncode != 1
        answers[rel] = one
        assert await ctx.ignored(rel) == one, rel
        assert await is_ignored(root, rel) == one, rel
    assert answers["vendor/mod/a.ts"] and not answers["vendor/modx/a.ts"] and not answers["src/a.ts"]


async def _both_checks(ctx: WorktreeContext, rel: str, config: tuple[str, ...] = ()) -> tuple[bytes, bytes]:
    ours = await ctx.diff_check(rel, config)
    theirs = await ctx.git("diff", "--check", "--no-color", "--no-ext-diff", "--", f":(literal){rel}",
                           ok_codes=(0, 2), max_bytes=1024 * 1024, config=config)
    return ours.stdout, theirs.stdout


async def test_the_small_index_whitespace_check_matches_the_real_one(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    files = {
        "a.ts": "one\ntwo\n",
        "docs/b.md": "text\n",
        "docs/.gitattributes": "*.md whitespace=-trailing-space\n",
        ".gitattributes": "*.txt whitespace=tab-in-indent\n",
        "c.txt": "x\n",
        "win.ts": "one\r\ntwo\r\n",
        "run.sh": "#!/bin/sh\n",
        "staged.ts": "base\n",
    }
    for rel, text in files.items():
        _write(os.fsencode(root / rel), text.encode())
    os.chmod(root / "run.sh", 0o755)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    (root / "staged.ts").write_text("base  \nstaged line\n")
    git(root, "add", "staged.ts")  # the index differs from HEAD: the check is against the index
    ctx = WorktreeContext(root, Limits())
    edits = {
        "a.ts": "one  \ntwo\n\t \tmixed\n\n\n",
        "docs/b.md": "text   \n \tspace before tab\n",
        "c.txt": "x\n\tindented with a tab\n",
        "win.ts": "one\r\ntwo  \r\nthree\r\n",
        "run.sh": "#!/bin/sh\necho hi   \n",
        "staged.ts": "base  \nstaged line\nnew   \n",
    }
    for rel, text in edits.items():
        (root / rel).write_bytes(text.encode())
        for config in ((), ("core.whitespace=cr-at-eol",), ("core.whitespace=-trailing-space,space-before-tab",)):
            ours, theirs = await _both_checks(ctx, rel, config)
            assert ours == theirs, (rel, config)
        assert (await _both_checks(ctx, rel))[0]  # each edit has a problem: the comparison is not vacuous
    # attributes of a deleted .gitattributes still come from the index
    (root / "docs/.gitattributes").unlink()
    ours, theirs = await _both_checks(ctx, "docs/b.md")
    assert ours == theirs
    # an untracked file, an intent-to-add file and a file whose index entry changed after the first check
    (root / "new.ts").write_text("new   \n")
    assert await _both_checks(ctx, "new.ts") == (b"", b"")
    git(root, "add", "-N", "new.ts")
    ours, theirs = await _both_checks(ctx, "new.ts")
    assert ours == theirs and ours
    git(root, "add", "a.ts")  # the index file is replaced: the small index is built again
    ours, theirs = await _both_checks(ctx, "a.ts")
    assert ours == theirs == b""


def test_the_joined_key_suffix_scan_matches_the_policy() -> None:
    # The listing scans key-file suffixes (.pem, .key, .p12) separately from the other protected names.
    names = ["a.pem", "dir/x.KEY", "x.p12", "x.pem.bak", "a.pem/b.ts", "key/p12", "deep/a/b.Pem", "x.pem2",
             "pem", ".key", "d.key/e.key", "ok.ts", "id_rsa.pub", "src/.env.example", "src/.env.local"]
    raw = [name.encode() for name in names]
    expected = []
    for name in names:
        if not is_protected(name):
            expected.append(name)
    assert readable_names(raw) == expected
    assert "a.pem/b.ts" in expected and "x.pem.bak" in expected and "dir/x.KEY" not in expected

"""list_files and search_text: only allowed files, globs, bounds, literal queries (docs/design.md §6, §7)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import git
from tests.tools.conftest import call

pytestmark = pytest.mark.anyio

NEEDLE = "primaryButton"
FILES: dict[str, str | bytes] = {
    "src/App.tsx": f"import {{ {NEEDLE} }} from './ui';\nexport const App = () => {NEEDLE};\n",
    "src/ui/Button.vue": f"<template><button class='{NEEDLE}'>Save</button></template>\n",
    "src/ui/index.ts": "export * from './Button.vue';\n",
    "README.md": "# demo\n",
    ".env": f"{NEEDLE}=1\n",
    ".env.example": f"{NEEDLE}=\n",
    ".env.local": f"{NEEDLE}=2\n",
    "package-lock.json": f'{{"{NEEDLE}": 1}}\n',
    "node_modules/ui/index.js": f"{NEEDLE}\n",
    "packages/x/node_modules/y.js": f"{NEEDLE}\n",
    "dist/app.js": f"{NEEDLE}\n",
    "server.key": f"{NEEDLE}\n",
    "id_rsa": f"{NEEDLE}\n",
    ".npmrc": f"//registry/:_authToken={NEEDLE}\n",
    ".gitignore": "*.log\n",
    "logo.bin": b"\0\1" + NEEDLE.encode(),
}


def _add_untracked(root: Path, tmp_path: Path) -> None:
    (root / "src" / "Draft.tsx").write_text(f"const d = '{NEEDLE}';\n")  # untracked, not ignored
    (root / "debug.log").write_text(f"{NEEDLE}\n")  # ignored
    (tmp_path / "outside.ts").write_text(f"{NEEDLE}\n")
    os.symlink(tmp_path / "outside.ts", root / "src" / "linked.ts")
    os.symlink("ui", root / "src" / "uilink")
    git(root, "add", "src/linked.ts")  # a tracked symlink


def _paths(output: str) -> list[str]:
    return output.splitlines()[1:]


async def test_list_files_only_allowed(make_executor, tmp_path: Path) -> None:
    root, executor = make_executor(FILES)
    _add_untracked(root, tmp_path)
    result = await executor.execute("list_files", call(glob="**", maxResults=100))
    assert result.ok and result.code is None and result.path is None
    assert _paths(result.output) == sorted(
        [".env.example", ".gitignore", "README.md", "logo.bin", "src/App.tsx", "src/Draft.tsx",
         "src/ui/Button.vue", "src/ui/index.ts"]
    )  # fmt: skip
    assert result.output.splitlines()[0] == "8 files match."
    assert str(root) not in result.output and str(tmp_path) not in result.output


@pytest.mark.parametrize(
    ("glob", "expected"),
    [
        ("src/**/*.{ts,tsx}", ["src/App.tsx", "src/Draft.tsx", "src/ui/index.ts"]),
        ("**/*.vue", ["src/ui/Button.vue"]),
        ("*.md", ["README.md"]),
        ("src/*", ["src/App.tsx", "src/Draft.tsx"]),
        ("**/.env*", [".env.example"]),
        ("node_modules/**", []),
        ("SRC/**", []),
    ],
)
async def test_list_files_glob(make_executor, tmp_path: Path, glob: str, expected: list[str]) -> None:
    root, executor = make_executor(FILES)
    _add_untracked(root, tmp_path)
    result = await executor.execute("list_files", call(glob=glob, maxResults=100))
    assert _paths(result.output) == expected
    if not expected:
        assert "No allowed files match" in result.output


async def test_list_files_max_results(make_executor) -> None:
    files = {f"src/f{n:02}.ts": "x\n" for n in range(30)}
    _, executor = make_executor(files, list_max_results=10)
    result = await executor.execute("list_files", call(glob="**", maxResults=5))
    assert _paths(result.output) == [f"src/f{n:02}.ts" for n in range(5)]
    assert "30 files match; showing the first 5" in result.output
    result = await executor.execute("list_files", call(glob="**", maxResults=1000))
    assert len(_paths(result.output)) == 10  # capped by listMaxResults


async def test_list_files_invalid_glob_is_retryable(make_executor) -> None:
    _, executor = make_executor(FILES)
    result = await executor.execute("list_files", call(glob="{a,b}" * 12, maxResults=10))
    assert result.code == "TOOL_ARGUMENTS_INVALID" and result.retryable


async def test_search_hits_only_in_allowed_files(make_executor, tmp_path: Path) -> None:
    root, executor = make_executor(FILES)
    _add_untracked(root, tmp_path)
    result = await executor.execute("search_text", call(query=NEEDLE, glob=None, maxResults=50))
    assert result.ok
    hits = _paths(result.output)
    assert hits == [
        f".env.example:1: {NEEDLE}=",
        f"src/App.tsx:1: import {{ {NEEDLE} }} from './ui';",
        f"src/App.tsx:2: export const App = () => {NEEDLE};",
        f"src/Draft.tsx:1: const d = '{NEEDLE}';",
        f"src/ui/Button.vue:1: <template><button class='{NEEDLE}'>Save</button></template>",
    ]
    assert result.output.splitlines()[0] == "5 hits."
    assert str(root) not in result.output and str(tmp_path) not in result.output


async def test_search_skips_a_hard_link_to_a_file_outside_the_root(make_executor, tmp_path: Path) -> None:
    """A hard link a check made to an outside file is not searched (same rule as read_file)."""
    root, executor = make_executor(FILES)
    outside = tmp_path / "outside-secret.ts"
    outside.write_text(f"const leaked = '{NEEDLE}-outside';\n")
    os.link(outside, root / "src" / "linked.ts")
    result = await executor.execute("search_text", call(query=NEEDLE + "-outside", glob=None, maxResults=50))
    assert "linked.ts" not in result.output and "leaked" not in result.output


async def test_search_glob_and_max_results(make_executor) -> None:
    _, executor = make_executor(FILES, search_max_results=2)
    result = await executor.execute("search_text", call(query=NEEDLE, glob="src/**/*.vue", maxResults=10))
    assert _paths(result.output) == [
        f"src/ui/Button.vue:1: <template><button class='{NEEDLE}'>Save</button></template>"
    ]
    result = await executor.execute("search_text", call(query=NEEDLE, glob=None, maxResults=10))
    assert len(_paths(result.output)) == 2
    assert "there are more" in result.output


@pytest.mark.parametrize(
    "query",
    ["-e", "--help", "-n", "$(touch pwned)", "`touch pwned`; rm -rf /", "a|b", "a.*b", "[x]", "'\"", "\\"],
)
async def test_search_query_is_literal(make_executor, query: str) -> None:
    text = f"const s = `{query}`;\n"
    root, executor = make_executor({"src/a.ts": text, "src/b.ts": "abab axb\n"})
    result = await executor.execute("search_text", call(query=query, glob=None, maxResults=10))
    assert result.ok
    assert _paths(result.output) == [f"src/a.ts:1: {text.rstrip()}"]
    assert not (root / "pwned").exists()


async def test_search_no_hits_and_long_lines(make_executor) -> None:
    long_line = "x" * 500 + NEEDLE + "\n"
    _, executor = make_executor({"src/min.js": long_line})
    result = await executor.execute("search_text", call(query="not-there", glob=None, maxResults=5))
    assert result.ok and result.output == "No matches in allowed files."
    result = await executor.execute("search_text", call(query=NEEDLE, glob=None, maxResults=5))
    hit = _paths(result.output)[0]
    assert hit.startswith("src/min.js:1: xxx") and hit.endswith("…") and len(hit) < 230

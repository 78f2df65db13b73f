"""read_file: bounded line-numbered windows, one uniform denial for every unusable path (docs/design.md §6)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spotpatch_agent.tools import PATH_DENIED_MESSAGE
from tests.conftest import git
from tests.tools.conftest import call

pytestmark = pytest.mark.anyio

FILES: dict[str, str | bytes] = {
    "src/App.tsx": "".join(f"line {n}\n" for n in range(1, 11)),
    "src/bom.ts": "\ufeffconst 名前 = '按钮';\r\nexport {};\r\n".encode(),
    ".env": "API_KEY=sk-secret\n",
    ".env.example": "API_KEY=\n",
    "package-lock.json": "{}\n",
    "node_modules/x/index.js": "module.exports = 1;\n",
    ".gitignore": "*.log\nsecret/\n",
    "logo.png": b"\x89PNG\r\n\x1a\n\0\0\0",
    "big.txt": "x" * 5000 + "\n",
    "empty.txt": "",
}


def read(path: str, start: int | None = None, end: int | None = None) -> str:
    return call(path=path, startLine=start, endLine=end)


async def test_reads_numbered_window(make_executor) -> None:
    _, executor = make_executor(FILES)
    result = await executor.execute("read_file", read("src/App.tsx", 3, 4))
    assert result.ok and result.path == "src/App.tsx" and not result.wrote
    assert result.output == (
        "src/App.tsx (lines 3-4 of 10)\n    3| line 3\n    4| line 4\n"
        "[lines 5-10 not shown: read them in one call with startLine 5 and endLine 10]"
    )


async def test_defaults_and_line_limit(make_executor) -> None:
    _, executor = make_executor(FILES, read_max_lines=4)
    result = await executor.execute("read_file", read("src/App.tsx"))
    assert result.output.splitlines()[0] == "src/App.tsx (lines 1-4 of 10)"
    assert result.output.endswith("[lines 5-10 not shown: read the next range with startLine 5 and endLine 8]")
    result = await executor.execute("read_file", read("src/App.tsx", 9, 400))
    assert result.output == "src/App.tsx (lines 9-10 of 10)\n    9| line 9\n   10| line 10"


async def test_byte_limit_and_long_line(make_executor) -> None:
    _, executor = make_executor(FILES, read_max_bytes=1000)
    result = await executor.execute("read_file", read("src/App.tsx"))
    assert "(lines 1-10 of 10)" in result.output
    result = await executor.execute("read_file", read("big.txt"))
    assert result.ok
    assert "[line 1 is longer than 1000 bytes and was cut]" in result.output
    assert len(result.output.encode()) < 1200


async def test_bom_and_crlf_are_not_shown(make_executor) -> None:
    _, executor = make_executor(FILES)
    result = await executor.execute("read_file", read("src/bom.ts"))
    assert result.output == "src/bom.ts (lines 1-2 of 2)\n    1| const 名前 = '按钮';\n    2| export {};"


async def test_empty_file_and_start_past_end(make_executor) -> None:
    _, executor = make_executor(FILES)
    assert (await executor.execute("read_file", read("empty.txt"))).output == "empty.txt (empty file)"
    result = await executor.execute("read_file", read("src/App.tsx", 50))
    assert result.ok and "past the end" in result.output and "10 lines" in result.output


async def test_env_example_is_readable(make_executor) -> None:
    _, executor = make_executor(FILES)
    result = await executor.execute("read_file", read(".env.example"))
    assert result.ok and "API_KEY=" in result.output


def _prepare_denials(root: Path, tmp_path_outside: Path) -> None:
    tmp_path_outside.write_text("outside secret\n")
    os.symlink(tmp_path_outside, root / "src" / "out-link.ts")
    os.symlink("nowhere.ts", root / "src" / "dangling.ts")
    os.symlink("src", root / "srcdir")
    (root / "debug.log").write_text("ignored\n")
    (root / "secret").mkdir()
    (root / "secret" / "notes.md").write_text("ignored dir\n")


DENIED = [
    "src/missing.ts",
    ".env",
    ".ENV",
    ".git/config",
    ".git/HEAD",
    "node_modules/x/index.js",
    "package-lock.json",
    "../outside.txt",
    "/etc/passwd",
    "src/../.env",
    "src",
    "src/",
    "src/out-link.ts",
    "src/dangling.ts",
    "srcdir/App.tsx",
    "logo.png",
    "big.txt",
    "debug.log",
    "secret/notes.md",
    "src%2fApp.tsx",
    "src\\App.tsx",
    "",
]


@pytest.mark.parametrize("path", DENIED)
async def test_uniform_denial(make_executor, tmp_path: Path, path: str) -> None:
    root, executor = make_executor(FILES, editable_file_max_bytes=4096)
    _prepare_denials(root, tmp_path / "outside.txt")
    before = git(root, "status", "--porcelain")
    result = await executor.execute("read_file", read(path))
    assert (result.ok, result.code, result.retryable) == (False, "TOOL_PATH_DENIED", True)
    assert result.output == PATH_DENIED_MESSAGE
    assert result.path is None and not result.wrote
    assert git(root, "status", "--porcelain") == before
    assert "secret" not in result.output


async def test_read_after_write_is_fresh(make_executor) -> None:
    root, executor = make_executor(FILES)
    first = await executor.execute("read_file", read("src/App.tsx", 2, 2))
    assert "line 2" in first.output
    result = await executor.execute("replace_text", call(path="src/App.tsx", oldText="line 2\n", newText="LINE TWO\n"))
    assert result.ok and result.wrote and executor.version == 1
    again = await executor.execute("read_file", read("src/App.tsx", 2, 2))
    assert "LINE TWO" in again.output and "line 2" not in again.output


async def test_invalidate_drops_caches(make_executor) -> None:
    root, executor = make_executor(FILES)
    assert "line 1" in (await executor.execute("read_file", read("src/App.tsx", 1, 1))).output
    assert "src/New.tsx" not in (await executor.execute("list_files", call(glob="**", maxResults=50))).output
    (root / "src" / "App.tsx").write_text("changed by a check\n")
    (root / "src" / "New.tsx").write_text("new\n")
    # Same version: the cached read and listing are served.
    assert "line 1" in (await executor.execute("read_file", read("src/App.tsx", 1, 1))).output
    executor.invalidate()
    assert "changed by a check" in (await executor.execute("read_file", read("src/App.tsx", 1, 1))).output
    assert "src/New.tsx" in (await executor.execute("list_files", call(glob="**", maxResults=50))).output


# ---------------------------------------------------------------- one sufficient read (issue 16 part 4)


async def test_the_hint_after_a_single_line_names_a_range_not_a_line(make_executor) -> None:
    _, executor = make_executor(FILES)
    result = await executor.execute("read_file", read("src/App.tsx", 3, 3))
    hint = result.output.splitlines()[-1]
    assert hint == "[lines 4-10 not shown: read them in one call with startLine 4 and endLine 10]"
    # Following the hint reads the rest at once: no further hint.
    result = await executor.execute("read_file", read("src/App.tsx", 4, 10))
    assert result.output.splitlines()[-1] == "   10| line 10"


async def test_a_rangeless_read_of_a_target_file_returns_the_context_around_the_offered_line(repo_factory) -> None:
    from spotpatch_agent.protocol.models import Limits
    from spotpatch_agent.tools.executor import ToolExecutor
    from spotpatch_agent.tools.read_file import FOCUS_CONTEXT_ABOVE

    big = "".join(f"row {n}\n" for n in range(1, 2001))
    root = repo_factory({"src/Price.tsx": big, "src/Other.tsx": big})
    executor = ToolExecutor(root, Limits(), focus={"src/Price.tsx": (900,)})
    result = await executor.execute("read_file", read("src/Price.tsx"))
    lines = result.output.splitlines()
    start = 900 - FOCUS_CONTEXT_ABOVE
    assert lines[0] == f"src/Price.tsx (lines {start}-{start + 399} of 2000)"
    assert "  900| row 900" in lines and f"  {start}| row {start}" in lines
    assert lines[-1] == (f"[lines 1-{start - 1} not shown (the read starts near the target's line): read them "
                         f"with startLine {start - 400} and endLine {start - 1}]")
    # Another file, and an explicit range of the target's file, read as asked.
    assert (await executor.execute("read_file", read("src/Other.tsx"))).output.startswith(
        "src/Other.tsx (lines 1-400 of 2000)")
    assert (await executor.execute("read_file", read("src/Price.tsx", 1, 2))).output.startswith(
        "src/Price.tsx (lines 1-2 of 2000)")
    # An offered line inside the default window changes nothing.
    near = ToolExecutor(root, Limits(), focus={"src/Price.tsx": (12,)})
    assert (await near.execute("read_file", read("src/Price.tsx"))).output.startswith(
        "src/Price.tsx (lines 1-400 of 2000)")

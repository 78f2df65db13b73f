"""replace_text: one exact occurrence, exact bytes, atomic write, whitespace check (docs/design.md §6)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from spotpatch_agent.errors import JobFailure
from spotpatch_agent.protocol.errors import ErrorCode
from tests.conftest import git
from tests.tools.conftest import call

pytestmark = pytest.mark.anyio

BUTTON = "export function Button() {\n  return <button className='btn'>Save</button>;\n}\n"


def replace(path: str, old: str, new: str) -> str:
    return call(path=path, oldText=old, newText=new)


async def test_success(make_executor) -> None:
    root, executor = make_executor({"src/Button.tsx": BUTTON})
    result = await executor.execute(
        "replace_text", replace("src/Button.tsx", "className='btn'", "className='btn primary'")
    )
    assert (result.ok, result.wrote, result.path, result.code) == (True, True, "src/Button.tsx", None)
    assert (root / "src/Button.tsx").read_text() == BUTTON.replace("'btn'", "'btn primary'")
    assert result.output.startswith("Replaced 1 occurrence in src/Button.tsx; the new text is at lines 2-2.")
    assert "    2|   return <button className='btn primary'>Save</button>;" in result.output
    assert executor.version == 1
    assert str(root) not in result.output
    assert not [p for p in (root / "src").iterdir() if p.name.endswith(".tmp")]


async def test_keeps_file_mode(make_executor) -> None:
    root, executor = make_executor({"bin/run.sh": "#!/bin/sh\necho hi\n"})
    (root / "bin/run.sh").chmod(0o755)
    result = await executor.execute("replace_text", replace("bin/run.sh", "echo hi", "echo hello"))
    assert result.ok
    assert stat.S_IMODE(os.stat(root / "bin/run.sh").st_mode) == 0o755


async def test_zero_matches(make_executor) -> None:
    root, executor = make_executor({"src/Button.tsx": BUTTON})
    result = await executor.execute("replace_text", replace("src/Button.tsx", "    2|   return", "return"))
    assert (result.ok, result.code, result.retryable, result.wrote) == (False, "PATCH_REJECTED", True, False)
    assert "not found" in result.output and "line-number prefixes" in result.output
    assert (root / "src/Button.tsx").read_text() == BUTTON
    assert executor.version == 0


async def test_two_matches_names_both_lines(make_executor) -> None:
    text = "const a = 'Save';\nconst b = 1;\nconst c = 'Save';\n"
    root, executor = make_executor({"src/a.ts": text})
    result = await executor.execute("replace_text", replace("src/a.ts", "'Save'", "'Go'"))
    assert (result.code, result.retryable) == ("PATCH_REJECTED", True)
    assert "2 times" in result.output and "lines 1, 3" in result.output
    assert (root / "src/a.ts").read_text() == text


async def test_overlapping_matches_are_ambiguous(make_executor) -> None:
    root, executor = make_executor({"src/a.txt": "aaa\n"})
    result = await executor.execute("replace_text", replace("src/a.txt", "aa", "b"))
    assert result.code == "PATCH_REJECTED" and "2 times" in result.output
    assert (root / "src/a.txt").read_text() == "aaa\n"


async def test_bom_and_cjk_bytes_preserved(make_executor) -> None:
    original = "\ufeff// 按钮组件\nconst label = '保存';\nconst hint = '点击保存';\n".encode()
    root, executor = make_executor({"src/i18n.ts": original})
    result = await executor.execute("replace_text", replace("src/i18n.ts", "'保存'", "'提交'"))
    assert result.ok
    assert (root / "src/i18n.ts").read_bytes() == original.replace("'保存'".encode(), "'提交'".encode())


async def test_bom_never_added(make_executor) -> None:
    root, executor = make_executor({"src/a.ts": "const a = 1;\n"})
    result = await executor.execute("replace_text", replace("src/a.ts", "const a", "\ufeffconst a"))
    assert result.code == "PATCH_REJECTED"
    assert (root / "src/a.ts").read_bytes() == b"const a = 1;\n"
    result = await executor.execute("replace_text", replace("src/a.ts", "a = 1", "a = 2"))
    assert result.ok
    assert (root / "src/a.ts").read_bytes() == b"const a = 2;\n"


async def test_crlf_preserved(make_executor) -> None:
    original = b"line one\r\nline two\r\nline three\r\n"
    root, executor = make_executor({"win.txt": original})
    result = await executor.execute(
        "replace_text", replace("win.txt", "line one\nline two\n", "line 1\nnew line\nline 2\n")
    )
    assert result.ok, result.output
    assert (root / "win.txt").read_bytes() == b"line 1\r\nnew line\r\nline 2\r\nline three\r\n"


async def test_lf_file_gets_no_crlf(make_executor) -> None:
    root, executor = make_executor({"unix.txt": "a\nb\n"})
    result = await executor.execute("replace_text", replace("unix.txt", "a\r\nb", "x\r\ny"))
    assert result.ok
    assert (root / "unix.txt").read_bytes() == b"x\ny\n"


async def test_whitespace_failure_restores(make_executor) -> None:
    root, executor = make_executor({"src/Button.tsx": BUTTON})
    before = git(root, "status", "--porcelain")
    result = await executor.execute("replace_text", replace("src/Button.tsx", "Save</button>;", "Save</button>;   "))
    assert (result.ok, result.code, result.retryable, result.wrote) == (False, "PATCH_REJECTED", True, False)
    assert "line 2: trailing whitespace" in result.output
    assert (root / "src/Button.tsx").read_text() == BUTTON
    assert git(root, "status", "--porcelain") == before
    assert executor.version >= 1  # the disk was touched, caches were dropped


async def test_preexisting_whitespace_does_not_block(make_executor) -> None:
    text = "const a = 1;   \nconst b = 2;\n"
    root, executor = make_executor({"src/a.ts": text})
    (root / "src/a.ts").write_text("const a = 1;   \nconst b = 2;\nconst c = 3;  \n")  # worktree change
    result = await executor.execute("replace_text", replace("src/a.ts", "b = 2", "b = 20"))
    assert result.ok, result.output


async def test_deleting_text(make_executor) -> None:
    root, executor = make_executor({"src/a.ts": "keep\ndrop\nkeep too\n"})
    result = await executor.execute("replace_text", replace("src/a.ts", "drop\n", ""))
    assert result.ok and "Removed 1 occurrence" in result.output
    assert (root / "src/a.ts").read_text() == "keep\nkeep too\n"


@pytest.mark.parametrize(
    "path",
    [
        ".env",
        ".env.example",
        ".git/config",
        "node_modules/x/index.js",
        "package-lock.json",
        "../outside.txt",
        "/etc/passwd",
        "src/link.ts",
        "srclink/a.ts",
        "src/missing.ts",
        "debug.log",
        "logo.png",
        "src",
        "src\\a.ts",
    ],
)
async def test_write_path_failures_are_terminal(make_executor, tmp_path: Path, path: str) -> None:
    files: dict[str, str | bytes] = {
        "src/a.ts": "const x = 'old';\n",
        ".env": "KEY=old\n",
        ".env.example": "KEY=old\n",
        "node_modules/x/index.js": "old\n",
        "package-lock.json": '{"old": 1}\n',
        ".gitignore": "*.log\n",
        "logo.png": b"\x89PNG\0old",
    }
    root, executor = make_executor(files)
    outside = tmp_path / "outside.txt"
    outside.write_text("old secret\n")
    os.symlink(outside, root / "src" / "link.ts")
    os.symlink("src", root / "srclink")
    (root / "debug.log").write_text("old\n")
    before = {p: p.read_bytes() for p in [outside, *root.rglob("*")] if p.is_file() and ".git" not in p.parts}
    with pytest.raises(JobFailure) as info:
        await executor.execute("replace_text", replace(path, "old", "new"))
    assert info.value.code is ErrorCode.CHANGESET_REJECTED
    assert str(root) not in info.value.message and str(tmp_path) not in info.value.message
    assert {p: p.read_bytes() for p in before} == before
    assert outside.read_text() == "old secret\n"
    assert git(root, "config", "--get", "core.bare").strip() == "false"


async def test_result_over_size_limit_is_terminal(make_executor) -> None:
    text = "x" * 900 + "\nMARK\n"
    root, executor = make_executor({"src/a.ts": text}, editable_file_max_bytes=1000)
    with pytest.raises(JobFailure) as info:
        await executor.execute("replace_text", replace("src/a.ts", "MARK", "y" * 200))
    assert info.value.code is ErrorCode.LIMIT_EXCEEDED
    assert (root / "src/a.ts").read_text() == text


async def test_sequential_writes_see_each_other(make_executor) -> None:
    root, executor = make_executor({"src/a.ts": "a = 1\nb = 1\n"})
    assert (await executor.execute("replace_text", replace("src/a.ts", "a = 1", "a = 2"))).ok
    assert (await executor.execute("replace_text", replace("src/a.ts", "b = 1", "b = 2"))).ok
    again = await executor.execute("replace_text", replace("src/a.ts", "a = 1", "a = 3"))
    assert again.code == "PATCH_REJECTED"
    assert (root / "src/a.ts").read_text() == "a = 2\nb = 2\n"
    assert executor.version == 2


async def test_route_paths_with_glob_characters(make_executor) -> None:
    route = "src/routes/[slug]/+page.svelte"
    root, executor = make_executor({route: "<h1>Old</h1>\n", "src/routes/s/+page.svelte": "<h1>Old</h1>\n"})
    bad = await executor.execute("replace_text", replace(route, "<h1>Old</h1>", "<h1>New</h1>  "))
    assert bad.code == "PATCH_REJECTED" and "trailing whitespace" in bad.output
    good = await executor.execute("replace_text", replace(route, "<h1>Old</h1>", "<h1>New</h1>"))
    assert good.ok
    assert (root / route).read_text() == "<h1>New</h1>\n"
    assert (root / "src/routes/s/+page.svelte").read_text() == "<h1>Old</h1>\n"
    read = await executor.execute("read_file", call(path=route, startLine=None, endLine=None))
    assert read.ok and "<h1>New</h1>" in read.output

"""run_git: fixed argv, bounded sanitized errors, timeout, and cancellation that leaves no process."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

from spotpatch_agent.errors import GitError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.worktree.git import MAX_ERROR_CHARS, run_git, sanitize

pytestmark = pytest.mark.anyio


async def test_success_returns_bytes(repo_factory) -> None:
    root = repo_factory({"a.txt": "a\n"})
    result = await run_git(["rev-parse", "--show-toplevel"], cwd=root, read_only=True)
    assert result.returncode == 0
    assert Path(result.stdout.decode().strip()).resolve() == root.resolve()


async def test_input_goes_to_stdin(repo_factory) -> None:
    root = repo_factory({"a.txt": "a\n"})
    result = await run_git(["hash-object", "--stdin"], cwd=root, input=b"a\n")
    expected = await run_git(["rev-parse", "HEAD:a.txt"], cwd=root)
    assert result.stdout == expected.stdout


async def test_failure_is_sanitized_git_error(repo_factory) -> None:
    root = repo_factory({"a.txt": "a\n"})
    with pytest.raises(GitError) as info:
        await run_git(["ls-files", "--error-unmatch", str(root / "missing.txt")], cwd=root)
    err = info.value
    assert err.code is ErrorCode.INTERNAL
    assert "git ls-files failed" in err.message
    assert "missing.txt" in err.message
    assert str(root) not in err.message and str(root.resolve()) not in err.message


async def test_check_false_returns_failure(repo_factory) -> None:
    root = repo_factory({"a.txt": "a\n"})
    result = await run_git(["rev-parse", "--verify", "--quiet", "nope"], cwd=root, check=False)
    assert result.returncode != 0


async def test_missing_cwd_is_git_error(tmp_path: Path) -> None:
    with pytest.raises(GitError) as info:
        await run_git(["status"], cwd=tmp_path / "missing")
    assert str(tmp_path) not in info.value.message


def test_sanitize_replaces_paths_and_bounds_length(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    text = f"fatal: '{root}/src/a.js' and '{tmp_path}/elsewhere/x' and C:\\Users\\me\\k.pem"
    out = sanitize(text, root)
    assert "./src/a.js" in out
    assert str(tmp_path) not in out and "Users" not in out
    assert out.count("<path>") == 2
    assert "src/a.js:3" in sanitize("error: patch failed: src/a.js:3", root)
    long = sanitize("x" * 5000, root)
    assert len(long) == MAX_ERROR_CHARS


async def test_timeout_is_git_error(repo_factory) -> None:
    root = repo_factory({"a.txt": "a\n"})
    started = time.monotonic()
    with pytest.raises(GitError, match="timed out"):
        await run_git(["-c", "alias.slow=!sleep 20", "slow"], cwd=root, timeout=0.5)
    assert time.monotonic() - started < 10


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
async def test_cancellation_kills_git_and_its_children(repo_factory, tmp_path: Path) -> None:
    root = repo_factory({"a.txt": "a\n"})
    pidfile = tmp_path / "child.pid"
    alias = f"alias.slow=!echo $$ > '{pidfile}'; sleep 30; echo done"
    with anyio.move_on_after(5) as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: run_git(["-c", alias, "slow"], cwd=root, timeout=60))
            while not (pidfile.exists() and pidfile.read_text().strip()):
                await anyio.sleep(0.02)
            tg.cancel_scope.cancel()
    assert not scope.cancelled_caught
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        await anyio.sleep(0.05)
    assert not _alive(pid), "the shell started by git survived cancellation"


async def test_repository_environment_is_ignored(repo_factory, tmp_path: Path, monkeypatch) -> None:
    root = repo_factory({"a.txt": "a\n"})
    other = repo_factory({"b.txt": "b\n"}, name="other")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    result = await run_git(["ls-files"], cwd=root, read_only=True)
    assert result.stdout == b"a.txt\n"
    assert os.environ["GIT_DIR"]  # the engine's own environment is left alone

"""The one git runner (spotpatch_agent/git_runner.py): hardening, environment, bounds and tree kill, for the
async and the blocking entry point alike."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

from spotpatch_agent.errors import GitError
from spotpatch_agent.git_runner import run_git_process, run_git_sync

pytestmark = pytest.mark.anyio


def _exited(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return True
    return stat[stat.rindex(b")") + 2 :].startswith(b"Z")


def _gone(pid: int) -> bool:
    """Whether ``pid`` exits within 10 s (SIGKILL is delivered asynchronously; a killed grandchild stays a
    zombie until init reaps it: that counts as exited). A process the runner failed to kill sleeps 60 s."""
    deadline = time.monotonic() + 10
    while not _exited(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _alias(name: str, shell: str) -> list[str]:
    return ["-c", f"alias.{name}=!{shell}", name]


async def test_environment_is_allowlisted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-reaches-git")
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    sync = run_git_sync(_alias("e", "env"), cwd=tmp_path, read_only=True)
    run = await run_git_process(_alias("e", "env"), cwd=tmp_path, read_only=True)
    for out in (sync.stdout, run.stdout):
        assert b"sk-never-reaches-git" not in out and b"elsewhere" not in out
        assert b"GIT_TERMINAL_PROMPT=0" in out and b"GIT_OPTIONAL_LOCKS=0" in out and b"LC_ALL=C" in out
        assert b"GIT_NO_LAZY_FETCH=1" in out  # a partial clone's missing object is never fetched (issue 25)


async def test_hooks_are_disabled(tmp_path: Path) -> None:
    run = await run_git_process(["config", "--get", "core.hooksPath"], cwd=tmp_path, read_only=True)
    assert run.stdout.decode().strip() == os.devnull
    assert run_git_sync(["config", "--get", "core.hooksPath"], cwd=tmp_path).stdout.decode().strip() == os.devnull


async def test_stdout_past_the_bound_is_cut_and_git_killed(tmp_path: Path) -> None:
    sync = run_git_sync(_alias("big", "yes"), cwd=tmp_path, max_bytes=1000, timeout=30)
    run = await run_git_process(_alias("big", "yes"), cwd=tmp_path, max_bytes=1000, timeout=30)
    for result in (sync, run):
        assert result.truncated and result.returncode is None and len(result.stdout) == 1000


async def test_timeout_kills_the_process_tree(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    hang = _alias("hang", f"sh -c 'echo $$ > {pid_file}; exec sleep 60'")
    with pytest.raises(GitError, match=r"^git hang timed out after 1 s$"):
        run_git_sync(hang, cwd=tmp_path, timeout=1)
    assert _gone(int(pid_file.read_text()))
    pid_file.unlink()
    with pytest.raises(GitError, match=r"^git hang timed out after 1 s$"):
        await run_git_process(hang, cwd=tmp_path, timeout=1)
    assert _gone(int(pid_file.read_text()))


async def test_cancellation_kills_the_process_tree(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    hang = _alias("hang", f"sh -c 'echo $$ > {pid_file}; exec sleep 60'")
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: run_git_process(hang, cwd=tmp_path, timeout=None))
        while not pid_file.exists() or not pid_file.read_text().strip():
            await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert _gone(int(pid_file.read_text()))


async def test_exit_status_is_returned_not_raised(tmp_path: Path) -> None:
    sync = run_git_sync(["rev-parse", "--verify", "HEAD"], cwd=tmp_path)
    run = await run_git_process(["rev-parse", "--verify", "HEAD"], cwd=tmp_path)
    for result in (sync, run):
        assert result.returncode not in (0, None) and not result.truncated and result.stderr


async def test_a_process_left_holding_the_output_is_killed_at_the_timeout(tmp_path: Path) -> None:
    # git exits at once, but a process it started keeps its stdout open: the call still ends at the timeout,
    # with an error (never a silently partial output), and that process is killed with git's group.
    pid_file = tmp_path / "child.pid"
    left = _alias("left", f"sleep 60 & echo $! > {pid_file}")
    with pytest.raises(GitError, match=r"^git left timed out after 2 s$"):
        run_git_sync(left, cwd=tmp_path, timeout=2)
    assert _gone(int(pid_file.read_text()))
    pid_file.unlink()
    with pytest.raises(GitError, match=r"^git left timed out after 2 s$"):
        await run_git_process(left, cwd=tmp_path, timeout=2)
    assert _gone(int(pid_file.read_text()))


async def test_a_process_left_behind_after_a_clean_exit_is_killed(tmp_path: Path) -> None:
    # git exits 0 and its output closes, but a process it started (a smudge filter's or a helper's background
    # child) stays in git's group with its output elsewhere: the call returns normally and leaves no process.
    pid_file = tmp_path / "child.pid"
    left = _alias("left", f"sleep 60 </dev/null >/dev/null 2>&1 & echo $! > {pid_file}")
    sync = run_git_sync(left, cwd=tmp_path, timeout=30)
    assert sync.returncode == 0 and _gone(int(pid_file.read_text()))
    pid_file.unlink()
    run = await run_git_process(left, cwd=tmp_path, timeout=30)
    assert run.returncode == 0 and _gone(int(pid_file.read_text()))


async def test_repository_grep_column_setting_does_not_change_the_parsed_format(tmp_path: Path) -> None:
    # search_text parses ``path\0line\0text``; a repository's ``grep.column=true`` would add a column field.
    run_git_sync(["init", "-q"], cwd=tmp_path)
    run_git_sync(["config", "grep.column", "true"], cwd=tmp_path)
    (tmp_path / "a.txt").write_text("hello foo\n")
    args = ["grep", "-F", "-n", "-I", "--no-color", "-z", "--untracked", "--full-name", "-e", "foo"]
    for result in (run_git_sync(args, cwd=tmp_path, read_only=True),
                   await run_git_process(args, cwd=tmp_path, read_only=True)):
        assert result.stdout == b"a.txt\x001\x00hello foo\n"


async def test_a_process_left_holding_only_stderr_does_not_hold_the_call(tmp_path: Path) -> None:
    # git's output is complete when it exits; a process it left behind with git's stderr (a filter's daemon)
    # must neither hold the call until the timeout nor survive it.
    pid_file = tmp_path / "child.pid"
    left = _alias("left", f"sleep 60 </dev/null >/dev/null & echo $! > {pid_file}; echo done")
    started = time.monotonic()
    sync = run_git_sync(left, cwd=tmp_path, timeout=20)
    assert sync.returncode == 0 and sync.stdout == b"done\n" and _gone(int(pid_file.read_text()))
    pid_file.unlink()
    run = await run_git_process(left, cwd=tmp_path, timeout=20)
    assert run.returncode == 0 and run.stdout == b"done\n" and _gone(int(pid_file.read_text()))
    assert time.monotonic() - started < 15  # neither call waited for its 20 s timeout


#: What a repository's (or the user's) configuration asks for, and what the hardened prefix makes of it
#: (issue 25: nothing a worktree holds may make host git descend into a submodule or start a transport).
PINNED = {
    "submodule.recurse": ("true", "false"),
    "diff.ignoreSubmodules": ("none", "all"),
    "status.submoduleSummary": ("true", "false"),
    "core.untrackedCache": ("true", "false"),
    "protocol.allow": ("always", "never"),
    "protocol.file.allow": ("always", "never"),
    "protocol.ext.allow": ("always", "never"),
    "protocol.ssh.allow": ("always", "never"),
    "protocol.https.allow": ("always", "never"),
    "credential.helper": ("store", ""),
}


async def test_repository_configuration_cannot_undo_the_submodule_and_transport_pins(tmp_path: Path) -> None:
    run_git_sync(["init", "-q"], cwd=tmp_path)
    for key, (asked, _pinned) in PINNED.items():
        run_git_sync(["config", key, asked], cwd=tmp_path)
    for key, (_asked, pinned) in PINNED.items():
        for result in (run_git_sync(["config", "--get", key], cwd=tmp_path, read_only=True),
                       await run_git_process(["config", "--get", key], cwd=tmp_path, read_only=True)):
            assert result.stdout.decode().strip() == pinned, key


async def test_no_transport_starts_even_where_the_repository_allows_it(tmp_path: Path) -> None:
    """An ``ext::`` URL runs a command; a ``file://`` fetch would read another repository: both refused."""
    other = tmp_path / "other"
    other.mkdir()
    run_git_sync(["init", "-q"], cwd=other)
    repo = tmp_path / "repo"
    repo.mkdir()
    run_git_sync(["init", "-q"], cwd=repo)
    run_git_sync(["config", "protocol.allow", "always"], cwd=repo)
    marker = tmp_path / "ext-ran"
    for url in (f"file://{other}", f"ext::sh -c touch\\ {marker}"):
        run = await run_git_process(["ls-remote", url], cwd=repo, read_only=True, timeout=30)
        assert run.returncode != 0 and b"not allowed" in run.stderr, (url, run.stderr)
    assert not marker.exists()

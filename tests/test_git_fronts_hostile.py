"""The git fronts against a hostile or unusual repository configuration, with real git (issue 21)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

from spotpatch_agent.errors import GitError
from spotpatch_agent.git_runner import run_git_sync
from spotpatch_agent.worktree.git import run_git, sanitize

pytestmark = pytest.mark.anyio


def _gone(pid: int) -> bool:
    """Whether ``pid`` exits (or is a zombie) within 10 s; a process nobody killed sleeps 600 s."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
        except FileNotFoundError:
            return True
        if stat[stat.rindex(b")") + 2 :].startswith(b"Z"):
            return True
        time.sleep(0.01)
    return False


async def test_a_config_error_naming_a_path_with_spaces_leaks_no_part_of_it(tmp_path: Path) -> None:
    # include.path points at a broken file outside the project, under a directory whose name has a space
    # (a home directory named after its owner): git's error names it; no piece of it reaches the GitError.
    repo = tmp_path / "repo"
    repo.mkdir()
    run_git_sync(["init", "-q"], cwd=repo)
    outside = tmp_path / "Jo Annsecret" / "conf dir"
    outside.mkdir(parents=True)
    (outside / "hostile.inc").write_text("[broken\n")
    run_git_sync(["config", "include.path", str(outside / "hostile.inc")], cwd=repo)
    with pytest.raises(GitError) as caught:
        await run_git(["rev-parse", "--git-dir"], cwd=repo)
    message = str(caught.value)
    assert "bad config" in message and "<path>" in message
    assert "Annsecret" not in message and "conf dir" not in message and str(tmp_path) not in message


def test_sanitize_takes_quoted_and_spaced_absolute_paths_whole() -> None:
    assert sanitize("fatal: unable to access '/Users/Jo Ann/.config/git/config': Permission denied", "/p") == (
        "fatal: unable to access '<path>': Permission denied")
    assert sanitize("error: could not lock config file /home/jo ann/.gitconfig: File exists", "/p") == (
        "error: could not lock config file <path>: File exists")
    assert sanitize("warning: unable to access 'C:/Users/Jo Ann/x'", "/p") == "warning: unable to access '<path>'"
    assert sanitize("error: patch failed: src/a b.js:3", "/p") == "error: patch failed: src/a b.js:3"


def _hanging_git(bin_dir: Path, pid_file: Path) -> None:
    """A ``git`` first on PATH that hangs (a stuck filter, a dead network mount): records its pid, sleeps."""
    bin_dir.mkdir()
    fake = bin_dir / "git"
    fake.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 600\n")
    fake.chmod(0o755)


async def test_the_file_tools_git_is_bounded_outside_the_executor(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # The prompt's project context reads the project through WorktreeContext with no tool deadline around it:
    # a git that hangs must still end, with an error, and leave no process.
    from spotpatch_agent.protocol.config import Limits
    from spotpatch_agent.tools import _git
    from spotpatch_agent.tools.context import WorktreeContext

    repo = tmp_path / "repo"
    repo.mkdir()
    run_git_sync(["init", "-q"], cwd=repo)
    pid_file = tmp_path / "git.pid"
    _hanging_git(tmp_path / "bin", pid_file)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(_git, "GIT_TIMEOUT", 2, raising=False)
    with pytest.raises(GitError, match=r"^git ls-files timed out after 2 s$"), anyio.fail_after(30):
        await WorktreeContext(repo, Limits()).git("ls-files", "-z")  # unbounded: TimeoutError at 30 s
    assert _gone(int(pid_file.read_text()))


def test_the_tools_bound_never_comes_before_a_tool_deadline() -> None:
    from spotpatch_agent.protocol.limits import LIMITS
    from spotpatch_agent.tools._git import GIT_TIMEOUT

    assert GIT_TIMEOUT >= LIMITS["toolTimeoutSec"][1]


def test_no_git_command_of_the_engine_signs_or_runs_gpg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A global config (GIT_CONFIG_GLOBAL is passed through) asking for signed commits with a gpg.program:
    # the demo's set-up commit must neither run that program (a pinentry prompt, a hardware key) nor fail.
    from spotpatch_agent.demo.runner import make_demo_project

    marker = tmp_path / "gpg-ran"
    gpg = tmp_path / "gpg.sh"
    gpg.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    gpg.chmod(0o755)
    glob = tmp_path / "global.gitconfig"
    glob.write_text(f"[commit]\n\tgpgSign = true\n[tag]\n\tgpgSign = true\n[gpg]\n\tprogram = {gpg}\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(glob))
    project = make_demo_project(tmp_path / "demo")
    assert run_git_sync(["rev-parse", "--verify", "-q", "HEAD"], cwd=project).returncode == 0
    assert not marker.exists()

"""The git fronts against a hostile or unusual repository configuration, with real git (issue 21)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spotpatch_agent.errors import GitError
from spotpatch_agent.git_runner import run_git_sync
from spotpatch_agent.worktree.git import run_git, sanitize

pytestmark = pytest.mark.anyio


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

"""Break attempt on issue 25: host ``git add --all`` ran a filter of a repository planted in a gitlink directory.

docs/security.md §6 listed ``add --all`` as "no recursion". It is not, for one shape of plant: a repository
with an *unborn* HEAD (``git init`` and ``git add``, no commit) in a submodule's directory. git compares a
gitlink by the submodule's HEAD; when HEAD cannot be resolved it counts the gitlink as unchanged and asks
whether the submodule is dirty — by running ``git status`` inside it, which runs the planted repository's
``filter.<x>.clean`` on the host. ``diff.ignoreSubmodules=all`` and ``submodule.recurse=false`` do not reach
``git add`` (it overrides submodule configuration), so the hardened prefix did not stop it; only the scan
(which removes the plant first) did. ``stage_all`` now leaves every gitlink out of the pathspec
(``:(exclude,literal)<path>``), so ``add`` never asks a submodule anything.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from spotpatch_agent.errors import GitError
from spotpatch_agent.worktree.create import create_worktree
from spotpatch_agent.worktree.removal import remove_worktree
from spotpatch_agent.worktree.result import result_diff
from tests.conftest import git
from tests.worktree._placement import FILES, repo_with_submodule

pytestmark = pytest.mark.anyio


def plant_unborn_repository(directory: Path, marker: Path) -> None:
    """What a check could leave in a gitlink directory: a repository without a commit whose index holds a
    file that is stat-dirty and whose attributes select a clean filter that writes ``marker``."""
    git(directory, "init", "-q")
    git(directory, "config", "filter.x.clean", f"sh -c 'echo ran >> {marker}; cat'")
    git(directory, "config", "filter.x.smudge", "cat")
    (directory / ".gitattributes").write_text("* filter=x\n")
    (directory / "f.txt").write_text("hello\n")
    git(directory, "-c", "filter.x.clean=cat", "add", "f.txt", ".gitattributes")
    time.sleep(1.1)  # same size, newer mtime: git must hash it again (through the filter)
    (directory / "f.txt").write_text("hellp\n")


async def test_staging_never_runs_a_filter_of_a_repository_planted_in_a_gitlink_directory(repo_factory,
                                                                                        tmp_path: Path) -> None:
    root, _origin = repo_with_submodule(repo_factory)
    wt = await create_worktree(root, "job-sub")
    marker = tmp_path / "FILTER-RAN"
    try:
        plant_unborn_repository(wt.path / "vendor" / "lib", marker)
        (wt.path / "src/app.js").write_text("export const n = 9;\n")
        try:
            diff, stats = await result_diff(wt)
        except GitError as exc:  # before: "'vendor/lib' does not have a commit checked out", after the filter ran
            diff, stats = str(exc), []
        assert not os.path.exists(marker), "host git add ran the planted repository's clean filter"
        assert [s.path for s in stats] == ["src/app.js"]
        assert "vendor/lib" not in diff
    finally:
        await remove_worktree(root, wt)


async def test_a_change_beside_the_gitlink_is_still_staged_whole(repo_factory) -> None:
    """Leaving gitlinks out of the pathspec keeps every other change: added, modified and deleted files."""
    root, _origin = repo_with_submodule(repo_factory)
    wt = await create_worktree(root, "job-sub")
    try:
        first = sorted(FILES)[0]
        (wt.path / first).unlink()
        (wt.path / "src" / "new file.ts").write_text("export {}\n")
        (wt.path / "src/app.js").write_text("export const n = 9;\n")
        _diff, stats = await result_diff(wt)
        assert sorted((s.path, s.status) for s in stats) == sorted(
            [(first, "deleted"), ("src/new file.ts", "added"), ("src/app.js", "modified")])
    finally:
        await remove_worktree(root, wt)

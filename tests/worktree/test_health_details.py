"""Health reasons name their paths and the fix (issue 20): ``RepoHealth.details`` with project-relative,
bounded, redacted paths; a virtualenv, ``node_modules`` or build folder left untracked gets the advice to
add it to .gitignore; the REPO_BLOCKED message says the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.policy.redact import REDACTOR, SECRET_MARK
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import Limits
from spotpatch_agent.worktree.create import create_worktree
from spotpatch_agent.worktree.health import blocked_message, repo_health
from spotpatch_agent.worktree.health_details import MAX_PATHS
from tests.conftest import git

pytestmark = pytest.mark.anyio

FILES = {"a.txt": "one\n", "src/b.js": "export const b = 1;\n", "package.json": "{}\n"}


def make_venv(folder: Path) -> None:
    """A real virtualenv (symlinks to the interpreter, pyvenv.cfg), as `python3 -m venv` makes it."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--symlinks", str(folder)], check=True,
                   capture_output=True, timeout=120)


def dump(health) -> str:
    return json.dumps(health.dump())


async def test_untracked_virtualenv_names_the_folder_and_says_gitignore(repo_factory) -> None:
    root = repo_factory(FILES)
    make_venv(root / ".venv")
    health = await repo_health(root, Limits())
    assert health.state == "blocked"
    assert health.reasons == ["untracked-symlink"]  # the reasons list is unchanged
    [d] = health.details
    assert d.reason == "untracked-symlink" and d.paths == [".venv/"] and d.more_paths == 0
    assert d.fix.startswith("`.venv/` is an untracked folder with symlinks (a Python virtualenv): add it to .gitignore")
    message = blocked_message(health)
    assert message.startswith("untracked-symlink (.venv/): `.venv/` is an untracked folder with symlinks")
    assert str(root) not in dump(health) + message
    (root / ".gitignore").write_text(".venv/\n")
    git(root, "add", ".gitignore")
    git(root, "commit", "-qm", "ignore the virtualenv")
    fixed = await repo_health(root, Limits())
    assert (fixed.state, fixed.details) == ("clean", [])


async def test_virtualenv_over_the_limit_is_named_once_per_reason_with_the_limits(repo_factory) -> None:
    # The case: `python3 -m venv .venv` in the app → untracked-symlink and local-changes-over-limit.
    root = repo_factory(FILES)
    make_venv(root / ".venv")
    (root / "src/b.js").write_text("export const b = 2;\n")
    health = await repo_health(root, Limits(local_snapshot_max_files=3))
    assert health.reasons == ["untracked-symlink", "local-changes-over-limit"]
    over = health.details[1]
    assert over.reason == "local-changes-over-limit"
    assert over.paths == [".venv/", "src/b.js"]  # the template folder first, then the other paths
    assert "`.venv/` is an untracked folder with many files (a Python virtualenv): add it to .gitignore" in over.fix
    assert "over the limit of 3 files" in over.fix and "limits.localSnapshotMaxFiles" in over.fix
    with pytest.raises(SpotPatchError) as info:
        await create_worktree(root, "job-1", include_local_changes=True, limits=Limits(local_snapshot_max_files=3))
    assert info.value.code is ErrorCode.REPO_BLOCKED
    assert ".venv/" in info.value.message and ".gitignore" in info.value.message
    assert str(root) not in info.value.message


async def test_a_folder_holding_pyvenv_cfg_is_a_virtualenv_whatever_its_name(repo_factory) -> None:
    root = repo_factory(FILES)
    make_venv(root / "tools" / "pyenv311")
    [d] = (await repo_health(root, Limits())).details
    assert d.paths == ["tools/pyenv311/"]
    assert "(a Python virtualenv)" in d.fix


async def test_node_modules_over_the_limit_gets_the_gitignore_advice(repo_factory) -> None:
    root = repo_factory(FILES)
    for i in range(6):
        pkg = root / "node_modules" / f"pkg{i}"
        pkg.mkdir(parents=True)
        (pkg / "index.js").write_text("module.exports = 1;\n")
    health = await repo_health(root, Limits(local_snapshot_max_files=5))
    [d] = health.details
    assert (d.reason, d.paths) == ("local-changes-over-limit", ["node_modules/"])
    assert d.fix.startswith("`node_modules/` is an untracked folder with many files (installed Node packages): "
                            "add it to .gitignore.")


async def test_build_folder_left_untracked_needs_consent_and_says_gitignore(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / "dist" / "assets").mkdir(parents=True)
    (root / "dist" / "assets" / "index.js").write_text("x\n")
    (root / "dist" / "index.html").write_text("<html></html>\n")
    (root / "a.txt").write_text("edited\n")
    health = await repo_health(root, Limits())
    assert (health.state, health.reasons) == ("consent-required", [])
    [d] = health.details
    assert d.reason == "local-changes" and d.paths == ["dist/", "a.txt"]
    assert d.fix.startswith("`dist/` is an untracked folder (build output): add it to .gitignore. For the other "
                            "paths: commit or stash them")
    assert "spotpatch-agent run --include-local-changes" in d.fix


async def test_paths_are_bounded_and_the_rest_counted(repo_factory) -> None:
    root = repo_factory(FILES)
    for i in range(MAX_PATHS + 7):
        (root / f"link{i:02}").symlink_to("a.txt")
    [d] = (await repo_health(root, Limits())).details
    assert d.reason == "untracked-symlink"
    assert d.paths == [f"link{i:02}" for i in range(MAX_PATHS)] and d.more_paths == 7
    assert blocked_message(await repo_health(root, Limits())).startswith(
        "untracked-symlink (link00, link01, ") and ", +7 more): " in blocked_message(await repo_health(root, Limits()))


async def test_untracked_paths_show_as_git_untracked_folder(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / "assets" / "icons").mkdir(parents=True)
    (root / "assets" / "icons" / "logo.svg").symlink_to("../../a.txt")
    (root / "src" / "linked.js").symlink_to("b.js")  # src/ is tracked: the link itself is named
    [d] = (await repo_health(root, Limits())).details
    assert d.paths == ["assets/", "src/linked.js"]
    assert d.fix.startswith("untracked symbolic links cannot be copied")


async def test_conflicts_and_operations_name_files_and_git_commands(repo_factory) -> None:
    root = repo_factory(FILES)
    git(root, "checkout", "-qb", "other")
    (root / "a.txt").write_text("other\n")
    git(root, "commit", "-qam", "other")
    git(root, "checkout", "-q", "-")
    (root / "a.txt").write_text("main\n")
    git(root, "commit", "-qam", "main")
    subprocess.run(["git", "merge", "other"], cwd=root, capture_output=True)
    health = await repo_health(root, Limits())
    assert health.reasons == ["merge-in-progress", "conflicts"]
    merge, conflicts = health.details
    assert "git merge --abort" in merge.fix and merge.paths == []
    assert conflicts.paths == ["a.txt"] and "resolve the conflicts" in conflicts.fix


async def test_not_a_repository_says_git_init(tmp_path: Path) -> None:
    health = await repo_health(tmp_path, Limits())
    [d] = health.details
    assert d.reason == "not-a-git-repository" and "git init" in d.fix


async def test_paths_go_through_the_redactor(repo_factory) -> None:
    canary = "sk-canary-" + os.urandom(8).hex()
    REDACTOR.add_secret(canary)
    root = repo_factory(FILES)
    (root / f"{canary}.txt").symlink_to("a.txt")
    health = await repo_health(root, Limits())
    assert health.details[0].paths == [f"{SECRET_MARK}.txt"]
    assert canary not in dump(health) + blocked_message(health)


async def test_a_tracked_build_folder_gets_no_gitignore_advice(repo_factory) -> None:
    # `src/build/` holds tracked sources: a changed or new file there is not "an untracked build folder".
    root = repo_factory({**FILES, "src/build/config.ts": "export {};\n"})
    (root / "src/build/config.ts").write_text("export const x = 1;\n")
    (root / "src/build/new.ts").write_text("export {};\n")
    [d] = (await repo_health(root, Limits())).details
    assert d.paths == ["src/build/config.ts", "src/build/new.ts"]
    assert ".gitignore" not in d.fix and d.fix.startswith("commit or stash them")


async def test_the_gitignore_advice_is_bounded_in_a_monorepo(repo_factory) -> None:
    # Breaker (issue 20): 60 packages each with an untracked node_modules/ holding a .bin symlink made a fix
    # naming all 60 folders (57 KB for 500), in the page's health, REPO_BLOCKED and the terminal.
    files = {f"packages/p{i:02}/index.js": "x\n" for i in range(60)}
    root = repo_factory(files)
    for i in range(60):
        (root / f"packages/p{i:02}/node_modules/.bin").mkdir(parents=True)
        (root / f"packages/p{i:02}/node_modules/.bin/tool").symlink_to("../x")
    health = await repo_health(root, Limits())
    [d] = health.details
    assert d.reason == "untracked-symlink" and len(d.paths) == MAX_PATHS and d.more_paths == 40
    assert d.fix == ("`packages/p00/node_modules/` is an untracked folder with symlinks (installed Node packages): "
                     "add it to .gitignore. `packages/p01/node_modules/` is an untracked folder with symlinks "
                     "(installed Node packages): add it to .gitignore. `packages/p02/node_modules/` is an untracked "
                     "folder with symlinks (installed Node packages): add it to .gitignore. So are 57 more folders "
                     "(installed Node packages): add them too (a line such as `node_modules/` in .gitignore covers "
                     "such folders at any depth).")
    assert len(blocked_message(health)) < 2000

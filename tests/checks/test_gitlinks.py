"""The gitlink directories of a worktree, shown empty and read-only to a check (issue 25): read from the
index (checks/gitlinks.py), mounted by bwrap after the worktree's writable bind, denied by the macOS profile."""

from __future__ import annotations

from pathlib import Path

import pytest

from spotpatch_agent.checks.gitlinks import gitlink_dirs
from spotpatch_agent.checks.sandbox.bwrap import bwrap_argv
from spotpatch_agent.checks.sandbox.plan import SandboxPlan
from spotpatch_agent.checks.sandbox.seatbelt import seatbelt_profile
from tests.checks._support import with_submodules

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_gitlinks_are_read_from_the_index_as_real_directories_only(repo_factory, tmp_path: Path) -> None:
    root = with_submodules(repo_factory, tmp_path)
    found = await gitlink_dirs(root)
    assert sorted(p.relative_to(root).as_posix() for p in found) == ["deep/er/lib", "moved", "vendor/lib"]
    # A gitlink path that is now a symlink is never a mount target (bwrap would mount over its target).
    import shutil

    shutil.rmtree(root / "moved")
    (root / "moved").symlink_to(root / "src")
    found = await gitlink_dirs(root)
    assert sorted(p.relative_to(root).as_posix() for p in found) == ["deep/er/lib", "vendor/lib"]


async def test_no_repository_no_gitlinks(tmp_path: Path) -> None:
    assert await gitlink_dirs(tmp_path) == ()


def test_bwrap_shows_each_gitlink_empty_and_read_only_after_the_writable_worktree(tmp_path: Path) -> None:
    """At the path the check sees it (the worktree is relocated inside the sandbox)."""
    work = tmp_path / "wt"
    plan = SandboxPlan(cwd=work, temp_dir=tmp_path / "t", network=False, writable=(work,),
                       readonly_dirs=(work / "vendor" / "lib",))
    link = plan.inside(work / "vendor" / "lib", relocate=True)
    assert link is not None and str(tmp_path) not in link
    argv = bwrap_argv("/usr/bin/bwrap", plan, ["/bin/true"])
    bind = argv.index(str(work)) - 1
    assert argv[bind] == "--bind"
    mount = argv.index(link)
    assert argv[mount - 1] == "--tmpfs" and argv[mount - 3:mount - 1] == ["--perms", "0555"] and mount > bind
    remount = len(argv) - 1 - argv[::-1].index(link)
    assert argv[remount - 1] == "--remount-ro" and remount > mount


def test_the_macos_profile_denies_writes_below_a_gitlink(tmp_path: Path) -> None:
    work = tmp_path / "wt"
    plan = SandboxPlan(cwd=work, temp_dir=tmp_path / "t", network=False, writable=(work,),
                       readonly_dirs=(work / "vendor" / "lib",))
    profile = seatbelt_profile(plan)
    deny = [line for line in profile.splitlines() if line.startswith("(deny file-write*")]
    assert deny and str(work / "vendor" / "lib") in deny[-1]
    assert profile.index(deny[-1]) > profile.index("(allow file-read* file-write*")

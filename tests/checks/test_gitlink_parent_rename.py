"""Break attempt on issue 25: a confined check walked around a gitlink's read-only view by renaming its parent.

The sandbox mounts an empty read-only view over each gitlink directory (``vendor/lib``), but the directory
*above* it (``vendor``) was an ordinary directory of the writable worktree: ``rename("vendor", "vendor2")``
moves the mount away with it (only a mount point itself refuses a rename), and a new ``vendor/lib`` is the
check's to fill — ``git init`` and a clean filter, exactly what the read-only view was there to stop (only
the scan after the check still removed it). Now every directory between the worktree and a gitlink is
bound onto itself, so it is a mount point too, and ``rename`` fails with ``EBUSY``; writing inside it works.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from spotpatch_agent.checks.runner import run_check_process
from spotpatch_agent.checks.sandbox import detect
from spotpatch_agent.protocol.models import CheckConfig, Limits
from spotpatch_agent.worktree.create import create_worktree
from spotpatch_agent.worktree.removal import remove_worktree
from tests.checks._support import with_submodules

pytestmark = [pytest.mark.anyio,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap's mounts")]

PLANT = r'''
import os
def attempt(label, action):
    try:
        action()
        print(label, "SUCCEEDED")
    except OSError as exc:
        print(label, "DENIED", type(exc).__name__)
attempt("write in the gitlink", lambda: os.mkdir("vendor/lib/x"))
attempt("rename the gitlink", lambda: os.rename("vendor/lib", "vendor/lib2"))
attempt("rename its parent", lambda: os.rename("vendor", "vendor2"))
attempt("rename its grandparent's child", lambda: os.rename("deep/er", "deep/er2"))
attempt("rename the top of a deep one", lambda: os.rename("deep", "deep2"))
def plant():
    os.makedirs("vendor/lib/.git", exist_ok=True)
attempt("plant a repository there", plant)
attempt("write beside the gitlink", lambda: open("vendor/NOTES.md", "w").write("ok\n"))
attempt("remove a file beside it", lambda: os.unlink("vendor/keep.txt"))
'''


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_no_directory_above_a_gitlink_can_be_renamed_away(repo_factory, tmp_path: Path) -> None:
    if (await detect()).confinement is None:
        pytest.skip("no confinement on this machine")
    root = with_submodules(repo_factory, tmp_path)
    (root / "vendor" / "keep.txt").write_text("keep\n")
    from tests.conftest import git

    git(root, "add", "vendor/keep.txt")
    git(root, "commit", "-qm", "keep")
    wt = await create_worktree(root, "job-rename")
    try:
        (wt.path / "plant.py").write_text(PLANT)
        check = CheckConfig.model_validate({"id": "plant", "name": "Plant", "command": sys.executable,
                                            "args": ["plant.py"], "timeoutSec": 60})
        run = await run_check_process(check, wt.path, Limits(), project_root=root)
        out = run.output
        assert run.sandbox == "confined", out
        for label in ("write in the gitlink", "rename the gitlink", "rename its parent",
                      "rename its grandparent's child", "rename the top of a deep one", "plant a repository there"):
            assert f"{label} DENIED" in out, out
        assert "write beside the gitlink SUCCEEDED" in out and "remove a file beside it SUCCEEDED" in out, out
        assert not (wt.path / "vendor" / "lib" / ".git").exists()
        assert not (wt.path / "vendor2").exists()
    finally:
        await remove_worktree(root, wt)

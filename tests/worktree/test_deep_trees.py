"""Break attempt on issue 25: a check that nests directories deeper than Python's recursion limit.

``shutil.rmtree`` recursed once per level, so 1,500 nested directories (``mkdir d; cd d`` in a loop) made it
raise ``RecursionError`` — not ``OSError`` — out of the scan that removes a ``.git`` a check left (the job
failed with an internal error, the planted repository stayed in the worktree), out of the worktree's removal
(the worktree stayed) and out of the confined check's private temp dir clean-up (``run_check`` failed, the
temp dir stayed on the host's disk). spotpatch_agent/tree_remove.py finishes such a tree iteratively.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from spotpatch_agent.tree_remove import remove_tree
from spotpatch_agent.worktree.removal import rmtree
from spotpatch_agent.worktree.scan import after_check, scan_worktree

DEPTH = 1500


def nest(top: Path, depth: int = DEPTH) -> None:
    """``depth`` directories ``d/d/…`` below ``top`` (made relative, as a check would: past PATH_MAX too), a
    file at the bottom."""
    top.mkdir(parents=True, exist_ok=True)
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.close(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
    finally:
        os.close(fd)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_deep_git_directory_a_check_left_is_removed_not_an_internal_error(tmp_path: Path,
                                                                                anyio_backend: str) -> None:
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "App.tsx").write_text("export {}\n")
    before = scan_worktree(work, max_file_bytes=1 << 20)
    (work / "pkg" / ".git").mkdir(parents=True)
    (work / "pkg" / ".git" / "config").write_text("[filter \"x\"]\n\tclean = touch /tmp/pwned\n")
    nest(work / "pkg" / ".git")
    found = await after_check(work, max_file_bytes=1 << 20, before=before)
    assert [h.path for h in found] == ["pkg/.git"]
    assert not os.path.lexists(work / "pkg" / ".git")
    assert (work / "src" / "App.tsx").read_text() == "export {}\n"


def test_a_worktree_holding_a_deep_tree_is_removed(tmp_path: Path) -> None:
    job = tmp_path / "job-0123"
    nest(job / "node_modules" / ".cache")
    rmtree(job)
    assert not os.path.lexists(job)


def test_remove_tree_never_follows_a_symlink_at_any_depth(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    tree = tmp_path / "tree"
    nest(tree)
    bottom = tree / os.path.join(*["d"] * 10)
    os.symlink(outside, bottom / "link")
    remove_tree(tree)
    assert not os.path.lexists(tree)
    assert (outside / "keep.txt").read_text() == "keep"


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the private temp dir of bubblewrap's sandbox")
async def test_a_confined_check_nesting_its_temp_dir_deep_finishes_and_its_temp_dir_goes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, anyio_backend: str) -> None:
    from spotpatch_agent.checks.runner import run_check_process
    from spotpatch_agent.checks.sandbox import detect
    from spotpatch_agent.protocol.models import CheckConfig, Limits

    if (await detect()).confinement is None:
        pytest.skip("no confinement on this machine")
    temps = tmp_path / "temps"
    temps.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(temps))
    work = tmp_path / "work"
    work.mkdir()
    (work / "nest.py").write_text(
        "import os\nos.chdir(os.environ['TMPDIR'])\n"
        f"for _ in range({DEPTH}):\n    os.mkdir('d')\n    os.chdir('d')\nprint('NESTED')\n")
    check = CheckConfig.model_validate({"id": "nest", "name": "Nest", "command": sys.executable,
                                        "args": ["nest.py"], "timeoutSec": 60})
    run = await run_check_process(check, work, Limits())
    assert run.status == "passed", run.output
    assert "NESTED" in run.output
    assert list(temps.iterdir()) == []

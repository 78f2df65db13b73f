"""Worktree placement and what the worktree must never leak (docs/design.md §8): node_modules, submodules.

- A real, ignored ``node_modules`` hosts the worktree at ``<root>/node_modules/.spotpatch/job-*``, so Node's
  parent-directory resolution from the worktree reaches ``<root>/node_modules`` (proved with real ``node``).
- A symlinked ``node_modules`` (or ``.spotpatch``) is never used.
- A submodule is never checked out in the worktree, never written through, never in a diff (no 160000).
- Nothing of ``node_modules/.spotpatch`` shows in the user's status, the local snapshot or the result diff.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from spotpatch_agent.errors import JobFailure
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import Limits
from spotpatch_agent.tools.executor import ToolExecutor
from spotpatch_agent.worktree.create import create_worktree
from spotpatch_agent.worktree.health import repo_health
from spotpatch_agent.worktree.placement import Worktree
from spotpatch_agent.worktree.removal import remove_worktree
from spotpatch_agent.worktree.result import result_diff
from tests.conftest import git
from tests.worktree._placement import FILES, repo_with_submodule
from tests.worktree._util import run, snapshot, temp_base, worktree_list

pytestmark = pytest.mark.anyio

NODE = shutil.which("node")


def _install_fake_package(root: Path) -> None:
    pkg = root / "node_modules" / "fakepkg"
    pkg.mkdir(parents=True)
    (pkg / "package.json").write_text(json.dumps({"name": "fakepkg", "version": "1.0.0", "main": "index.js"}))
    (pkg / "index.js").write_text("module.exports = { answer: 42 };\n")


async def _node(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    assert NODE is not None
    with anyio.fail_after(30):
        return await anyio.run_process([NODE, *args], cwd=cwd, check=False)


def _raw_modes(wt: Worktree) -> list[str]:
    """Every mode on both sides of the worktree's staged change against its baseline."""
    out = run(wt.path, "diff", "--cached", "--raw", "--no-abbrev", wt.baseline_oid)
    return [m for line in out.splitlines() if line.startswith(":") for m in line[1:].split(" ")[:2]]


@pytest.mark.skipif(NODE is None, reason="needs node")
async def test_node_modules_placement_lets_checks_require_installed_packages(repo_factory) -> None:
    root = repo_factory(FILES)
    _install_fake_package(root)
    wt = await create_worktree(root, "job-node")
    try:
        assert wt.path.parent == root / "node_modules" / ".spotpatch"
        assert not (wt.path / "node_modules").exists()  # nothing installed or linked into the worktree
        # A check runs with the worktree as its working directory, like run_check does.
        probe = await _node("-e", "process.stdout.write(String(require('fakepkg').answer))", cwd=wt.path)
        assert (probe.returncode, probe.stdout) == (0, b"42"), probe.stderr
        # A file deep in the worktree resolves it too: Node walks src/ → job-*/ → .spotpatch/ → <root>, where
        # it finds <root>/node_modules/fakepkg (it skips looking into .../node_modules/node_modules).
        (wt.path / "src" / "check.cjs").write_text("console.log(require('fakepkg').answer);\n")
        (wt.path / "src" / "check.mjs").write_text("import pkg from 'fakepkg';\nconsole.log(pkg.answer);\n")
        for script in ("src/check.cjs", "src/check.mjs"):
            out = await _node(script, cwd=wt.path)
            assert (out.returncode, out.stdout) == (0, b"42\n"), out.stderr
    finally:
        await remove_worktree(root, wt)


@pytest.mark.skipif(NODE is None, reason="needs node")
async def test_temp_placement_cannot_resolve_the_projects_packages(repo_factory) -> None:
    # The control case: without the node_modules placement the same probe fails.
    root = repo_factory({**FILES, ".gitignore": ""})  # node_modules not ignored → temp dir
    wt = await create_worktree(root, "job-temp")
    try:
        _install_fake_package(root)
        assert wt.path.parent == temp_base()
        probe = await _node("-e", "require('fakepkg')", cwd=wt.path)
        assert probe.returncode != 0 and b"fakepkg" in probe.stderr
    finally:
        await remove_worktree(root, wt)


async def test_symlinked_node_modules_is_never_used(repo_factory, tmp_path: Path) -> None:
    root = repo_factory({**FILES, ".gitignore": "node_modules\n"})
    shared = tmp_path / "shared_modules"
    shared.mkdir()
    (root / "node_modules").symlink_to(shared, target_is_directory=True)
    wt = await create_worktree(root, "job-1")
    try:
        assert wt.path.parent == temp_base()
        assert list(shared.iterdir()) == []  # nothing was created through the link
    finally:
        await remove_worktree(root, wt)


async def test_symlinked_spotpatch_base_is_never_used(repo_factory, tmp_path: Path) -> None:
    root = repo_factory(FILES)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "node_modules").mkdir()
    (root / "node_modules" / ".spotpatch").symlink_to(elsewhere, target_is_directory=True)
    wt = await create_worktree(root, "job-1")
    try:
        assert wt.path.parent == temp_base()
        assert list(elsewhere.iterdir()) == []
    finally:
        await remove_worktree(root, wt)


async def test_node_modules_worktree_never_leaks_into_status_snapshot_or_diff(repo_factory) -> None:
    root = repo_factory(FILES)
    _install_fake_package(root)
    (root / "src/app.js").write_text("export const n = 2; // local\n")  # a local change: consent path
    before = snapshot(root)
    wt = await create_worktree(root, "job-1", include_local_changes=True)
    try:
        assert wt.path.parent == root / "node_modules" / ".spotpatch"
        # The user's repository does not see the job's worktree (ignored, never an embedded repo).
        assert run(root, "ls-files", "--others", "--exclude-standard") == ""
        assert "spotpatch" not in run(root, "diff-index", "--raw", "HEAD")
        assert (await repo_health(root, Limits())).state == "consent-required"  # only the user's own change
        assert snapshot(root)["files"] != before["files"]  # (the job dir exists under node_modules)
        # A check that writes into node_modules inside the worktree leaves nothing in the diff either.
        (wt.path / "node_modules" / "cache").mkdir(parents=True)
        (wt.path / "node_modules" / "cache" / "x.js").write_text("x\n")
        (wt.path / "src/app.js").write_text("export const n = 3;\n")
        diff, stats = await result_diff(wt)
        assert [s.path for s in stats] == ["src/app.js"]
        assert "node_modules" not in diff and ".spotpatch" not in diff
        assert set(_raw_modes(wt)) == {"100644"}  # no symlink (120000), no gitlink (160000)
    finally:
        await remove_worktree(root, wt)
    after = snapshot(root)
    assert after == before


# ---------------------------------------------------------------- submodules


async def test_submodule_is_never_checked_out_and_never_in_the_diff(repo_factory) -> None:
    root, _origin = repo_with_submodule(repo_factory)
    before = snapshot(root)
    wt = await create_worktree(root, "job-sub")
    try:
        assert list((wt.path / "vendor" / "lib").iterdir()) == []  # registered as a gitlink, never populated
        # Anything written under the submodule path (e.g. by a check) is invisible to git add --all.
        (wt.path / "vendor" / "lib" / "x.txt").write_text("written inside the submodule path\n")
        (wt.path / "src/app.js").write_text("export const n = 9;\n")
        diff, stats = await result_diff(wt)
        assert [s.path for s in stats] == ["src/app.js"]
        assert "160000" not in diff and "Subproject" not in diff and "vendor/lib" not in diff
        assert set(_raw_modes(wt)) == {"100644"}
    finally:
        await remove_worktree(root, wt)
    assert snapshot(root) == before


async def test_agent_write_inside_a_submodule_is_rejected(repo_factory) -> None:
    root, _origin = repo_with_submodule(repo_factory)
    wt = await create_worktree(root, "job-sub")
    try:
        executor = ToolExecutor(wt.path, Limits())
        patch = "diff --git a/vendor/lib/new.txt b/vendor/lib/new.txt\nnew file mode 100644\n--- /dev/null\n" \
                "+++ b/vendor/lib/new.txt\n@@ -0,0 +1 @@\n+x\n"
        # git check-ignore fails on a path inside a submodule; the tools count that as "not allowed" (fail
        # closed), which ends the job: the write is impossible, never silently dropped.
        calls = [
            ("apply_patch", {"patch": patch}),
            ("replace_text", {"path": "vendor/lib/lib.txt", "oldText": "library", "newText": "x"}),
        ]
        for tool, arguments in calls:
            with pytest.raises(JobFailure) as info:
                await executor.execute(tool, json.dumps(arguments))
            assert info.value.code is ErrorCode.CHANGESET_REJECTED, tool
        assert list((wt.path / "vendor" / "lib").iterdir()) == []
        assert await result_diff(wt) == ("", [])
    finally:
        await remove_worktree(root, wt)


async def test_changed_submodule_stays_out_of_the_local_snapshot(repo_factory) -> None:
    root, _origin = repo_with_submodule(repo_factory)
    (root / "vendor" / "lib" / "lib.txt").write_text("dirty submodule content\n")
    git(root / "vendor" / "lib", "commit", "-qam", "moved submodule commit")  # gitlink differs from HEAD's
    (root / "src/app.js").write_text("export const n = 2; // local\n")
    before = snapshot(root)
    wt = await create_worktree(root, "job-sub", include_local_changes=True)
    try:
        assert (wt.path / "src/app.js").read_text() == "export const n = 2; // local\n"
        assert list((wt.path / "vendor" / "lib").iterdir()) == []
        # The baseline keeps HEAD's gitlink: the user's moved submodule commit never enters the worktree.
        assert run(wt.path, "ls-tree", "HEAD", "vendor/lib") == run(root, "ls-tree", "HEAD", "vendor/lib")
        (wt.path / "src/app.js").write_text("export const n = 3;\n")
        diff, stats = await result_diff(wt)
        assert [s.path for s in stats] == ["src/app.js"]
        assert "160000" not in diff and "Subproject" not in diff
    finally:
        await remove_worktree(root, wt)
    assert snapshot(root) == before
    assert len(worktree_list(root)) == 1

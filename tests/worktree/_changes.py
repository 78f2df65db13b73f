"""One job's worktree and its Apply/Revert (the ``make_job`` fixture, served by conftest.py), shared by
the change, concurrent-save, concurrent-chmod and save-then-kill tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from spotpatch_agent.worktree.changes import AppliedChange, apply_change, revert_change
from spotpatch_agent.worktree.create import create_worktree
from spotpatch_agent.worktree.hashes import ChangeHashes, change_hashes
from spotpatch_agent.worktree.journal import set_fault_hook
from spotpatch_agent.worktree.placement import Worktree
from spotpatch_agent.worktree.removal import remove_worktree
from spotpatch_agent.worktree.result import result_diff
from tests.worktree._util import files

FILES: dict[str, str | bytes] = {
    "a.txt": "alpha\nbeta\ngamma\n",
    "src/app.js": "export const n = 1;\n",
    "old.txt": "to be deleted\n",
    "unrelated.txt": "leave me\n",
    "img.bin": bytes(range(256)),
}


NEW = "src/new dir/ünï côde.txt"


def agent_edit(wt: Path) -> None:
    """What the 'agent' does in the worktree: modify, create (non-ASCII + space), delete, binary."""
    (wt / "a.txt").write_text("alpha\nBETA\ngamma\n")
    (wt / "src" / "new dir").mkdir()
    (wt / NEW).write_text("héllo wörld\n", encoding="utf-8")
    (wt / "old.txt").unlink()
    (wt / "img.bin").write_bytes(bytes(reversed(range(256))))


class Job:
    def __init__(self, root: Path, wt: Worktree, diff: str, hashes: ChangeHashes) -> None:
        self.root, self.wt, self.diff, self.hashes = root, wt, diff, hashes

    async def apply(self, **kw: object) -> AppliedChange:
        return await apply_change(
            self.root,
            self.diff,
            self.hashes.baseline,
            expected_head=self.wt.head_oid,
            result_hashes=self.hashes.result,
            **kw,  # type: ignore[arg-type]
        )

    async def revert(self, applied: AppliedChange) -> None:
        await revert_change(self.root, applied, expected_head=self.wt.head_oid)


@pytest.fixture
async def make_job(repo_factory) -> AsyncIterator[Callable[..., object]]:
    made: list[tuple[Path, Worktree]] = []

    async def factory(files_: dict[str, str | bytes] = FILES, edit=agent_edit) -> Job:
        root = repo_factory(files_)
        wt = await create_worktree(root, "job-1")
        made.append((root, wt))
        edit(wt.path)
        diff, _stats = await result_diff(wt)
        return Job(root, wt, diff, await change_hashes(wt))

    yield factory
    for root, wt in made:
        await remove_worktree(root, wt)


def reset(root: Path, tree: dict[str, bytes | str], paths: list[str]) -> None:
    """Put every touched path back to its bytes in ``tree`` (absent: removed, with emptied directories)."""
    for rel in paths:
        path = root / rel
        if isinstance(tree.get(rel), bytes):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(tree[rel])  # type: ignore[arg-type]
        elif path.exists():
            path.unlink()
            parent = path.parent
            while parent != root and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent
    assert files(root) == tree


async def recorded_steps(job: Job, operation: str) -> tuple[list[str], list[str]]:
    """The step boundaries (``<step>``, without the operation) of ``operation`` on ``job`` without a race,
    and the touched paths in journal order; the tree is back at its start afterwards (applied, reverted)."""
    original = files(job.root)
    steps: dict[str, list[str]] = {}

    def hook_into(operation_: str) -> Callable[[str], None]:
        return lambda point: steps.setdefault(operation_, []).append(point.split(":", 1)[1])

    previous = set_fault_hook(hook_into("apply"))
    try:
        applied = await job.apply()
        set_fault_hook(hook_into("revert"))
        await job.revert(applied)
    finally:
        set_fault_hook(previous)
    assert files(job.root) == original
    return steps[operation], applied.paths

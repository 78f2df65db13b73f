"""A user's ``chmod`` of a touched file while Apply or Revert writes it is never undone (breaker 12 F4;
docs/security.md §7 "Apply"): it is a change of the user's as much as a save is.

The executable bit of a.txt (a modified file) is flipped at each step boundary of the write in turn, with
``renameat2`` and without it (the re-hash fallback). Before a.txt's exchange the operation refuses with the
conflict naming a.txt and every path back to its bytes before; after it the write is done and succeeds.
Either way a.txt keeps the user's mode. Once the check compared only the SHA-256, and the write put the
journalled mode back and reported success.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.worktree import dirfd
from spotpatch_agent.worktree.changes import AppliedChange
from spotpatch_agent.worktree.journal import set_fault_hook
from tests.worktree._changes import Job, recorded_steps, reset
from tests.worktree._util import files

pytestmark = pytest.mark.anyio


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "re-hash-fallback"])
@pytest.mark.parametrize("operation", ["apply", "revert"])
async def test_a_chmod_at_every_step_boundary_is_kept(
    make_job, monkeypatch: pytest.MonkeyPatch, operation: str, exchange: bool
) -> None:
    if not exchange:
        monkeypatch.setattr(dirfd, "_renameat2", False)
    job: Job = await make_job()
    root = job.root
    original = files(root)
    boundaries, paths = await recorded_steps(job, operation)
    number = paths.index("a.txt") + 1
    exchanged = boundaries.index(f"file-{number}:exchanged")
    cases = 0
    for index, step in enumerate(boundaries):
        if step in ("verified", "journal:removed"):
            continue  # after the write: a later chmod, nothing to race
        reset(root, original, paths)
        change: AppliedChange | None = await job.apply() if operation == "revert" else None
        before = files(root)
        user_mode = mode_of(root / "a.txt") ^ 0o111

        def on_step(point: str, step: str = step, user_mode: int = user_mode) -> None:
            if point == f"{operation}:{step}":
                os.chmod(root / "a.txt", user_mode)

        previous = set_fault_hook(on_step)
        error: SpotPatchError | None = None
        try:
            if change is None:
                await job.apply()
            else:
                await job.revert(change)
        except SpotPatchError as exc:
            error = exc
        finally:
            set_fault_hook(previous)
        where = f"{operation} chmod at {step}"
        assert mode_of(root / "a.txt") == user_mode, where  # never undone
        if index < exchanged:  # a.txt not yet written: the chmod is a race, reported
            assert error is not None and error.code is (
                ErrorCode.APPLY_CONFLICT if operation == "apply" else ErrorCode.REVERT_CONFLICT), where
            assert "a.txt" in error.message, where
            assert files(root) == before, where
        else:  # a.txt written: the chmod is of the new bytes and stays
            assert error is None, where
        assert not [rel for rel in files(root) if rel.split("/")[-1].startswith(".spotpatch-")], where
        cases += 1
    assert cases >= 8

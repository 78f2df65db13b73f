"""A user's save during Apply or Revert (issue 12 acceptance 3; docs/security.md §7): the save lands at each
step boundary of the write in turn (``write_steps``: journal synced and durable, each file's write,
exchange / placement / move and unlink, the verification, the journal removed), to the file that step
concerns and, at the journal boundaries, to every touched file; saved in place (``open(O_TRUNC)`` +
``write``, as most editors and formatters do) or by a rename over the file (atomic-save editors); and
once more without ``renameat2`` (the hard-link and re-hash fallbacks of other systems, whose window is
between a step boundary's re-hash and the rename, so a save exactly at a boundary is still caught).

Up to the verification the operation reports the conflict (``APPLY_CONFLICT`` / ``REVERT_CONFLICT``,
naming the file), the user's bytes are on the disk at that path, every other touched path is back to
its bytes before the operation, and no temp file or journal is left. A save after the verification
comes after a finished write: the operation succeeds and the save is on disk.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.worktree import dirfd
from spotpatch_agent.worktree.changes import AppliedChange
from spotpatch_agent.worktree.journal import journal_dir, set_fault_hook
from tests.worktree._changes import Job, recorded_steps, reset
from tests.worktree._util import files

pytestmark = pytest.mark.anyio

USER = b"// saved by the user's editor while the write ran\n"
#: The steps after which the write is finished: a save there is a later edit, not a race.
AFTER_THE_WRITE = {"verified", "journal:removed"}


def save(root: Path, rel: str, style: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if style == "in-place":
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, USER)
        os.close(fd)
    else:
        aside = path.with_name(path.name + ".user-save~")
        aside.write_bytes(USER)
        os.replace(aside, path)


def recorded(run: Callable[[], object]) -> list[str]:
    seen: list[str] = []
    previous = set_fault_hook(seen.append)
    try:
        run()
    finally:
        set_fault_hook(previous)
    return seen


@pytest.mark.parametrize(("style", "exchange"), [("in-place", True), ("rename", True), ("in-place", False)])
@pytest.mark.parametrize("operation", ["apply", "revert"])
async def test_a_save_at_every_step_boundary_is_kept_and_the_conflict_reported(
    make_job, monkeypatch: pytest.MonkeyPatch, operation: str, style: str, exchange: bool
) -> None:
    if not exchange:  # no renameat2: hard links place and move files, a re-hash guards the rename over
        monkeypatch.setattr(dirfd, "_renameat2", False)
    job: Job = await make_job()
    root = job.root
    original = files(root)
    boundaries, paths = await recorded_steps(job, operation)
    await job.apply()
    applied_tree = files(root)
    reset(root, original, paths)

    assert boundaries[0] == "journal:synced" and boundaries[-1] == "journal:removed"
    cases = 0
    for step in boundaries:
        targets = [paths[int(step.split(":")[0].removeprefix("file-")) - 1]] if step.startswith("file-") else paths
        for target in targets:
            reset(root, original, paths)
            change: AppliedChange | None = await job.apply() if operation == "revert" else None
            before = files(root)

            def on_step(point: str, step: str = step, target: str = target) -> None:
                if point == f"{operation}:{step}":
                    save(root, target, style)

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
            where = f"{operation} {step} save to {target} ({style})"
            assert (root / target).read_bytes() == USER, where  # the user's bytes are on disk
            now = files(root)
            if step in AFTER_THE_WRITE:
                assert error is None, where
                after = applied_tree if operation == "apply" else original
            else:
                assert error is not None, where
                assert error.code is (ErrorCode.APPLY_CONFLICT if operation == "apply" else ErrorCode.REVERT_CONFLICT)
                assert target in error.message, where
                after = before
            others = {k: v for k, v in now.items() if k != target and not (root / k).is_dir()}
            assert others == {k: v for k, v in after.items() if k != target and v != "dir"}, where  # no temp file
            jdir = journal_dir(root / ".git")
            assert not jdir.exists() or list(jdir.iterdir()) == [], where
            cases += 1
    assert cases >= 20


@pytest.mark.parametrize("hard_links", [True, False], ids=["hard-links", "no-hard-links"])
async def test_a_rename_save_landing_as_a_delete_moves_the_file_aside_is_kept(
    make_job, monkeypatch: pytest.MonkeyPatch, hard_links: bool
) -> None:
    """Without ``renameat2`` a delete once moved the file aside by ``link(name, tmp)`` + ``unlink(name)``: a
    save renamed over the name between the two was unlinked and Apply reported success (breaker 12 F3).
    Here the save lands right after whichever call moved ``old.txt`` aside: it must stay, and the conflict
    be reported."""
    monkeypatch.setattr(dirfd, "_renameat2", False)
    job: Job = await make_job()
    root = job.root
    original = files(root)
    fired: list[str] = []
    real_link, real_rename = os.link, os.rename

    def save_after(call: str, src: object) -> None:
        if src == "old.txt" and not fired:
            fired.append(call)
            save(root, "old.txt", "rename")

    def link(src: str, dst: str, *args: object, **kwargs: object) -> None:
        if not hard_links:
            raise PermissionError(1, "no hard links on this file system")
        real_link(src, dst, *args, **kwargs)  # type: ignore[arg-type]
        save_after("link", src)

    def rename(src: str, dst: str, *args: object, **kwargs: object) -> None:
        real_rename(src, dst, *args, **kwargs)  # type: ignore[arg-type]
        save_after("rename", src)

    monkeypatch.setattr(dirfd.os, "link", link)
    monkeypatch.setattr(dirfd.os, "rename", rename)
    with pytest.raises(SpotPatchError) as caught:
        await job.apply()
    monkeypatch.undo()
    assert fired, "the delete never moved old.txt aside"
    assert caught.value.code is ErrorCode.APPLY_CONFLICT and "old.txt" in caught.value.message
    assert (root / "old.txt").read_bytes() == USER
    assert files(root) == {**original, "old.txt": USER}  # every other path back, no temp file left

"""A save racing an Apply, then a kill, then recovery: the save is never deleted (breaker 12 F1;
docs/security.md §7 "Crash safety").

The user saves a.txt after Apply's re-hash and before its exchange, with bytes that are a prefix of the
pre-image (the last line deleted) or nothing (the file emptied). The exchange swaps the save into the
temp name and the engine is SIGKILLed right after it. Recovery once took such a temp file for "a write
cut short" (a prefix of an image) and deleted it, reporting ``rolled-back``. Now a write cut short can only
be under the ``.part`` name, so the save is put back at a.txt and reported ``needs-attention``.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable

import anyio
import pytest

from spotpatch_agent.worktree.journal import set_fault_hook
from spotpatch_agent.worktree.recovery import recover_pending
from tests.worktree._changes import NEW, Job
from tests.worktree._util import files

pytestmark = pytest.mark.anyio


def _apply_killed_after_exchange(job: Job, save: bytes) -> None:
    """Run ``job.apply`` in a forked child that saves a.txt at ``file-1:written`` and dies at ``file-1:exchanged``."""
    _apply_killed_at(job, "apply:file-1:exchanged",
                     {"apply:file-1:written": lambda: (job.root / "a.txt").write_bytes(save)})


def _apply_killed_at(job: Job, kill: str, on: dict[str, Callable[[], object]]) -> None:
    """Run ``job.apply`` in a forked child that runs ``on[point]`` at those step boundaries and is SIGKILLed at
    ``kill``."""
    pid = os.fork()
    if pid == 0:
        try:
            asyncio.events._set_running_loop(None)  # the child must not see the parent's running loop

            def hook(point: str) -> None:
                if point in on:
                    on[point]()  # e.g. the editor saves in place
                if point == kill:
                    os.kill(os.getpid(), signal.SIGKILL)

            set_fault_hook(hook)
            anyio.run(job.apply)
        finally:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status


@pytest.mark.parametrize("save", [b"alpha\n", b""], ids=["last-line-deleted", "emptied"])
async def test_a_save_that_is_a_prefix_of_an_image_survives_a_kill_after_the_exchange(make_job, save: bytes) -> None:
    job: Job = await make_job()
    pre = (job.root / "a.txt").read_bytes()
    assert pre.startswith(save) and pre != save
    _apply_killed_after_exchange(job, save)
    assert (job.root / "a.txt").read_bytes() != save  # the exchange took the save out of a.txt

    [report] = await recover_pending(job.root)

    assert (job.root / "a.txt").read_bytes() == save  # put back
    assert report.outcome == "needs-attention" and "a.txt" in report.unresolved_paths
    left = [rel for rel in files(job.root) if rel.split("/")[-1].startswith(".spotpatch-")]
    assert left == []  # what came out of a.txt again was Apply's post-image, a journalled image: removed
    assert await recover_pending(job.root) == []  # the journal was kept aside, not left pending


async def test_recovery_of_a_killed_create_keeps_a_users_empty_directory(make_job) -> None:
    """Breaker 12 F5, at recovery: Apply creates a file in the user's own empty directory and is killed
    right after placing it; the roll-back removes the file but never that directory (Apply did not make it)."""
    job: Job = await make_job()
    (job.root / "src" / "new dir").mkdir()
    before = files(job.root)
    number = sorted(["a.txt", "img.bin", "old.txt", NEW]).index(NEW) + 1  # git's order
    _apply_killed_at(job, f"apply:file-{number}:placed", {})
    assert (job.root / NEW).exists()
    [report] = await recover_pending(job.root)
    assert report.outcome == "rolled-back"
    assert files(job.root) == before

"""Crash journal and start-up recovery (docs/design.md §8, issue 6): format, durability, repair policy.

Half-written states are built directly (journal + the first k files written), as a killed engine leaves
them; tests/e2e/test_crash_recovery.py does the same with a real SIGKILL of the real engine.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from spotpatch_agent.worktree import dirfd
from spotpatch_agent.worktree.image_write import Outcome, replace_image, write_image
from spotpatch_agent.worktree.images import ABSENT, Image, new_tmp_name, part_name
from spotpatch_agent.worktree.journal import (
    FAULT_ENV,
    FAULT_RESUME_ENV,
    DiskJournal,
    PathWrite,
    WritePlan,
    decode_plan,
    encode_plan,
    fault_point,
    journal_dir,
)
from spotpatch_agent.worktree.lock import ProjectWriteLock
from spotpatch_agent.worktree.recovery import recover_pending, recover_under_lock
from tests.conftest import git
from tests.worktree._journal import FILES, POST, apply_plan, crash_after, head, image_of
from tests.worktree._util import files, snapshot

pytestmark = pytest.mark.anyio


def jdir(root: Path) -> Path:
    return journal_dir(root / ".git")


# ---------------------------------------------------------------- format and durability


async def test_journal_format_round_trips_and_stores_each_image_once(repo_factory) -> None:
    root = repo_factory(FILES)
    plan = apply_plan(root)
    twin = WritePlan("job_2", "revert", plan.head,
                     [*plan.writes, PathWrite("c.txt", ABSENT, Image(b"ALPHA\n", 0o644), new_tmp_name()),
                      PathWrite("d/e/f.txt", ABSENT, Image(b"f\n", 0o644), new_tmp_name(), 2)])
    raw = encode_plan(twin)
    header, _, data = raw.partition(b"\n")
    assert data.count(b"ALPHA\n") == 1  # deduplicated by hash
    assert b"alpha" not in header  # bytes never in the JSON header
    assert decode_plan(raw) == twin
    # a journal without "dirs" (an older engine's) removes no directory: dirs 0, never "every empty parent"
    older = decode_plan(raw.replace(b',"dirs":null', b"").replace(b',"dirs":2', b""))
    assert {w.dirs for w in older.writes} == {0}


@pytest.mark.parametrize("tamper", ["image", "path", "format", "tmp"])
async def test_decode_rejects_a_tampered_journal(repo_factory, tamper: str) -> None:
    raw = encode_plan(apply_plan(repo_factory(FILES)))
    bad = {
        "image": raw[:-2] + b"X\n",
        "path": raw.replace(b'"path":"a.txt"', b'"path":"../a.txt"'),
        "format": raw.replace(b"spotpatch-journal", b"other-journal"),
        "tmp": raw.replace(b'"tmp":".spotpatch-', b'"tmp":"../.spotpatch-', 1),
    }[tamper]
    with pytest.raises(ValueError):
        decode_plan(bad)


async def test_begin_writes_a_private_durable_journal_and_end_removes_it(repo_factory) -> None:
    root = repo_factory(FILES)
    plan = apply_plan(root)
    journal = DiskJournal(root / ".git")
    journal.begin(plan)
    [entry] = list(jdir(root).iterdir())  # no temp file left beside it
    assert entry.name == "job_1.journal"
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600 and stat.S_IMODE(jdir(root).stat().st_mode) == 0o700
    assert decode_plan(entry.read_bytes()) == plan
    journal.end(plan)
    assert list(jdir(root).iterdir()) == []
    with pytest.raises(ValueError):
        journal.path_for("../escape")


async def test_write_image_is_a_rename_and_never_writes_through_a_symlink(repo_factory) -> None:
    root = repo_factory(FILES)
    inode = os.stat(root / "a.txt").st_ino
    write_image(root, "a.txt", Image(b"new\n", 0o640), new_tmp_name())
    assert (root / "a.txt").read_bytes() == b"new\n" and os.stat(root / "a.txt").st_ino != inode
    assert stat.S_IMODE(os.stat(root / "a.txt").st_mode) == 0o640
    (root / "elsewhere").mkdir()
    (root / "link").symlink_to("elsewhere")
    with pytest.raises(OSError):
        write_image(root, "link/x.txt", Image(b"x", 0o644), new_tmp_name())
    assert list((root / "elsewhere").iterdir()) == []
    write_image(root, "src/b.txt", ABSENT, new_tmp_name())
    assert not (root / "src").exists()  # emptied parent directories go, as with git apply


def _fault_point_in_a_thread(operation: str, step: str) -> threading.Thread:
    thread = threading.Thread(target=fault_point, args=(operation, step), daemon=True)
    thread.start()
    return thread


def test_fault_point_is_inert_unless_the_test_variable_names_it(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Unset, or naming another step, the variable leaves ``fault_point`` a no-op: it returns at once and says
    nothing. Naming this step, it says ``SPOTPATCH-TEST-PAUSED`` on stderr and waits for the resume file.
    Each call runs in a thread joined with a bound, and the resume file ends any pause: a regression fails
    here instead of pausing the test for an hour."""
    resume = tmp_path / "resume"
    monkeypatch.setenv(FAULT_RESUME_ENV, str(resume))
    try:
        for wanted in (None, "revert:after-journal", "apply:after-journal-2"):
            if wanted is None:
                monkeypatch.delenv(FAULT_ENV, raising=False)
            else:
                monkeypatch.setenv(FAULT_ENV, wanted)
            inert = _fault_point_in_a_thread("apply", "after-journal")
            inert.join(10)
            assert not inert.is_alive(), f"fault_point paused although {FAULT_ENV}={wanted!r} names another step"
            assert "SPOTPATCH-TEST-PAUSED" not in capfd.readouterr().err
        monkeypatch.setenv(FAULT_ENV, "apply:after-journal")
        paused = _fault_point_in_a_thread("apply", "after-journal")
        deadline = time.monotonic() + 10
        said = ""
        while "SPOTPATCH-TEST-PAUSED" not in said and time.monotonic() < deadline:
            said += capfd.readouterr().err
            time.sleep(0.01)
        assert said == "SPOTPATCH-TEST-PAUSED apply:after-journal\n"
        assert paused.is_alive(), "fault_point did not wait for the resume file"
        resume.touch()
        paused.join(10)
        assert not paused.is_alive(), "fault_point did not return once the resume file existed"
    finally:
        resume.touch()  # ends any pause a regression left behind


# ---------------------------------------------------------------- recovery policy


@pytest.mark.parametrize("written", [0, 1, 2, 4])
async def test_recovery_rolls_a_half_done_apply_back(repo_factory, written: int) -> None:
    root = repo_factory(FILES)
    before = snapshot(root)
    plan = apply_plan(root)
    crash_after(root, plan, written)
    [report] = await recover_pending(root)
    assert report.dump() == {"jobId": "job_1", "operation": "apply", "outcome": "rolled-back",
                             "paths": list(POST), "unresolvedPaths": []}
    assert snapshot(root) == before  # files, index bytes, staged diff, status, HEAD, refs
    assert list(jdir(root).iterdir()) == []


@pytest.mark.parametrize("written", [0, 2, 4])
async def test_recovery_completes_a_half_done_revert(repo_factory, written: int) -> None:
    root = repo_factory(FILES)
    before = snapshot(root)
    applied = apply_plan(root)
    for item in applied.writes:
        write_image(root, item.path, item.post, item.tmp)
    revert = WritePlan("job_1", "revert", applied.head,
                       [PathWrite(w.path, w.post, w.pre, new_tmp_name()) for w in applied.writes])
    crash_after(root, revert, written)
    [report] = await recover_pending(root, git_dir=root / ".git")
    assert (report.operation, report.outcome) == ("revert", "completed")
    assert snapshot(root) == before


async def test_recovery_leaves_a_path_edited_after_the_crash_and_reports_it(repo_factory) -> None:
    root = repo_factory(FILES)
    plan = apply_plan(root)
    crash_after(root, plan, 2)
    (root / "src" / "b.txt").write_bytes(b"the user's own edit\n")
    [report] = await recover_pending(root)
    assert report.outcome == "needs-attention" and report.unresolved_paths == ["src/b.txt"]
    assert (root / "src" / "b.txt").read_bytes() == b"the user's own edit\n"  # never overwritten
    assert (root / "a.txt").read_bytes() == b"alpha\n"  # the others are repaired
    assert list(jdir(root).iterdir()) == []


async def test_recovery_touches_nothing_when_head_moved(repo_factory) -> None:
    root = repo_factory(FILES)
    plan = apply_plan(root)
    crash_after(root, plan, 2)
    (root / "other.txt").write_text("committed after the crash\n")
    git(root, "commit", "-qm", "later", "--", "other.txt")
    left = files(root)
    [report] = await recover_pending(root)
    assert report.outcome == "needs-attention" and report.unresolved_paths == list(POST)
    assert files(root) == left


async def test_recovery_restores_permission_bits_and_removes_only_named_temp_files(repo_factory) -> None:
    root = repo_factory(FILES)
    os.chmod(root / "a.txt", 0o755)
    plan = apply_plan(root)
    crash_after(root, plan, 1)
    os.chmod(root / "a.txt", 0o644)  # the mode only, bytes still the post-image
    stray = root / "src" / part_name(plan.writes[1].tmp)  # a temp file the killed write left
    stray.write_bytes(b"BE")  # cut short while writing the post-image (always under the .part name)
    mine = root / ".spotpatch-0123456789abcdef.tmp"  # not named by the journal: not ours to delete
    mine.write_bytes(b"keep")
    [report] = await recover_pending(root)
    assert report.outcome == "rolled-back"
    assert stat.S_IMODE(os.stat(root / "a.txt").st_mode) == 0o755
    assert not stray.exists() and mine.read_bytes() == b"keep"


async def test_unfinished_journal_write_is_discarded_and_an_unreadable_one_kept(repo_factory, caplog) -> None:
    root = repo_factory(FILES)
    jdir(root).mkdir(parents=True)
    (jdir(root) / ".job_1.journal.abcd.tmp").write_bytes(b'{"format": "spot')  # killed before the rename
    (jdir(root) / "job_2.journal").write_bytes(b"garbage\n")
    left = files(root)
    with caplog.at_level(logging.ERROR, logger="spotpatch.worktree"):
        [report] = await recover_pending(root)  # reported, and kept aside (quarantined), never applied
    assert (report.job_id, report.outcome, report.paths) == ("job_2", "needs-attention", [])
    assert list(jdir(root).iterdir()) == []
    [kept] = list((jdir(root).parent / "quarantine").iterdir())
    assert kept.name.startswith("job_2.journal.") and kept.read_bytes() == b"garbage\n"
    assert "spotpatch/journal/job_2.journal" in caplog.text and str(root) not in caplog.text
    assert files(root) == left


async def test_recovery_waits_for_no_one_when_another_engine_holds_the_lock(repo_factory) -> None:
    root = repo_factory(FILES)
    plan = apply_plan(root)
    crash_after(root, plan, 1)
    holder = ProjectWriteLock(root / ".git")
    assert holder.try_acquire()
    try:
        assert await recover_under_lock(root, root / ".git", ProjectWriteLock(root / ".git")) == []
        assert (jdir(root) / "job_1.journal").exists()  # maybe a live write: left alone
    finally:
        holder.release()
    [report] = await recover_under_lock(root, root / ".git", ProjectWriteLock(root / ".git"))
    assert report.outcome == "rolled-back"


async def test_no_journal_costs_no_git_call(repo_factory, tmp_path: Path) -> None:
    root = repo_factory(FILES)
    assert await recover_pending(root, git_dir=root / ".git") == []
    assert await recover_pending(tmp_path / "not-a-repo-dir-that-is-missing", git_dir=tmp_path / "nowhere") == []


# ---------------------------------------------------------------- issue 12 defect 2: a kill after the exchange


@pytest.mark.parametrize(("operation", "step"), [("apply", "exchanged"), ("apply", "written"),
                                               ("revert", "exchanged"), ("revert", "written")])
async def test_recovery_of_a_kill_that_left_a_temp_file_restores_the_old_bytes(
    repo_factory, operation: str, step: str
) -> None:
    """Regression (issue 12 defect 2): a kill after a file's temp file was written (``written``) or after
    its exchange, before the temp file — now holding the old bytes — was unlinked (``exchanged``).
    Recovery used to re-create that temp name (``EEXIST``), give up on the path (``needs-attention``),
    delete the temp file and the journal, and leave the file at the bytes it had."""
    root = repo_factory(FILES)
    before = snapshot(root)
    plan = apply_plan(root)
    if operation == "revert":
        for item in plan.writes:
            write_image(root, item.path, item.post, new_tmp_name())
        plan = WritePlan("job_1", "revert", plan.head,
                         [PathWrite(w.path, w.post, w.pre, new_tmp_name()) for w in plan.writes])
    DiskJournal(root / ".git").begin(plan)
    first = plan.writes[0]  # a.txt, modified
    assert first.pre.data is not None and first.post.data is not None
    if step == "exchanged":
        write_image(root, first.path, first.post, new_tmp_name())  # the path at its new bytes…
        (root / first.tmp).write_bytes(first.pre.data)  # …the temp name at the old ones
    else:
        (root / first.tmp).write_bytes(first.post.data)  # the new bytes, not yet exchanged
    [report] = await recover_pending(root)
    expected = "rolled-back" if operation == "apply" else "completed"
    assert (report.outcome, report.unresolved_paths) == (expected, [])
    assert snapshot(root) == before  # every path at its no-change bytes, no temp file left
    assert list(jdir(root).iterdir()) == []


def test_a_second_save_while_the_first_is_put_back_is_kept_under_the_temp_name(repo_factory) -> None:
    root = repo_factory(FILES)
    old, new, tmp = image_of(root, "a.txt"), Image(b"ALPHA\n", 0o644), new_tmp_name()

    def user(step: str) -> None:  # one save before the exchange, another into the new file right after it
        if step in ("written", "exchanged"):
            with open(root / "a.txt", "r+b") as fh:
                fh.truncate()
                fh.write(f"user save {step}\n".encode())

    assert replace_image(root, "a.txt", old, new, tmp, step=user) is Outcome.CHANGED_KEPT
    assert (root / "a.txt").read_bytes() == b"user save written\n"
    assert (root / tmp).read_bytes() == b"user save exchanged\n"  # never deleted


async def test_recovery_removes_the_empty_directories_a_kill_between_two_rmdirs_left(repo_factory) -> None:
    """Found by the random-kill run: a kill after the lower of two emptied directories was removed."""
    root = repo_factory(FILES)
    before = snapshot(root)
    plan = WritePlan("job_1", "apply", head(root),
                     [PathWrite("x/y/new.txt", ABSENT, Image(b"new\n", 0o644), new_tmp_name())])
    DiskJournal(root / ".git").begin(plan)
    (root / "x").mkdir()  # new.txt and x/y were removed, x not yet
    [report] = await recover_pending(root)
    assert report.outcome == "rolled-back" and snapshot(root) == before


def test_without_renameat2_the_fallbacks_write_and_never_replace_a_save(
    repo_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No exchange / no-replace rename (not Linux, or a file system without them): a hard link places and
    moves files, a re-hash guards the rename over a modified file."""
    monkeypatch.setattr(dirfd, "_renameat2", False)
    root = repo_factory(FILES)
    before = files(root)

    def write(rel: str, new: Image, step=None) -> Outcome:
        return replace_image(root, rel, image_of(root, rel), new, new_tmp_name(), step=step)

    assert write("a.txt", Image(b"ALPHA\n", 0o644)) is Outcome.WRITTEN
    assert write("new/x.txt", Image(b"x\n", 0o644)) is Outcome.WRITTEN
    assert write("gone.txt", ABSENT) is Outcome.WRITTEN
    assert files(root) == {**{k: v for k, v in before.items() if k != "gone.txt"},
                           "a.txt": b"ALPHA\n", "new": "dir", "new/x.txt": b"x\n"}  # no temp file left

    def user_saves(rel: str) -> Callable[[str], None]:
        return lambda step: (root / rel).write_bytes(b"user\n") if step == "written" else None

    assert replace_image(root, "c.txt", ABSENT, Image(b"c\n", 0o644), new_tmp_name(),
                         step=user_saves("c.txt")) is Outcome.CHANGED  # created meanwhile: kept
    assert write("other.txt", Image(b"O\n", 0o644), user_saves("other.txt")) is Outcome.CHANGED
    assert (root / "c.txt").read_bytes() == b"user\n" and (root / "other.txt").read_bytes() == b"user\n"
    assert not list(root.rglob("*.tmp"))

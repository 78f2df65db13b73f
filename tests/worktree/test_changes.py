"""apply_change / revert_change (docs/design.md §8): all-or-nothing, never the index, conflicts refuse."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.worktree import changes as changes_module
from spotpatch_agent.worktree import image_write as image_write_module
from spotpatch_agent.worktree import journal as journal_module
from spotpatch_agent.worktree.changes import apply_change, file_hash, revert_change
from spotpatch_agent.worktree.create import create_worktree
from spotpatch_agent.worktree.hashes import change_hashes
from spotpatch_agent.worktree.images import Image, new_file_mode
from spotpatch_agent.worktree.journal import WritePlan, journal_dir, set_fault_hook
from spotpatch_agent.worktree.recovery import recover_pending
from spotpatch_agent.worktree.removal import remove_worktree
from spotpatch_agent.worktree.result import result_diff
from tests.conftest import git
from tests.worktree._changes import NEW
from tests.worktree._util import files, sha, snapshot

pytestmark = pytest.mark.anyio


async def test_change_hashes_match_baseline_and_result(make_job) -> None:
    job = await make_job()
    base, result = job.hashes.baseline, job.hashes.result
    assert set(base) == set(result) == {"a.txt", NEW, "old.txt", "img.bin"}
    assert base["a.txt"] == sha(b"alpha\nbeta\ngamma\n") and result["a.txt"] == sha(b"alpha\nBETA\ngamma\n")
    assert base[NEW] is None and result[NEW] == sha("héllo wörld\n".encode())
    assert base["old.txt"] == sha(b"to be deleted\n") and result["old.txt"] is None
    assert result["img.bin"] == sha(bytes(reversed(range(256))))


async def test_apply_then_revert_round_trip(make_job) -> None:
    job = await make_job()
    root = job.root
    before = snapshot(root)
    applied = await job.apply()
    assert sorted(applied.paths) == sorted(job.hashes.baseline)
    assert applied.post_hashes == job.hashes.result
    assert (root / "a.txt").read_bytes() == b"alpha\nBETA\ngamma\n"
    assert (root / NEW).read_text(encoding="utf-8") == "héllo wörld\n"
    assert not (root / "old.txt").exists()
    assert (root / "img.bin").read_bytes() == bytes(reversed(range(256)))
    after_apply = snapshot(root)
    for key in ("index_sha", "stage", "cached", "head", "refs"):
        assert after_apply[key] == before[key], key  # never the index, HEAD or refs
    await job.revert(applied)
    assert snapshot(root) == before
    assert files(root) == before["files"]


async def test_apply_refuses_when_user_edited_a_touched_file(make_job) -> None:
    job = await make_job()
    (job.root / "a.txt").write_text("alpha\nbeta\ngamma\nuser line\n")
    before = snapshot(job.root)
    with pytest.raises(SpotPatchError) as info:
        await job.apply()
    assert info.value.code is ErrorCode.APPLY_CONFLICT
    assert "changed since the job started: a.txt" in info.value.message
    assert str(job.root) not in info.value.message and "/tmp" not in info.value.message
    assert snapshot(job.root) == before


async def test_apply_refuses_when_user_created_the_new_file(make_job) -> None:
    job = await make_job()
    (job.root / "src" / "new dir").mkdir()
    (job.root / NEW).write_text("mine\n")
    before = snapshot(job.root)
    with pytest.raises(SpotPatchError) as info:
        await job.apply()
    assert info.value.code is ErrorCode.APPLY_CONFLICT
    assert NEW in info.value.message
    assert snapshot(job.root) == before


async def test_apply_refuses_when_user_deleted_a_touched_file(make_job) -> None:
    job = await make_job()
    (job.root / "a.txt").unlink()
    before = snapshot(job.root)
    with pytest.raises(SpotPatchError) as info:
        await job.apply()
    assert info.value.code is ErrorCode.APPLY_CONFLICT
    assert snapshot(job.root) == before


async def test_apply_refuses_a_symlink_in_place_of_a_touched_file(make_job) -> None:
    job = await make_job()
    (job.root / "a.txt").unlink()
    (job.root / "a.txt").symlink_to("unrelated.txt")
    before = snapshot(job.root)
    with pytest.raises(SpotPatchError) as info:
        await job.apply()
    assert info.value.code is ErrorCode.APPLY_CONFLICT
    assert snapshot(job.root) == before


async def test_apply_refuses_when_head_moved(make_job) -> None:
    job = await make_job()
    (job.root / "unrelated.txt").write_text("committed later\n")
    git(job.root, "commit", "-qam", "later")
    before = snapshot(job.root)
    with pytest.raises(SpotPatchError) as info:
        await job.apply()
    assert info.value.code is ErrorCode.APPLY_CONFLICT
    assert "HEAD moved" in info.value.message
    assert snapshot(job.root) == before


@pytest.mark.parametrize(("marker", "reason"), [("MERGE_HEAD", "merge-in-progress"), ("index.lock", "index-locked")])
async def test_apply_refuses_during_git_operation(make_job, marker: str, reason: str) -> None:
    job = await make_job()
    (job.root / ".git" / marker).write_text(job.wt.head_oid + "\n")
    before = snapshot(job.root)
    with pytest.raises(SpotPatchError) as info:
        await job.apply()
    assert info.value.code is ErrorCode.APPLY_CONFLICT
    assert reason in info.value.message
    assert snapshot(job.root) == before


async def test_apply_rolls_back_when_result_differs_from_worktree(make_job) -> None:
    job = await make_job()
    before = snapshot(job.root)
    wrong = {**job.hashes.result, "a.txt": "0" * 64}
    with pytest.raises(SpotPatchError) as info:
        await apply_change(
            job.root, job.diff, job.hashes.baseline, expected_head=job.wt.head_oid, result_hashes=wrong
        )
    assert info.value.code is ErrorCode.APPLY_CONFLICT
    assert "a.txt" in info.value.message
    assert snapshot(job.root) == before


async def test_apply_rejects_inconsistent_record(make_job) -> None:
    job = await make_job()
    before = snapshot(job.root)
    partial = {k: v for k, v in job.hashes.baseline.items() if k != "a.txt"}
    with pytest.raises(SpotPatchError) as info:
        await apply_change(job.root, job.diff, partial, expected_head=job.wt.head_oid)
    assert info.value.code is ErrorCode.INTERNAL
    assert snapshot(job.root) == before


async def test_apply_rejects_an_empty_diff(make_job) -> None:
    job = await make_job()
    with pytest.raises(SpotPatchError) as info:
        await apply_change(job.root, "", {}, expected_head=job.wt.head_oid)
    assert info.value.code is ErrorCode.INVALID_STATE


async def test_revert_refuses_when_user_edited_after_apply(make_job) -> None:
    job = await make_job()
    applied = await job.apply()
    (job.root / "a.txt").write_text("alpha\nBETA\ngamma\nuser after apply\n")
    before = snapshot(job.root)
    with pytest.raises(SpotPatchError) as info:
        await job.revert(applied)
    assert info.value.code is ErrorCode.REVERT_CONFLICT
    assert "changed after apply: a.txt" in info.value.message
    assert "resolve by hand" in info.value.message
    assert str(job.root) not in info.value.message
    assert snapshot(job.root) == before


async def test_revert_refuses_when_user_recreated_a_deleted_file(make_job) -> None:
    job = await make_job()
    applied = await job.apply()
    (job.root / "old.txt").write_text("mine now\n")
    before = snapshot(job.root)
    with pytest.raises(SpotPatchError) as info:
        await job.revert(applied)
    assert info.value.code is ErrorCode.REVERT_CONFLICT
    assert "old.txt" in info.value.message
    assert snapshot(job.root) == before


async def test_revert_refuses_when_head_moved_or_operation_running(make_job) -> None:
    job = await make_job()
    applied = await job.apply()
    (job.root / ".git" / "index.lock").write_text("")
    before = snapshot(job.root)
    with pytest.raises(SpotPatchError) as info:
        await job.revert(applied)
    assert info.value.code is ErrorCode.REVERT_CONFLICT
    assert "index-locked" in info.value.message
    assert snapshot(job.root) == before
    (job.root / ".git" / "index.lock").unlink()
    with pytest.raises(SpotPatchError) as info:
        await revert_change(job.root, applied, expected_head="f" * 40)
    assert info.value.code is ErrorCode.REVERT_CONFLICT
    assert snapshot(job.root) == before


async def test_unrelated_and_staged_user_content_survives_apply_and_revert(make_job) -> None:
    job = await make_job()
    root = job.root
    # After the job started the user keeps working: staged, unstaged and untracked, all unrelated.
    (root / "src" / "app.js").write_text("export const n = 2;\n")
    git(root, "add", "src/app.js")
    (root / "src" / "app.js").write_text("export const n = 3;\n")
    (root / "unrelated.txt").write_text("edited by the user\n")
    (root / "notes.md").write_text("untracked notes\n")
    start = snapshot(root)
    applied = await job.apply()
    mid = snapshot(root)
    for key in ("index_sha", "stage", "cached", "head"):
        assert mid[key] == start[key], key
    assert (root / "src" / "app.js").read_text() == "export const n = 3;\n"
    assert (root / "unrelated.txt").read_text() == "edited by the user\n"
    # More unrelated edits after apply do not block revert and are not touched by it.
    (root / "unrelated.txt").write_text("edited again\n")
    await job.revert(applied)
    end = snapshot(root)
    assert end["cached"] == start["cached"] and end["stage"] == start["stage"]
    assert end["index_sha"] == start["index_sha"]
    expected_files = {**start["files"], "unrelated.txt": b"edited again\n"}  # type: ignore[dict-item]
    assert end["files"] == expected_files


async def test_file_not_in_checkout_form_is_refused_not_rewritten(make_job) -> None:
    crlf_files: dict[str, str | bytes] = {".gitattributes": "*.txt text eol=crlf\n", "w.txt": "one\ntwo\n"}

    def edit(wt: Path) -> None:
        assert (wt / "w.txt").read_bytes() == b"one\r\ntwo\r\n"
        (wt / "w.txt").write_bytes(b"one\r\nTWO\r\n")

    job = await make_job(crlf_files, edit)
    before = snapshot(job.root)
    assert (job.root / "w.txt").read_bytes() == b"one\ntwo\n"  # committed before the attribute applied
    # Baseline hashes are of the checkout form (CRLF here); the user's LF bytes differ, so apply
    # fails closed instead of silently rewriting every line ending of the file.
    with pytest.raises(SpotPatchError) as info:
        await job.apply()
    assert info.value.code is ErrorCode.APPLY_CONFLICT
    assert snapshot(job.root) == before


async def test_crlf_checkout_form_applies_and_reverts(repo_factory) -> None:
    root = repo_factory({".gitattributes": "*.txt text eol=crlf\n", "w.txt": "one\ntwo\n"})
    (root / "w.txt").unlink()
    git(root, "checkout", "--", "w.txt")  # now in checkout form, as a real clone would have it
    assert (root / "w.txt").read_bytes() == b"one\r\ntwo\r\n"
    wt = await create_worktree(root, "job-crlf")
    try:
        (wt.path / "w.txt").write_bytes(b"one\r\nTWO\r\n")
        diff, _ = await result_diff(wt)
        hashes = await change_hashes(wt)
        assert hashes.baseline["w.txt"] == file_hash(root, "w.txt")
        before = snapshot(root)
        applied = await apply_change(
            root, diff, hashes.baseline, expected_head=wt.head_oid, result_hashes=hashes.result
        )
        assert (root / "w.txt").read_bytes() == b"one\r\nTWO\r\n"
        await revert_change(root, applied, expected_head=wt.head_oid)
        assert snapshot(root)["files"] == before["files"]
    finally:
        await remove_worktree(root, wt)


class RecordingJournal:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def begin(self, plan: WritePlan) -> None:
        self.events.append(("begin", plan.operation))

    def end(self, plan: WritePlan) -> None:
        self.events.append(("end", plan.operation))


async def test_journal_seam_brackets_the_write(make_job) -> None:
    job = await make_job()
    journal = RecordingJournal()
    applied = await job.apply(journal=journal)
    await revert_change(job.root, applied, expected_head=job.wt.head_oid, journal=journal)
    assert journal.events == [("begin", "apply"), ("end", "apply"), ("begin", "revert"), ("end", "revert")]
    refused = RecordingJournal()
    (job.root / "a.txt").write_text("user\n")
    with pytest.raises(SpotPatchError):
        await job.apply(journal=refused)
    assert refused.events == []  # refusals happen before anything is journalled or written


@pytest.mark.parametrize("bad", ["../evil.txt", ".git/config"])
async def test_apply_rejects_paths_outside_the_working_tree(make_job, bad: str) -> None:
    job = await make_job()
    patch = (
        f"diff --git a/{bad} b/{bad}\nnew file mode 100644\n--- /dev/null\n+++ b/{bad}\n@@ -0,0 +1 @@\n+x\n"
    )
    before = snapshot(job.root)
    with pytest.raises(SpotPatchError) as info:
        await apply_change(job.root, patch, {bad: None}, expected_head=job.wt.head_oid)
    assert info.value.code is ErrorCode.CHANGESET_REJECTED
    assert snapshot(job.root) == before
    assert not (job.root.parent / "evil.txt").exists()


def test_file_hash_states(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    (tmp_path / "d").mkdir()
    (tmp_path / "link").symlink_to("f")
    (tmp_path / "ldir").symlink_to("d")
    (tmp_path / "d" / "g").write_bytes(b"y")
    assert file_hash(tmp_path, "f") == sha(b"x")
    assert file_hash(tmp_path, "missing") is None
    assert file_hash(tmp_path, "missing/deeper") is None
    for rel in ("d", "link", "ldir/g", "f/under-a-file"):
        value = file_hash(tmp_path, rel)
        assert value is not None and len(value) != 64, rel
    assert file_hash(tmp_path, "d/g") == sha(b"y")


# ---------------------------------------------------------------- crash journal and per-file atomic writes


def journal_files(root: Path) -> list[str]:
    jdir = journal_dir(root / ".git")
    return sorted(p.name for p in jdir.iterdir()) if jdir.is_dir() else []


async def test_apply_and_revert_journal_then_leave_no_journal_and_no_temp_files(
    make_job, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = await make_job()
    seen: list[list[str]] = []
    real = journal_module.replace_image

    def spy(root: Path, rel: str, *args: object, **kw: object) -> object:
        seen.append(journal_files(root))  # the journal is durable before every single write
        return real(root, rel, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(journal_module, "replace_image", spy)
    applied = await job.apply(job_id="job_x")
    await job.revert(applied)
    assert seen and all(names == ["job_x.journal"] for names in seen)
    assert journal_files(job.root) == []
    assert not list(job.root.rglob("*.tmp"))


class FailingJournal(RecordingJournal):
    def begin(self, plan: WritePlan) -> None:
        raise PermissionError(13, "Permission denied")


async def test_apply_refuses_when_the_journal_cannot_be_written(make_job) -> None:
    job = await make_job()
    before = snapshot(job.root)
    with pytest.raises(SpotPatchError) as info:
        await job.apply(journal=FailingJournal())
    assert info.value.code is ErrorCode.APPLY_CONFLICT and "crash journal" in info.value.message
    assert snapshot(job.root) == before


async def test_a_failed_write_is_undone_and_nothing_changes(make_job, monkeypatch: pytest.MonkeyPatch) -> None:
    job = await make_job()
    before = snapshot(job.root)
    real, calls = journal_module.replace_image, []

    def flaky(root: Path, rel: str, *args: object, **kw: object) -> object:
        calls.append(rel)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(root, rel, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(journal_module, "replace_image", flaky)
    with pytest.raises(SpotPatchError) as info:
        await job.apply()
    assert info.value.code is ErrorCode.APPLY_CONFLICT
    assert "No space left on device" in info.value.message and "nothing was changed" in info.value.message
    assert snapshot(job.root) == before and journal_files(job.root) == []


async def test_an_undo_that_cannot_finish_keeps_the_journal_for_the_next_start(
    make_job, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = await make_job()
    before = snapshot(job.root)
    real, calls = journal_module.replace_image, []

    def failing(root: Path, rel: str, *args: object, **kw: object) -> object:
        calls.append(rel)
        if len(calls) >= 2:  # the second write fails, then so does the undo of the first
            raise OSError(5, "Input/output error")
        return real(root, rel, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(journal_module, "replace_image", failing)
    with pytest.raises(SpotPatchError) as info:
        await job.apply(job_id="job_kept")
    assert info.value.code is ErrorCode.INTERNAL and "journal was kept" in info.value.message
    assert journal_files(job.root) == ["job_kept.journal"]
    monkeypatch.undo()
    [report] = await recover_pending(job.root)
    assert report.outcome == "rolled-back" and report.unresolved_paths == []
    assert snapshot(job.root) == before


async def test_a_save_to_a_written_file_before_a_later_write_fails_is_kept(
    make_job, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = await make_job()
    before = snapshot(job.root)
    real, calls = journal_module.replace_image, []

    def raced(root: Path, rel: str, *args: object, **kw: object) -> object:
        calls.append(rel)
        if len(calls) == 2:  # the user saves the first written file, then the second write fails
            (root / calls[0]).write_bytes(b"edited by the user meanwhile\n")
            raise OSError(5, "Input/output error")
        return real(root, rel, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(journal_module, "replace_image", raced)
    with pytest.raises(SpotPatchError) as info:
        await job.apply(job_id="job_kept")
    assert info.value.code is ErrorCode.APPLY_CONFLICT and calls[0] in info.value.message
    assert "kept" in info.value.message
    assert (job.root / calls[0]).read_bytes() == b"edited by the user meanwhile\n"  # the user's save wins
    after = snapshot(job.root)
    assert {k: v for k, v in after["files"].items() if k != calls[0]} == {
        k: v for k, v in before["files"].items() if k != calls[0]}  # every other path back, no temp file
    assert journal_files(job.root) == []


async def test_apply_and_revert_keep_permission_bits(make_job) -> None:
    job = await make_job()
    os.chmod(job.root / "a.txt", 0o600)  # not content: the baseline hash still matches
    applied = await job.apply()
    assert stat.S_IMODE(os.stat(job.root / "a.txt").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(job.root / NEW).st_mode) == new_file_mode()
    await job.revert(applied)
    assert stat.S_IMODE(os.stat(job.root / "a.txt").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(job.root / "old.txt").st_mode) == 0o644


async def test_revert_refuses_when_it_would_not_restore_the_baseline(make_job) -> None:
    job = await make_job()
    applied = await job.apply()
    applied.baseline_images["a.txt"] = Image(b"not what was there\n", 0o644)
    before = snapshot(job.root)
    with pytest.raises(SpotPatchError) as info:
        await job.revert(applied)
    assert info.value.code is ErrorCode.REVERT_CONFLICT
    assert "would not restore the baseline of a.txt" in info.value.message
    assert snapshot(job.root) == before


async def test_revert_without_kept_images_restores_from_the_diff_objects(make_job) -> None:
    job = await make_job()
    before = snapshot(job.root)
    applied = await job.apply()
    applied.baseline_images.clear()  # e.g. a record built elsewhere: the old blobs are used instead
    await job.revert(applied)
    assert snapshot(job.root)["files"] == before["files"]


async def test_apply_refuses_when_the_result_cannot_be_reproduced(make_job, monkeypatch: pytest.MonkeyPatch) -> None:
    job = await make_job()  # img.bin is a binary change: its post-image must come from the result blob

    async def gone(*_args: object) -> None:
        return None

    async def none_listed(*_args: object) -> dict[str, bytes]:
        return {}

    monkeypatch.setattr(changes_module, "raw_blobs", none_listed)  # as if gc had pruned the job's objects
    monkeypatch.setattr(changes_module, "filtered_blob", gone)
    before = snapshot(job.root)
    with pytest.raises(SpotPatchError) as info:
        await job.apply()
    assert info.value.code is ErrorCode.APPLY_CONFLICT and "img.bin cannot be reproduced" in info.value.message
    assert snapshot(job.root) == before and journal_files(job.root) == []


async def test_a_text_change_applies_and_reverts_with_one_git_process_each(
    make_job, monkeypatch: pytest.MonkeyPatch
) -> None:
    def text_edit(wt: Path) -> None:
        (wt / "a.txt").write_text("alpha\nBETA\ngamma\n")
        (wt / "src" / "new dir").mkdir()
        (wt / NEW).write_text("héllo wörld\n", encoding="utf-8")
        (wt / "old.txt").unlink()

    job = await make_job(edit=text_edit)
    before = snapshot(job.root)
    commands: list[str] = []
    real = changes_module.run_git

    async def counting(args, **kw):  # type: ignore[no-untyped-def]
        commands.append(args[0])
        return await real(args, **kw)

    monkeypatch.setattr(changes_module, "run_git", counting)
    applied = await job.apply()
    assert commands == []  # HEAD read in process; post-images from the diff text: no git process at all
    await job.revert(applied)
    assert commands == []
    assert snapshot(job.root) == before


# ---------------------------------------------------------------- issue 12 defect 3: a save during the write


USER_SAVE = b"the user's save, made while the write ran\n"


@pytest.mark.parametrize("operation", ["apply", "revert"])
async def test_a_save_between_the_recheck_and_the_exchange_is_kept_and_reported(
    make_job, monkeypatch: pytest.MonkeyPatch, operation: str
) -> None:
    """Regression (issue 12 defect 3): a save to a touched file after the engine re-hashed it and before
    its exchange used to be swapped into the temp name and unlinked, and Apply reported ``applied``."""
    job = await make_job()
    applied = await job.apply() if operation == "revert" else None
    before = snapshot(job.root)
    real, saved = image_write_module.swap, []

    def raced(tmp: str, target: str, directory: int, *rest: object) -> object:
        if not saved:  # a format-on-save lands in the window: written in place, as editors do
            saved.append(target)
            fd = os.open(target, os.O_WRONLY | os.O_TRUNC, dir_fd=directory)
            os.write(fd, USER_SAVE)
            os.close(fd)
        return real(tmp, target, directory, *rest)

    monkeypatch.setattr(image_write_module, "swap", raced)
    with pytest.raises(SpotPatchError) as info:
        if applied is None:
            await job.apply()
        else:
            await job.revert(applied)
    assert saved == ["a.txt"]
    assert info.value.code is (ErrorCode.APPLY_CONFLICT if applied is None else ErrorCode.REVERT_CONFLICT)
    assert "a.txt" in info.value.message
    assert (job.root / "a.txt").read_bytes() == USER_SAVE  # the user's bytes are on disk
    left = snapshot(job.root)["files"]
    assert {k: v for k, v in left.items() if k != "a.txt"} == {  # nothing else changed, no temp file
        k: v for k, v in before["files"].items() if k != "a.txt"}
    assert journal_files(job.root) == []


@pytest.mark.parametrize("existing", ["src/new dir", "src/new dir/deeper"], ids=["parent", "with-a-child-dir"])
async def test_revert_keeps_a_users_empty_directory_that_existed_before_apply(make_job, existing: str) -> None:
    """Breaker 12 F5: Revert removes only the directories Apply made. ``src/new dir`` is the user's own (an
    untracked, empty ``logs/``-like directory) before Apply creates ``NEW`` in it: Apply + Revert must give
    back the tree before Apply, that directory included."""
    job = await make_job()
    (job.root / existing).mkdir(parents=True)
    before = files(job.root)
    applied = await job.apply()
    assert applied.created_dirs == {}  # Apply made no directory for NEW
    await job.revert(applied)
    assert files(job.root) == before


async def test_revert_removes_the_directories_apply_made(make_job) -> None:
    job = await make_job()
    before = files(job.root)
    applied = await job.apply()
    assert applied.created_dirs == {NEW: 1}
    await job.revert(applied)
    assert files(job.root) == before  # "src/new dir" made by Apply is gone again, "src" stays


async def test_an_undone_apply_keeps_a_users_empty_directory(make_job) -> None:
    """The undo of a refused Apply removes a created file's directories only when Apply made them."""
    job = await make_job()
    (job.root / "src" / "new dir").mkdir()
    before = files(job.root)

    def save_last(point: str) -> None:
        if point.endswith(":unlinked") and (job.root / NEW).exists():
            (job.root / "a.txt").write_text("saved by the user\n")  # a race: the Apply is undone

    previous = set_fault_hook(save_last)
    try:
        with pytest.raises(SpotPatchError):
            await job.apply()
    finally:
        set_fault_hook(previous)
    assert (job.root / "src" / "new dir").is_dir()
    after = files(job.root)
    assert {k: v for k, v in after.items() if k != "a.txt"} == {k: v for k, v in before.items() if k != "a.txt"}

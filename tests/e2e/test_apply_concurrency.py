"""The user keeps working while a job runs and after it applies (issue 6 acceptance 2), through the real
``spotpatch-agent serve`` and a multi-file scripted job (tests/e2e/_multifile.py).

Also covered elsewhere, not repeated here: an edit of a touched file *after* the review (staged) refuses
Apply and an edit after Apply refuses Revert (tests/e2e/test_serve_job.py); a Revert whose restore would
not equal the baseline hashes refuses with nothing changed — unreachable through the protocol without
tampering with the engine's memory — (tests/worktree/test_changes.py
``test_revert_refuses_when_it_would_not_restore_the_baseline``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spotpatch_agent.provider.scripted import ScriptedProviderServer
from spotpatch_agent.worktree.journal import FAULT_ENV, FAULT_RESUME_ENV
from tests.conftest import git
from tests.e2e._multifile import (
    HEADER,
    ITEMS,
    NOTES,
    NOTES_TEXT,
    README,
    TOUCHED,
    expected_after,
    multi_file_turns,
    path_hashes,
    quiet_git,
    repo_state,
    run_to_review,
    tree_files,
)
from tests.e2e._support import wait_paused
from tests.engine_client import EngineProcess
from tests.support.serve import KEY_ENV, start_engine

APP = "src/App.tsx"


def test_apply_refuses_when_the_user_edits_a_touched_file_during_the_job(project: Path, canary: str) -> None:
    def user_edits_header() -> None:
        path = project / HEADER
        path.write_text(path.read_text("utf-8").replace("<header", "<header data-user"), "utf-8")

    with ScriptedProviderServer(multi_file_turns(before_edit=user_edits_header)) as server:
        eng = start_engine(canary)
        try:
            job_id = run_to_review(eng, project, server)
            files, repo = tree_files(project), repo_state(project)
            assert b"data-user" in files[HEADER]
            reply = eng.request("job/apply", {"jobId": job_id})
            assert reply["error"]["data"]["code"] == "APPLY_CONFLICT"
            assert HEADER in reply["error"]["message"]
            assert tree_files(project) == files and repo_state(project) == repo  # byte-identical, index too
            assert eng.call("job/get", {"jobId": job_id})["status"] == "awaiting-review"
        finally:
            eng.stop()


def test_apply_succeeds_and_keeps_a_user_edit_of_an_untouched_file_during_the_job(project: Path, canary: str) -> None:
    original = tree_files(project)
    user_app = original[APP].replace(b"Saved to your list.", b"Saved (user copy).")

    with ScriptedProviderServer(multi_file_turns(before_edit=lambda: (project / APP).write_bytes(user_app))) as server:
        eng = start_engine(canary)
        try:
            job_id = run_to_review(eng, project, server)
            assert (project / APP).read_bytes() == user_app
            after = expected_after(project)
            assert eng.call("job/apply", {"jobId": job_id})["status"] == "applied"
            assert path_hashes(project) == after
            assert (project / APP).read_bytes() == user_app
            assert eng.call("job/revert", {"jobId": job_id})["status"] == "reverted"
            assert tree_files(project) == {**original, APP: user_app}
        finally:
            eng.stop()


def test_revert_refuses_when_the_user_recreates_a_file_the_job_deleted(project: Path, canary: str) -> None:
    with ScriptedProviderServer(multi_file_turns()) as server:
        eng = start_engine(canary)
        try:
            job_id = run_to_review(eng, project, server)
            assert eng.call("job/apply", {"jobId": job_id})["status"] == "applied"
            (project / README).write_text("# my own readme\n")
            files, repo = tree_files(project), repo_state(project)
            reply = eng.request("job/revert", {"jobId": job_id})
            assert reply["error"]["data"]["code"] == "REVERT_CONFLICT"
            assert README in reply["error"]["message"] and "resolve by hand" in reply["error"]["message"]
            assert tree_files(project) == files and repo_state(project) == repo
            assert eng.call("job/get", {"jobId": job_id})["status"] == "applied"
        finally:
            eng.stop()


def test_staged_unstaged_and_untracked_work_from_before_the_job_survives_apply_and_revert(
    project: Path, canary: str
) -> None:
    # Before the job: a staged edit of a file the job touches, an unstaged edit on top of it and of a
    # second touched file, a staged edit of an untouched file, and an untracked file.
    items = project / ITEMS
    items.write_text(items.read_text("utf-8").replace("type ItemListProps", "// staged note\ntype ItemListProps"),
                     "utf-8")
    git(project, "add", ITEMS)
    items.write_text(items.read_text("utf-8") + "// unstaged tail\n", "utf-8")
    header = project / HEADER
    header.write_text("// unstaged head\n" + header.read_text("utf-8"), "utf-8")
    main = project / "src" / "main.tsx"
    main.write_text(main.read_text("utf-8") + "// staged\n", "utf-8")
    git(project, "add", "src/main.tsx")
    (project / "scratch notes.txt").write_bytes(b"untracked \xe2\x9c\x93\n")
    before_files, before_repo = tree_files(project), repo_state(project)
    status = quiet_git(project, "status", "--porcelain=v1", "-z", "--untracked-files=all")

    with ScriptedProviderServer(multi_file_turns()) as server:
        eng = start_engine(canary)
        try:
            job_id = run_to_review(eng, project, server, consent=True)
            diff = eng.call("job/diff", {"jobId": job_id})["diff"]
            assert "staged note" not in diff and "unstaged" not in diff  # only the agent's increment
            after = expected_after(project)
            assert eng.call("job/apply", {"jobId": job_id})["status"] == "applied"
            assert path_hashes(project) == after
            assert "// staged note" in items.read_text("utf-8")
            assert items.read_text("utf-8").endswith("// unstaged tail\n")
            untouched = {p: b for p, b in before_files.items() if p not in TOUCHED}
            assert {p: b for p, b in tree_files(project).items() if p not in TOUCHED} == untouched
            assert repo_state(project) == before_repo  # index bytes, git diff --cached, HEAD, refs
            assert eng.call("job/revert", {"jobId": job_id})["status"] == "reverted"
            assert tree_files(project) == before_files  # byte for byte
            assert repo_state(project) == before_repo
            assert quiet_git(project, "status", "--porcelain=v1", "-z", "--untracked-files=all") == status
        finally:
            eng.stop()


def test_non_ascii_and_space_file_names_round_trip_through_diff_apply_and_revert(project: Path, canary: str) -> None:
    original = tree_files(project)
    with ScriptedProviderServer(multi_file_turns()) as server:
        eng = start_engine(canary)
        try:
            job_id = run_to_review(eng, project, server)
            result = eng.call("job/diff", {"jobId": job_id})
            assert [f["path"] for f in result["files"]] == TOUCHED
            assert {"path": NOTES, "added": 2, "removed": 0, "status": "added"} in result["files"]
            assert f"diff --git a/{NOTES} b/{NOTES}\n" in result["diff"] and f"+++ b/{NOTES}" in result["diff"]
            assert eng.call("job/apply", {"jobId": job_id})["status"] == "applied"
            assert (project / NOTES).read_text("utf-8") == NOTES_TEXT
            porcelain = quiet_git(project, "-c", "core.quotepath=false", "status", "--porcelain", "-z",
                                  "--untracked-files=all").decode("utf-8")
            assert f"?? {NOTES}\0" in porcelain
            assert eng.call("job/revert", {"jobId": job_id})["status"] == "reverted"
            assert not (project / "src" / "notes").exists()
            assert tree_files(project) == original
        finally:
            eng.stop()
    assert str(project) not in eng.all_output()


USER_SAVE = b"// the user's format-on-save, while the engine wrote\n"


@pytest.mark.parametrize("point", ["apply:file-2:written", "revert:file-2:exchanged"])
def test_a_save_while_the_engine_writes_a_file_is_kept_and_reported(
    project: Path, canary: str, tmp_path: Path, point: str
) -> None:
    """Issue 12 defect 3 through the whole engine: the write pauses at a step boundary of HEADER (the second
    path written; SPOTPATCH_TEST_FAULT_PAUSE + _RESUME, worktree/journal.py), the user saves HEADER, the
    write goes on: the operation reports the conflict naming HEADER, HEADER holds the user's bytes, every
    other path is as before the operation, no temp file or journal is left. Every boundary, in process:
    tests/worktree/test_concurrent_saves.py."""
    operation = point.split(":", 1)[0]
    resume = tmp_path / "resume"
    with ScriptedProviderServer(multi_file_turns()) as server:
        eng = EngineProcess(env={KEY_ENV: canary, FAULT_ENV: point, FAULT_RESUME_ENV: str(resume)})
        try:
            job_id = run_to_review(eng, project, server)
            if operation == "revert":
                assert eng.call("job/apply", {"jobId": job_id})["status"] == "applied"
            files, repo = tree_files(project), repo_state(project)
            rid = eng.start_request(f"job/{operation}", {"jobId": job_id})
            wait_paused(eng, point)
            assert TOUCHED[1] == HEADER
            (project / HEADER).write_bytes(USER_SAVE)  # in place, as an editor saves
            resume.touch()
            reply = eng.response(rid, timeout=30)
            assert reply["error"]["data"]["code"] == ("APPLY_CONFLICT" if operation == "apply" else "REVERT_CONFLICT")
            assert HEADER in reply["error"]["message"]
            assert tree_files(project) == {**files, HEADER: USER_SAVE}  # no temp file, nothing else changed
            assert repo_state(project) == repo
            assert not any((project / ".git" / "spotpatch" / "journal").iterdir())
            assert eng.call("job/get", {"jobId": job_id})["status"] == ("awaiting-review" if operation == "apply"
                                                                        else "applied")
        finally:
            eng.stop()

"""Fault injection through the whole engine (issues 6 and 12): SIGKILL the real ``spotpatch-agent serve``
during Apply and Revert — once the journal is durable, after each file's exchange / placement / move
(its temp file not yet unlinked: the state of issue 12 defect 2), and after the verification — restart it
on the same repository, and prove the crash journal repaired the tree. Every step boundary of the write
(each write, exchange, fsync, unlink and journal update) is covered, faster, by
tests/worktree/test_crash_boundaries.py, which kills a process running the same write code.

The test-only variable ``SPOTPATCH_TEST_FAULT_PAUSE=<operation>:<step>`` makes the engine print
``SPOTPATCH-TEST-PAUSED <operation>:<step>`` to stderr and block at that step (worktree/journal.py).
After the restart every touched file is wholly old or wholly new — in fact back at the state before the
job (the recovery policy: an Apply is rolled back, a Revert completed) — and the index bytes, the staged
diff, HEAD and refs are unchanged, the journal is gone, and ``initialize`` reports the job.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spotpatch_agent.provider.scripted import ScriptedProviderServer
from spotpatch_agent.worktree.journal import FAULT_ENV
from tests.e2e._multifile import (
    TOUCHED,
    expected_after,
    multi_file_turns,
    path_hashes,
    repo_state,
    run_to_review,
    tree_files,
)
from tests.e2e._support import wait_paused
from tests.engine_client import EngineProcess
from tests.support.serve import KEY_ENV, config_for, start_engine

#: The step after which file k holds its new image and its temp file still exists, per operation (the
#: job deletes README, modifies HEADER and ITEMS, creates NOTES; the Revert does the opposite).
_MIDDLE = {"apply": ["moved", "exchanged", "exchanged", "placed"],
           "revert": ["placed", "exchanged", "exchanged", "moved"]}
POINTS = [f"{operation}:{step}" for operation in ("apply", "revert") for step in (
    "journal:durable", *(f"file-{k}:{name}" for k, name in enumerate(_MIDDLE[operation], start=1)), "verified")]


def written_before_kill(step: str) -> int:
    """How many touched paths hold their new bytes when the engine is killed at ``step``."""
    if step == "journal:durable":
        return 0
    return len(TOUCHED) if step == "verified" else int(step.split(":")[0].removeprefix("file-"))


@pytest.mark.parametrize("point", POINTS)
def test_sigkill_at_each_write_step_is_repaired_on_restart(project: Path, canary: str, point: str) -> None:
    operation, step = point.split(":", 1)
    journal_dir = project / ".git" / "spotpatch" / "journal"
    original_files, original_repo = tree_files(project), repo_state(project)
    before, after = path_hashes(project), expected_after(project)
    with ScriptedProviderServer(multi_file_turns()) as server:
        eng = EngineProcess(env={KEY_ENV: canary, FAULT_ENV: point})
        try:
            job_id = run_to_review(eng, project, server)
            if operation == "revert":
                assert eng.call("job/apply", {"jobId": job_id})["status"] == "applied"
                assert path_hashes(project) == after
            eng.start_request(f"job/{operation}", {"jobId": job_id})
            wait_paused(eng, point)
        finally:
            eng.kill()  # SIGKILL: no cleanup ran

        # What the engine left: the journal, and exactly the first k files written.
        assert [p.name for p in journal_dir.iterdir()] == [f"{job_id}.journal"]
        old, new = (before, after) if operation == "apply" else (after, before)
        now = path_hashes(project)
        assert all(now[p] in (old[p], new[p]) for p in TOUCHED)  # wholly old or wholly new, even now
        assert [p for p in TOUCHED if now[p] == new[p]] == TOUCHED[: written_before_kill(step)]
        assert repo_state(project) == original_repo

        again = start_engine(canary)
        try:
            init = again.initialize(project, config_for(server))
            expected_outcome = "rolled-back" if operation == "apply" else "completed"
            assert init["recovered"] == [{"jobId": job_id, "operation": operation, "outcome": expected_outcome,
                                          "paths": TOUCHED, "unresolvedPaths": []}]
            assert tree_files(project) == original_files  # every touched file back to its pre-job bytes
            assert repo_state(project) == original_repo  # index bytes, staged diff, HEAD, refs
            assert list(journal_dir.iterdir()) == []
            assert again.call("health/get", {})["state"] == "clean"
            assert again.call("session/get", {})["recovered"] == init["recovered"]  # for the page, every call
            assert again.close() == 0
        finally:
            again.stop()
    assert str(project) not in again.all_output(), "an absolute path leaked to stdout or stderr"
    assert f"{operation} of {job_id} was {expected_outcome}" in again.all_output()

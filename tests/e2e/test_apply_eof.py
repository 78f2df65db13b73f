"""stdin EOF during Apply/Revert over a real ``spotpatch-agent serve`` (issue 25, LOW): an Apply or Revert the
engine received is finished, its real result is answered, and what Revert needs is saved, so the terminal's
``spotpatch-agent revert JOB_ID`` works after the engine exited."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

from spotpatch_agent.demo.runner import TOUCHED
from spotpatch_agent.demo.script import demo_turns
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.protocol_robustness._support import RawEngine
from tests.support.annotations import demo_annotation
from tests.support.cli import cli
from tests.support.serve import KEY_ENV, config_for, run_to_review, start_engine


def test_stdin_eof_right_after_job_apply_answers_applied_and_revert_works_later(project: Path, canary: str) -> None:
    original = (project / TOUCHED).read_bytes()
    with ScriptedProviderServer(demo_turns()) as server:
        eng = start_engine(canary)
        try:
            job_id = run_to_review(eng, project, server)
            rid = eng.start_request("job/apply", {"jobId": job_id})
            assert eng.proc.stdin is not None
            eng.proc.stdin.close()  # EOF right behind the request
            assert eng.proc.wait(30) == 1  # EOF without shutdown is still not a clean exit
            reply = eng.response(rid, timeout=5)
        finally:
            eng.kill()
    assert "error" not in reply, f"the applied change was answered as {reply['error']}"
    assert reply["result"]["status"] == "applied" and reply["result"]["jobId"] == job_id
    applied = (project / TOUCHED).read_bytes()
    assert applied != original and b"btn-primary" in applied
    assert canary not in eng.all_output()
    res = cli("revert", "--project", str(project), job_id)  # the engine is gone: the saved record reverts it
    assert res.returncode == 0, res.stdout + res.stderr
    assert (project / TOUCHED).read_bytes() == original


def test_stdin_eof_right_after_job_revert_answers_reverted(project: Path, canary: str) -> None:
    original = (project / TOUCHED).read_bytes()
    with ScriptedProviderServer(demo_turns()) as server:
        eng = start_engine(canary)
        try:
            job_id = run_to_review(eng, project, server)
            assert eng.call("job/apply", {"jobId": job_id})["status"] == "applied"
            rid = eng.start_request("job/revert", {"jobId": job_id})
            assert eng.proc.stdin is not None
            eng.proc.stdin.close()
            assert eng.proc.wait(30) == 1
            reply = eng.response(rid, timeout=5)
        finally:
            eng.kill()
    assert reply.get("result", {}).get("status") == "reverted", reply
    assert (project / TOUCHED).read_bytes() == original
    res = cli("revert", "--project", str(project), job_id)  # already reverted: refused, nothing written
    assert res.returncode == 1 and "already reverted" in res.stderr, res.stdout + res.stderr
    assert subprocess.run(["git", "-C", str(project), "status", "--porcelain"], capture_output=True,
                          text=True).stdout == ""


def test_stdin_and_stdout_closed_right_after_job_apply_leave_it_whole_with_its_revert_record(
        project: Path, canary: str) -> None:
    original = (project / TOUCHED).read_bytes()
    with ScriptedProviderServer(demo_turns()) as server:
        eng = RawEngine(env={KEY_ENV: canary})
        try:
            eng.call("initialize", {"protocolVersion": "0.1", "processId": os.getpid(), "clientInfo": {"name": "t"},
                                    "projectRoot": str(project), "config": config_for(server)})
            job_id = eng.call("job/create", {"annotation": demo_annotation(), "modelProfileId": "m1"})["jobId"]
            eng.read_until(lambda: any(e["kind"] == "status" and e["status"] == "awaiting-review"
                                       for e in eng.events(job_id)), timeout=60)
            eng.request("job/apply", {"jobId": job_id})
            assert eng.proc.stdin is not None and eng.proc.stdout is not None
            eng.proc.stdin.close()
            eng.proc.stdout.close()  # nobody reads the reply: the engine cannot answer
            assert eng.proc.wait(30) == 1
        finally:
            if eng.proc.poll() is None:
                eng.proc.kill()
                eng.proc.wait()
    record = json.loads((project / ".git/spotpatch/reviews" / f"{job_id}.json").read_text())
    assert record["state"] == "applied"
    assert hashlib.sha256((project / TOUCHED).read_bytes()).hexdigest() == record["resultHashes"][TOUCHED]
    res = cli("revert", "--project", str(project), job_id)
    assert res.returncode == 0, res.stdout + res.stderr
    assert (project / TOUCHED).read_bytes() == original


def test_an_engine_apply_with_a_symlinked_reviews_directory_applies_says_so_and_writes_nothing_through_it(
        project: Path, canary: str, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (project / ".git/spotpatch").mkdir(exist_ok=True)
    (project / ".git/spotpatch/reviews").symlink_to(outside)
    with ScriptedProviderServer(demo_turns()) as server:
        eng = start_engine(canary)
        try:
            job_id = run_to_review(eng, project, server)
            applied = eng.call("job/apply", {"jobId": job_id})
            assert applied["status"] == "applied"
            assert "Only this engine session can revert it" in applied["message"]
            assert ".git/spotpatch/reviews is a symlink" in applied["message"]
            assert str(tmp_path) not in applied["message"]
            assert eng.call("job/revert", {"jobId": job_id})["status"] == "reverted"  # in-session revert still works
        finally:
            eng.stop()
    assert list(outside.iterdir()) == []

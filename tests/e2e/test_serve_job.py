"""End to end over a real ``spotpatch-agent serve`` subprocess and a real local OpenAI-compatible server
(issue 2 acceptance 1, 3, 5, 6): initialize → job/create → job/event… → job/diff → job/apply → job/revert."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

from spotpatch_agent.demo.runner import TOUCHED
from spotpatch_agent.demo.script import EXPECTED_AFTER, demo_turns
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from spotpatch_agent.rpc.framing import encode_frame
from tests.conftest import git
from tests.support.annotations import demo_annotation
from tests.support.serve import (
    config_for,
    create_job,
    job_worktrees,
    run_to_review,
    start_engine,
    wait_model_turn,
    worktree_count,
)

#: Seconds within which a cancelled job ends and its model stream is closed. Broken, the job runs on in its
#: stalled model turn (the provider's 60 s idle timeout) and job/cancel answers after its own 5 s wait with the
#: job still running. Measured 0.04-0.07 s on a 2-core machine at a load average of 11 (tests/protocol_robustness/
#: test_cancellation.py); 3 s leaves room for a descheduled engine on a loaded CI.
CANCEL_WITHIN = 3.0


def snapshot_tree(root: Path) -> dict[str, bytes]:
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
             if p.is_file() and ".git" not in p.relative_to(root).parts}
    files["<index>"] = (root / ".git" / "index").read_bytes()
    files["<status>"] = git(root, "status", "--porcelain=v2").encode()
    return files


def test_demo_job_end_to_end_over_stdio(project: Path, canary: str) -> None:
    original = (project / TOUCHED).read_bytes()
    with ScriptedProviderServer(demo_turns()) as server:
        eng = start_engine(canary)
        try:
            init = eng.initialize(project, config_for(server))
            assert init["protocolVersion"] == "0.1" and init["capabilities"]["aiEnabled"] is True
            assert eng.call("health/get", {})["state"] == "clean"
            snap = eng.call("job/create", {"annotation": demo_annotation(), "modelProfileId": "m1",
                                           "applyMode": "review"})
            job_id = snap["jobId"]
            assert snap["status"] == "preparing"
            final = eng.wait_status(job_id, {"awaiting-review", "failed", "cancelled"}, timeout=60)
            assert final["status"] == "awaiting-review", eng.events(job_id)

            diff = eng.call("job/diff", {"jobId": job_id})
            assert diff["files"] == [{"path": TOUCHED, "added": 2, "removed": 2, "status": "modified"}]
            assert '-      <button className="btn btn-secondary" onClick={onSave}>Save</button>' in diff["diff"]
            assert '+      <button className="btn btn-primary" onClick={onSave}>Save</button>' in diff["diff"]
            assert "+      <span className=\"price\">${price.toFixed(2)}</span>" in diff["diff"]
            assert (project / TOUCHED).read_bytes() == original  # nothing reached the working tree yet

            applied = eng.call("job/apply", {"jobId": job_id})
            assert applied["status"] == "applied"
            assert (project / TOUCHED).read_text("utf-8") == EXPECTED_AFTER[TOUCHED]
            assert git(project, "diff", "--cached") == ""  # the index was never written

            reverted = eng.call("job/revert", {"jobId": job_id})
            assert reverted["status"] == "reverted"
            assert (project / TOUCHED).read_bytes() == original
            assert git(project, "status", "--porcelain") == ""

            events = eng.events(job_id)
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
            statuses = [e["status"] for e in events if e["kind"] == "status"]
            assert statuses == ["preparing", "running", "validating", "awaiting-review", "applying", "applied",
                                "reverting", "reverted"]
            tools = [(e["tool"], e["ok"]) for e in events if e["kind"] == "activity" and e["phase"] == "finished"]
            assert tools == [("read_file", True), ("search_text", True), ("replace_text", True),
                             ("replace_text", True), ("read_file", True)]
            assert worktree_count(project) == 1  # the job's worktree is gone

            # The provider saw every tool call answered under its original id, also the reused id.
            second = server.requests[1]["messages"]
            tool_ids = [m["tool_call_id"] for m in second if m["role"] == "tool"]
            assert tool_ids == ["call_read_1", "call_search_1"]
            assert server.headers[0]["authorization"] == f"Bearer {canary}"
            assert eng.close() == 0
        finally:
            eng.stop()
    # Invariant 3: the canary key reaches no frame, event, error, log line or diff.
    assert canary not in eng.all_output()
    assert canary not in json.dumps(diff)
    assert str(project) not in eng.all_output(), "an absolute path leaked to stdout or stderr"
    assert eng.stdout_faults == []


def test_job_cancel_during_streaming_turn(project: Path, canary: str) -> None:
    with ScriptedProviderServer([{"stall": True}]) as server:
        eng = start_engine(canary)
        try:
            eng.initialize(project, config_for(server))
            job_id = create_job(eng)
            eng.wait_status(job_id, {"running"})
            wait_model_turn(server)
            [job_dir] = job_worktrees(project)
            assert job_dir.is_dir()
            started = time.monotonic()
            rid = eng.start_request("job/cancel", {"jobId": job_id})
            reply = eng.response(rid, timeout=5)
            assert time.monotonic() - started < CANCEL_WITHIN
            assert reply["result"]["status"] == "cancelled"
            assert server.wait_for_disconnect(CANCEL_WITHIN), "the HTTP stream was not closed"
            eng.barrier()  # a second reply would have been written before this sentinel's
            assert len(eng.responses_to(rid)) == 1
            assert worktree_count(project) == 1
            assert not job_dir.exists(), "the job's worktree directory was left behind"
            assert eng.close() == 0
        finally:
            eng.stop()
    assert canary not in eng.all_output()


def test_cancel_request_for_job_create_cancels_the_streaming_job(project: Path, canary: str) -> None:
    with ScriptedProviderServer([{"stall": True}]) as server:
        eng = start_engine(canary)
        try:
            eng.initialize(project, config_for(server))
            rid = eng.start_request("job/create", {"annotation": demo_annotation(), "modelProfileId": "m1"})
            job_id = eng.response(rid)["result"]["jobId"]
            eng.wait_status(job_id, {"running"})
            wait_model_turn(server)
            started = time.monotonic()
            eng.notify("$/cancelRequest", {"id": rid})
            eng.wait_status(job_id, {"cancelled"}, timeout=CANCEL_WITHIN)
            assert time.monotonic() - started < CANCEL_WITHIN
            eng.barrier()  # the cancel was handled before this sentinel was read: no second reply by then
            assert len(eng.responses_to(rid)) == 1  # exactly one reply, the original one
            assert worktree_count(project) == 1
        finally:
            eng.stop()


def test_cancel_request_for_in_flight_request_gets_32800(project: Path, canary: str) -> None:
    """A ``$/cancelRequest`` for a request the engine has read but not answered ends it with -32800, its only
    reply, and its work is not done. The request is a ``job/cancel`` of a running job; its cancel travels in
    the same write, so the engine decodes it before the request's task can start (the reader decodes a whole
    read before the loop runs the task it started: rpc/server.py). That makes -32800 the one correct outcome:
    a ``cancelled`` result would mean the cancel was lost and the request ran."""
    with ScriptedProviderServer([{"stall": True}]) as server:
        eng = start_engine(canary)
        try:
            eng.initialize(project, config_for(server))
            job_id = create_job(eng)
            eng.wait_status(job_id, {"running"})
            wait_model_turn(server)
            rid = "cancel-in-flight"
            cancel_job = {"jsonrpc": "2.0", "id": rid, "method": "job/cancel", "params": {"jobId": job_id}}
            eng.send_raw(encode_frame(cancel_job)
                         + encode_frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": rid}}))
            reply = eng.response(rid, timeout=5)
            assert "result" not in reply, f"the cancelled job/cancel ran anyway: {reply}"
            assert reply["error"]["code"] == -32800, reply
            # Sentinel: job/get is answered after the engine handled both frames. The job/cancel never ran, so
            # the job still runs on its open model stream, and the cancelled request has no second reply.
            assert eng.call("job/get", {"jobId": job_id})["status"] == "running"
            assert not server.disconnected.is_set(), "the job's model stream was closed: the job was cancelled"
            assert len(eng.responses_to(rid)) == 1
            assert eng.call("job/cancel", {"jobId": job_id})["status"] == "cancelled"  # a request not cancelled runs
            assert len(eng.responses_to(rid)) == 1
        finally:
            eng.stop()


def test_apply_refuses_when_user_edited_touched_file(project: Path, canary: str) -> None:
    with ScriptedProviderServer(demo_turns()) as server:
        eng = start_engine(canary)
        try:
            job_id = run_to_review(eng, project, server)
            path = project / TOUCHED
            path.write_text(path.read_text("utf-8").replace("<h2>", "<h2 data-user-edit>"), "utf-8")
            git(project, "add", TOUCHED)  # a staged user edit: the index must survive too
            before = snapshot_tree(project)
            reply = eng.request("job/apply", {"jobId": job_id})
            assert reply["error"]["code"] == -32000 and reply["error"]["data"]["code"] == "APPLY_CONFLICT"
            assert TOUCHED in reply["error"]["message"]
            assert snapshot_tree(project) == before
            assert eng.call("job/get", {"jobId": job_id})["status"] == "awaiting-review"
        finally:
            eng.stop()


def test_revert_refuses_when_user_edited_after_apply(project: Path, canary: str) -> None:
    with ScriptedProviderServer(demo_turns()) as server:
        eng = start_engine(canary)
        try:
            job_id = run_to_review(eng, project, server)
            assert eng.call("job/apply", {"jobId": job_id})["status"] == "applied"
            path = project / TOUCHED
            path.write_bytes(path.read_bytes() + b"// user edit after apply\n")
            before = snapshot_tree(project)
            reply = eng.request("job/revert", {"jobId": job_id})
            assert reply["error"]["data"]["code"] == "REVERT_CONFLICT"
            assert snapshot_tree(project) == before
            assert eng.call("job/get", {"jobId": job_id})["status"] == "applied"
        finally:
            eng.stop()


def test_first_turn_without_tool_call_fails_with_no_changes(project: Path, canary: str) -> None:
    with ScriptedProviderServer([{"text": "Sure! Change the class to btn-primary.", "finishReason": "stop"}]) as server:
        eng = start_engine(canary)
        try:
            eng.initialize(project, config_for(server))
            job_id = create_job(eng)
            final = eng.wait_status(job_id, {"awaiting-review", "failed"})
            assert final["status"] == "failed"
            snap = eng.call("job/get", {"jobId": job_id})
            assert snap["error"]["code"] == "MODEL_TOOL_CALL_UNSUPPORTED"
            assert eng.call("job/diff", {"jobId": job_id})["diff"] == ""
            assert git(project, "status", "--porcelain") == "" and worktree_count(project) == 1
        finally:
            eng.stop()


def test_dirty_tree_requires_consent(project: Path, canary: str) -> None:
    (project / "notes.txt").write_text("local\n")
    with ScriptedProviderServer(demo_turns()) as server:
        eng = start_engine(canary)
        try:
            eng.initialize(project, config_for(server))
            assert eng.call("health/get", {})["state"] == "consent-required"
            reply = eng.request("job/create", {"annotation": demo_annotation(), "modelProfileId": "m1"})
            assert reply["error"]["data"]["code"] == "CONSENT_REQUIRED"
            assert not server.requests
        finally:
            eng.stop()


def test_eof_with_running_job_removes_worktree(project: Path, canary: str) -> None:
    with ScriptedProviderServer([{"stall": True}]) as server:
        eng = start_engine(canary)
        eng.initialize(project, config_for(server))
        job_id = create_job(eng)
        eng.wait_status(job_id, {"running"})
        [job_dir] = job_worktrees(project)
        assert eng.proc.stdin is not None
        eng.proc.stdin.close()
        eng.proc.wait(5)
        assert worktree_count(project) == 1 and not job_dir.exists()
        assert subprocess.run(["git", "worktree", "list"], cwd=project, capture_output=True).returncode == 0


def test_canary_key_echoed_by_provider_errors_never_leaks(project: Path, canary: str) -> None:
    def echo(_body: dict) -> dict:
        return {"status": 401, "body": {"error": {"message": f"Incorrect API key provided: {canary}. Bearer {canary}"}}}

    def echo_500(_body: dict) -> dict:
        return {"status": 200, "raw": [f'data: {{"error": {{"message": "upstream said {canary}"}}}}\n\n']}

    with ScriptedProviderServer([echo, echo_500]) as server:
        eng = start_engine(canary)
        try:
            eng.initialize(project, config_for(server))
            for expected in ("PROVIDER_AUTH", "PROVIDER_PROTOCOL"):
                job_id = create_job(eng)
                eng.wait_status(job_id, {"failed"})
                snap = eng.call("job/get", {"jobId": job_id})
                assert snap["error"]["code"] == expected
            eng.close()
        finally:
            eng.stop()
    assert canary not in eng.all_output()
    assert canary[len("sk-canary-"):] not in eng.all_output()


def test_parent_death_cancels_job_and_exits(project: Path, canary: str) -> None:
    parent = subprocess.Popen(["sleep", "60"])
    with ScriptedProviderServer([{"stall": True}]) as server:
        eng = start_engine(canary)
        try:
            eng.call("initialize", {"protocolVersion": "0.1", "processId": parent.pid, "clientInfo": {"name": "t"},
                                    "projectRoot": str(project), "config": config_for(server)})
            job_id = create_job(eng)
            eng.wait_status(job_id, {"running"})
            wait_model_turn(server)  # the stalled stream is open: its closing is checked below
            parent.kill()
            parent.wait()
            started = time.monotonic()
            eng.proc.wait(5)
            assert time.monotonic() - started < 3
            assert worktree_count(project) == 1
            assert server.wait_for_disconnect(3.0), "the provider's stream was not closed when the engine exited"
        finally:
            eng.stop()
            parent.kill()


def test_two_concurrent_job_creates_one_conflicts(project: Path, canary: str) -> None:
    with ScriptedProviderServer([{"stall": True}, {"stall": True}]) as server:
        eng = start_engine(canary)
        try:
            eng.initialize(project, config_for(server))
            params = {"annotation": demo_annotation(), "modelProfileId": "m1"}
            first, second = eng.start_request("job/create", params), eng.start_request("job/create", params)
            replies = [eng.response(first), eng.response(second)]
            ok = [r for r in replies if "result" in r]
            refused = [r for r in replies if "error" in r]
            assert len(ok) == 1 and len(refused) == 1
            assert refused[0]["error"]["data"]["code"] == "JOB_CONFLICT"
            assert len(job_worktrees(project)) <= 1
        finally:
            eng.stop()
        assert worktree_count(project) == 1


def test_second_engine_does_not_sweep_a_live_engines_worktree(project: Path, canary: str) -> None:
    with ScriptedProviderServer([{"stall": True}]) as server:
        first, second = start_engine(canary), start_engine(canary)
        try:
            first.initialize(project, config_for(server))
            job_id = first.call("job/create", {"annotation": demo_annotation(), "modelProfileId": "m1"})["jobId"]
            first.wait_status(job_id, {"running"})
            [job_dir] = job_worktrees(project)
            second.initialize(project, config_for(server))  # sweeps orphans at start-up
            assert job_dir.is_dir() and job_worktrees(project) == [job_dir]
        finally:
            second.stop()
            first.stop()
        assert worktree_count(project) == 1 and not job_dir.exists()


def test_restart_after_sigkill_sweeps_the_orphaned_worktree(project: Path, canary: str) -> None:
    with ScriptedProviderServer([{"stall": True}]) as server:
        eng = start_engine(canary)
        eng.initialize(project, config_for(server))
        job_id = create_job(eng)
        eng.wait_status(job_id, {"running"})
        [job_dir] = job_worktrees(project)
        eng.kill()  # SIGKILL: no cleanup ran
        assert job_dir.is_dir()
        again = start_engine(canary)
        try:
            again.initialize(project, config_for(server))
            assert worktree_count(project) == 1 and not job_dir.exists()
            assert git(project, "status", "--porcelain") == ""
        finally:
            again.stop()


def test_late_cancel_of_a_reused_request_id_does_not_cancel_the_job(project: Path, canary: str) -> None:
    """A late ``$/cancelRequest`` names the latest request with its id (here ``health/get``, answered), not
    the ``job/create`` that used the id before: the job runs on to review. The job's first model turn is held
    open until the cancel was handled (a sentinel request answered after it), so the job is running when the
    cancel arrives and, unless it was cancelled, ends in review."""
    release = threading.Event()
    turns = demo_turns()

    def first_turn_when_released(_body: dict) -> dict:
        if not release.wait(30):
            return {"status": 500, "body": {"error": {"message": "the test never released the turn"}}}
        return turns[0]

    with ScriptedProviderServer([first_turn_when_released, *turns[1:]]) as server:
        eng = start_engine(canary)
        try:
            eng.initialize(project, config_for(server))
            eng.send({"jsonrpc": "2.0", "id": "req-1", "method": "job/create",
                      "params": {"annotation": demo_annotation(), "modelProfileId": "m1"}})
            job_id = eng.response("req-1")["result"]["jobId"]
            wait_model_turn(server)  # the job is running, held in its first model request
            eng.send({"jsonrpc": "2.0", "id": "req-1", "method": "health/get", "params": {}})
            eng.wait_for(lambda m: m.get("id") == "req-1" and "result" in m and "state" in m["result"])
            eng.notify("$/cancelRequest", {"id": "req-1"})
            # Sentinel: the cancel was handled (and a job cancel it started called) before this is answered.
            assert eng.call("job/get", {"jobId": job_id})["status"] == "running"
            release.set()
            final = eng.wait_status(job_id, {"awaiting-review", "failed", "cancelled"}, timeout=60)
            assert final["status"] == "awaiting-review", final
        finally:
            release.set()
            eng.stop()


def test_two_engines_on_one_project_run_one_write_job(project: Path, canary: str) -> None:
    with ScriptedProviderServer([{"stall": True}, {"stall": True}]) as server:
        first, second = start_engine(canary), start_engine(canary)
        try:
            first.initialize(project, config_for(server))
            second.initialize(project, config_for(server))
            job_id = first.call("job/create", {"annotation": demo_annotation(), "modelProfileId": "m1"})["jobId"]
            first.wait_status(job_id, {"running"})
            reply = second.request("job/create", {"annotation": demo_annotation(), "modelProfileId": "m1"})
            assert reply["error"]["data"]["code"] == "JOB_CONFLICT"
            first.call("job/cancel", {"jobId": job_id})
            again = second.call("job/create", {"annotation": demo_annotation(), "modelProfileId": "m1"})
            assert again["status"] == "preparing"  # the lock is free once the first job stopped
        finally:
            second.stop()
            first.stop()

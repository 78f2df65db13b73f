"""``job/suggest`` over a real ``serve`` subprocess (issue 19 acceptance 3): the demo app's source holds the
canary key and the model's answer echoes the key and the project's absolute path; nothing of either
reaches the request sent to the model, the result, any event, stdout or stderr. The lane off is refused
with INVALID_REQUEST over the wire, and the project's files are unchanged."""

from __future__ import annotations

from pathlib import Path

from spotpatch_agent.demo.runner import TOUCHED
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.conftest import git
from tests.support.annotations import demo_annotation
from tests.support.serve import config_for, start_engine


def test_job_suggest_over_stdio_leaks_no_key_or_path(project: Path, canary: str) -> None:
    card = project / TOUCHED
    lines = card.read_text().split("\n")
    lines.insert(12, f'      {{/* token: "{canary}" */}}')  # a key pasted into the source, inside the excerpt
    card.write_text("\n".join(lines))
    git(project, "commit", "-qam", "a key in the source")
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file() and ".git" not in p.parts}
    echo = (f"### Target 1\nWhere: {TOUCHED}:12\nChange: the key {canary} sits at {project}/{TOUCHED}; "
            "use btn-primary.\n")
    turns = [{"text": "Plain text, no call.", "finishReason": "stop"}, {"text": echo, "finishReason": "stop"}]
    with ScriptedProviderServer(turns) as server:
        eng = start_engine(canary)
        try:
            init = eng.initialize(project, {**config_for(server), "suggestions": {"enabled": True}})
            assert init["capabilities"]["suggestions"] is True
            assert eng.call("session/get", {})["suggestions"] is True
            job_id = eng.call("job/create", {"annotation": demo_annotation(), "modelProfileId": "m1"})["jobId"]
            failed = eng.wait_status(job_id, {"failed"}, timeout=60)
            assert eng.call("job/get", {"jobId": job_id})["error"]["code"] == "MODEL_TOOL_CALL_UNSUPPORTED", failed
            result = eng.call("job/suggest", {"jobId": job_id}, timeout=60)
            assert result["kind"] == "suggestion" and result["outcome"] == "complete"
            assert "[REDACTED]" in result["text"] and result["verified"] == 1
            sent = str(server.requests[1])
            assert canary not in sent and "[REDACTED]" in sent  # the excerpt went out redacted
            eng.close()
        finally:
            eng.stop()
        output = eng.all_output()
    assert canary not in output and str(project) not in output and str(project.resolve()) not in output
    after = {p: p.read_bytes() for p in project.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert after == before


def test_job_suggest_with_the_lane_off_is_refused_over_stdio(project: Path, canary: str) -> None:
    with ScriptedProviderServer([{"text": "Plain text.", "finishReason": "stop"}]) as server:
        eng = start_engine(canary)
        try:
            init = eng.initialize(project, config_for(server))
            assert init["capabilities"]["suggestions"] is False
            job_id = eng.call("job/create", {"annotation": demo_annotation(), "modelProfileId": "m1"})["jobId"]
            eng.wait_status(job_id, {"failed"}, timeout=60)
            reply = eng.request("job/suggest", {"jobId": job_id})
            assert reply["error"]["code"] == -32000 and reply["error"]["data"]["code"] == "INVALID_REQUEST"
            assert "suggestions.enabled" in reply["error"]["data"]["message"]
            assert eng.request("job/suggest", {"jobId": job_id, "extra": 1})["error"]["code"] == -32602
            eng.close()
        finally:
            eng.stop()
    assert len(server.requests) == 1

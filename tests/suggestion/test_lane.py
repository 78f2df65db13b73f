"""The read-only suggestion lane (issue 19, docs/design.md §14) through the real engine service, the real
Chat adapter and a local scripted server: a text-only suggestion with verified citations and a diff that
applies to the excerpts, a citation outside the excerpts flagged, the output breaker on a runaway answer,
the timeout on a stalled stream, the switch off and an ineligible job refused. Around every suggestion the
user's tree (``.git`` included) and every git worktree are byte-identical, and no result or event holds the
canary key or an absolute path."""

from __future__ import annotations

import json

import pytest

from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.models import JobIdParams, ProviderProbeParams
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.suggestion._support import (
    APP_LINES,
    DIFF,
    GOOD,
    PROSE,
    Session,
    canary,
    config,
    repo,
    request_text,
    suggest_after_failure,
    tree_picture,
)

pytestmark = pytest.mark.anyio


async def test_a_text_only_answer_is_a_labelled_suggestion_with_verified_citations(tmp_path, monkeypatch):
    result, session, _ = await suggest_after_failure(tmp_path, monkeypatch, GOOD)
    wire = result.dump()
    assert wire["kind"] == "suggestion" and result.outcome == "complete" and result.breaker == "none"
    assert "changed nothing" in result.label
    assert (result.provider, result.model) == ("Local P", "scripted-model")
    assert [(e.path, e.start_line, e.end_line) for e in result.excerpts] == [("src/App.tsx", 6, 20)]
    assert "sha256" not in json.dumps(wire)  # paths and ranges only on the wire
    assert [(c.ref, c.verified) for c in result.citations] == [("src/App.tsx:12", True), ("src/App.tsx:11-13", True)]
    assert (result.verified, result.unverified) == (2, 0)
    assert result.diff is not None and result.diff.applies and result.diff.summary == "applies cleanly to the excerpts"
    assert result.diff.files == ["src/App.tsx"]
    # One request, without tools, holding the excerpt and never the whole file or an ignored file.
    assert len(session.server.requests) == 2  # the job's one turn and the suggestion's one request
    request = session.server.requests[1]
    assert "tools" not in request and "tool_choice" not in request
    sent = request_text(request)
    assert APP_LINES[11].replace('"', '\\"') in sent and "whole-file-marker" not in sent
    assert "do-not-read" not in sent
    assert '\\"Make the button say Start\\"' in sent  # the request goes in quoted, as data


async def test_a_citation_outside_the_excerpts_is_flagged_unverified(tmp_path, monkeypatch):
    answer = {"text": ("### Target 1\nWhere: src/App.tsx:12, and src/App.tsx:29 and src/other.ts:1\n"
                       "Change: use Start.\n\n" + DIFF.replace("@@ -11,3 +11,3 @@", "@@ -27,3 +27,3 @@")),
              "finishReason": "stop"}
    result, _, _ = await suggest_after_failure(tmp_path, monkeypatch, answer)
    assert result.outcome == "complete"
    flagged = {c.ref: c.verified for c in result.citations}
    assert flagged == {"src/App.tsx:12": True, "src/App.tsx:29": False, "src/other.ts:1": False}
    assert (result.verified, result.unverified) == (1, 2)
    assert result.diff is not None and not result.diff.applies and result.diff.summary == "does not apply"
    assert "outside the excerpts" in (result.diff.reason or "")


async def test_a_runaway_answer_trips_the_output_breaker_with_a_labelled_partial(tmp_path, monkeypatch):
    result, session, _ = await suggest_after_failure(
        tmp_path, monkeypatch, {"textForever": "See src/App.tsx:12 and keep talking. "},
        suggestions={"enabled": True, "maxOutputBytes": 2048})
    assert result.outcome == "partial" and result.breaker == "output-bytes" and result.error is None
    assert "output breaker at 2048 bytes" in result.message and "changed nothing" in result.label
    assert 0 < result.output_bytes <= 2048 and len(result.text.encode()) <= 2048
    assert result.text.startswith("See src/App.tsx:12") and result.verified >= 1
    assert session.server.disconnected.is_set()  # the stream was closed, not read to its end
    assert len(session.server.requests) == 2


async def test_a_stalled_stream_trips_the_timeout(tmp_path, monkeypatch):
    result, session, _ = await suggest_after_failure(tmp_path, monkeypatch, {"stall": True},
                                                     suggestions={"enabled": True, "timeoutSec": 1})
    assert result.outcome == "failed" and result.breaker == "timeout" and result.text == ""
    assert result.error is not None and result.error.code == "LIMIT_EXCEEDED"
    assert "did not answer within 1 s" in result.error.message
    assert 1000 <= result.duration_ms < 10_000
    assert session.server.disconnected.wait(5)  # the engine hung up on the silent stream


async def test_a_stream_that_stalls_after_some_text_is_a_partial_at_the_timeout(tmp_path, monkeypatch):
    answer = {"text": "### Target 1\nWhere: src/App.tsx:12\n", "stallAfterText": True}
    result, _, _ = await suggest_after_failure(tmp_path, monkeypatch, answer,
                                               suggestions={"enabled": True, "timeoutSec": 1})
    assert result.outcome == "partial" and result.breaker == "timeout" and result.error is None
    assert result.text == answer["text"] and "timeout breaker after 1 s" in result.message
    assert (result.verified, result.unverified) == (1, 0)


async def test_a_provider_failure_is_an_explicit_failed_result(tmp_path, monkeypatch):
    result, _, _ = await suggest_after_failure(tmp_path, monkeypatch, {"status": 401, "body": {"error": "no"}})
    assert result.outcome == "failed" and result.breaker == "none"
    assert result.error is not None and result.error.code == "PROVIDER_AUTH"
    assert "changed nothing" in result.label


async def test_the_lane_off_refuses_the_method_and_asks_nothing(tmp_path, monkeypatch):
    root = repo(tmp_path)
    canary(monkeypatch)
    with ScriptedProviderServer([PROSE, {"text": "never asked"}]) as server:
        service = EngineService(send_event=lambda e: None)
        async with service.running():
            await service.configure(root, config(server, suggestions={}))  # the default: off
            session = (await service.session_get()).dump()
            assert session["suggestions"] is False
            snap = await Session(service, server, root, "").failed_job()
            before = tree_picture(root)
            with pytest.raises(SpotPatchError) as refused:
                await service.job_suggest(JobIdParams(job_id=snap.job_id))
            assert tree_picture(root) == before
    assert refused.value.code == "INVALID_REQUEST"
    assert "suggestion lane is off" in refused.value.message and "suggestions.enabled" in refused.value.message
    assert len(server.requests) == 1  # only the job's turn


async def test_a_job_that_did_not_fail_by_the_capability_is_refused(tmp_path, monkeypatch):
    root = repo(tmp_path)
    canary(monkeypatch)
    with ScriptedProviderServer([{"status": 400, "body": {"error": {"message": "bad"}}}]) as server:
        service = EngineService(send_event=lambda e: None)
        async with service.running():
            await service.configure(root, config(server))
            assert (await service.session_get()).suggestions is True
            snap = await Session(service, server, root, "").failed_job()
            assert snap.error is not None and snap.error.code != "MODEL_TOOL_CALL_UNSUPPORTED"
            with pytest.raises(SpotPatchError) as refused:
                await service.job_suggest(JobIdParams(job_id=snap.job_id))
            with pytest.raises(SpotPatchError) as unknown:
                await service.job_suggest(JobIdParams(job_id="job_nope"))
    assert refused.value.code == "INVALID_STATE" and "cannot call tools" in refused.value.message
    assert unknown.value.code == "JOB_NOT_FOUND"
    assert len(server.requests) == 1


async def test_a_failed_probe_makes_a_job_that_failed_otherwise_eligible(tmp_path, monkeypatch):
    root = repo(tmp_path)
    key = canary(monkeypatch)
    turns = [PROSE, {"status": 400, "body": {"error": {"message": "bad"}}}, GOOD]  # probe, job, suggestion
    with ScriptedProviderServer(turns) as server:
        session = Session(EngineService(send_event=lambda e: session.events.append(e)), server, root, key)
        async with session.service.running():
            await session.service.configure(root, config(server))
            probe = await session.service.provider_probe(ProviderProbeParams(model_profile_id="m"))
            assert not probe.ok and probe.error is not None and probe.error.code == "MODEL_TOOL_CALL_UNSUPPORTED"
            snap = await session.failed_job()
            assert snap.error is not None and snap.error.code == "PROVIDER_PROTOCOL"
            before = tree_picture(root)
            result = await session.service.job_suggest(JobIdParams(job_id=snap.job_id))
            assert tree_picture(root) == before
    assert result.outcome == "complete" and result.verified == 2 and session.leaks(result.dump()) == []


async def test_the_audit_ledger_records_the_run(tmp_path, monkeypatch):
    root = repo(tmp_path)
    key = canary(monkeypatch)
    with ScriptedProviderServer([PROSE, GOOD]) as server:
        session = Session(EngineService(send_event=lambda e: session.events.append(e)), server, root, key)
        async with session.service.running():
            await session.service.configure(root, config(server))
            snap = await session.failed_job()
            ids = JobIdParams(job_id=snap.job_id)
            before = (await session.service.job_audit(ids)).dump()
            await session.service.job_suggest(ids)
            after = (await session.service.job_audit(ids)).dump()
    assert [r["type"] for r in before["records"]][-1] == "job_end"
    assert before["records"] == after["records"][:-1]  # appended after job_end, nothing before it changed
    entry = after["records"][-1]
    assert entry["type"] == "suggestion" and entry["breaker"] == "none" and entry["outcome"] == "complete"
    assert (entry["verified"], entry["unverified"]) == (2, 0)
    [excerpt] = entry["excerpts"]
    assert (excerpt["path"], excerpt["startLine"], excerpt["endLine"]) == ("src/App.tsx", 6, 20)
    assert len(excerpt["sha256"]) == 64
    assert session.leaks(after) == []


async def test_a_failing_ledger_never_costs_the_draft(tmp_path, monkeypatch):
    from spotpatch_agent.audit.ledger import JobLedger

    def broken(self, **fields):
        raise OSError("disk on fire")

    monkeypatch.setattr(JobLedger, "record_suggestion", broken)
    result, _, _ = await suggest_after_failure(tmp_path, monkeypatch, GOOD)
    assert result.outcome == "complete" and result.verified == 2

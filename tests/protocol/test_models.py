"""The ``job/event`` union and the per-method model names (docs/design.md §3)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from spotpatch_agent.protocol import models
from spotpatch_agent.protocol.models import (
    ActivityEvent,
    CheckEvent,
    ErrorInfo,
    FileStat,
    JobEvent,
    JobEventsResult,
    StatusEvent,
)

HEAD = {"job_id": "job_1", "seq": 3, "at": "2026-11-30T10:21:23.934Z"}


def test_job_event_builds_the_kind_model_and_dumps_the_wire_shape() -> None:
    event = JobEvent(**HEAD, kind="activity", phase="finished", tool="read_file", tool_call_id="c1", turn=1,
                     path=None, ok=False, duration_ms=0, error_code="TOOL_PATH_DENIED", retryable=True)
    assert isinstance(event, ActivityEvent)
    assert event.dump() == {"jobId": "job_1", "seq": 3, "at": "2026-11-30T10:21:23.934Z", "kind": "activity",
                            "phase": "finished", "tool": "read_file", "toolCallId": "c1", "turn": 1, "ok": False,
                            "durationMs": 0, "errorCode": "TOOL_PATH_DENIED", "retryable": True}
    status = JobEvent(**HEAD, kind="status", status="failed", message=None)
    assert isinstance(status, StatusEvent) and status.dump()["status"] == "failed" and "message" not in status.dump()
    diff = JobEvent(**HEAD, kind="diff", files=[FileStat(path="a.ts", added=1, removed=0, status="modified")])
    assert diff.dump()["files"] == [{"path": "a.ts", "added": 1, "removed": 0, "status": "modified"}]
    error = JobEvent(**HEAD, kind="error", error=ErrorInfo(code="LIMIT_EXCEEDED", message="m", retryable=False))
    assert error.dump()["error"] == {"code": "LIMIT_EXCEEDED", "message": "m", "retryable": False}
    check = JobEvent(**HEAD, kind="check", check_id="tsc", name="TypeScript", status="passed", ok=True, duration_ms=5)
    assert isinstance(check, CheckEvent)


@pytest.mark.parametrize("fields", [
    {"kind": "progress"},                                              # unknown kind
    {"kind": "status", "status": "running", "tool": "read_file"},      # a field of another kind
    {"kind": "status", "status": "passed"},                            # a check status on a job status event
    {"kind": "activity", "phase": "started", "tool": "t", "tool_call_id": "c", "turn": 1, "error_code": "NOPE"},
    {"kind": "message"},                                               # missing text
    {"kind": "error", "error": {"code": "NOT_A_CODE", "message": "m", "retryable": False}},
])
def test_job_event_rejects_what_the_contract_does_not_allow(fields: dict) -> None:
    with pytest.raises(ValidationError):
        JobEvent(**HEAD, **fields)


def test_events_result_round_trips_the_stored_event_dicts() -> None:
    stored = [JobEvent(**HEAD, kind="message", text="hi", turn=1).dump(),
              JobEvent(**{**HEAD, "seq": 4}, kind="status", status="validating").dump()]
    result = JobEventsResult(job_id="job_1", events=stored, last_seq=4)
    assert result.dump() == {"jobId": "job_1", "events": stored, "lastSeq": 4}


def test_every_method_has_a_params_and_result_name() -> None:
    """Thin aliases give each method its *Params / *Result name; shared shapes stay one class."""
    assert models.JobGetParams is models.JobIdParams and models.JobApplyResult is models.JobSnapshot
    assert models.HealthGetResult is models.RepoHealth and models.JobDiffResult is models.DiffResult
    assert models.ProviderProbeResult is models.ProbeResult and models.ShutdownParams is models.EmptyParams
    for name in ("Initialize", "Initialized", "Shutdown", "HealthGet", "PromptRender", "ProviderList", "ProviderProbe",
                 "JobCreate", "JobGet", "JobList", "JobEvents", "JobDiff", "JobAudit", "JobCancel", "JobApply",
                 "JobRevert", "JobClose", "CancelRequest", "LogTrace"):
        assert hasattr(models, f"{name}Params"), name
    for name in ("Initialize", "HealthGet", "PromptRender", "ProviderList", "ProviderProbe", "JobCreate", "JobGet",
                 "JobList", "JobEvents", "JobDiff", "JobAudit", "JobCancel", "JobApply", "JobRevert", "JobClose"):
        assert hasattr(models, f"{name}Result"), name
    assert hasattr(models, "JobEventNotification")

"""The methods added by the wire-contract issue, over a real ``serve`` subprocess: job/list, job/events,
job/audit, provider/list, provider/probe (docs/design.md §3); session/get (the overlay's view, issue 13)."""

from __future__ import annotations

import json
from pathlib import Path

from spotpatch_agent.demo.script import demo_turns
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.engine_client import EngineProcess
from tests.support.annotations import demo_annotation
from tests.support.serve import PROBE_TURNS, config_for, start_engine


def test_job_list_events_and_audit(project: Path, canary: str) -> None:
    with ScriptedProviderServer(demo_turns()) as server:
        eng = start_engine(canary)
        try:
            eng.initialize(project, config_for(server))
            assert eng.call("job/list", {}) == {"jobs": []}
            job_id = eng.call("job/create", {"annotation": demo_annotation(), "modelProfileId": "m1"})["jobId"]
            eng.wait_status(job_id, {"awaiting-review"}, timeout=60)
            listed = eng.call("job/list", {})["jobs"]
            assert [j["jobId"] for j in listed] == [job_id] and listed[0]["status"] == "awaiting-review"
            pushed = eng.events(job_id)
            replay = eng.call("job/events", {"jobId": job_id, "afterSeq": 0})
            assert replay["events"] == pushed and replay["lastSeq"] == len(pushed)
            tail = eng.call("job/events", {"jobId": job_id, "afterSeq": 5})["events"]
            assert [e["seq"] for e in tail] == list(range(6, len(pushed) + 1))
            assert eng.call("job/events", {"jobId": job_id, "afterSeq": 10_000})["events"] == []
            audit = eng.call("job/audit", {"jobId": job_id})
            # The audit ledger (issue 18): one tool_call record per finished activity, the summary derived.
            finished = [e for e in pushed if e["kind"] == "activity" and e["phase"] == "finished"]
            calls = [r for r in audit["records"] if r["type"] == "tool_call"]
            assert audit["jobId"] == job_id and len(calls) == len(finished) == 5
            assert [r["type"] for r in audit["records"]][::len(audit["records"]) - 1] == ["job_start", "job_end"]
            assert audit["summary"]["outcome"] == "awaiting-review"
            assert sum(audit["summary"]["toolCounts"].values()) == 5
            bad = eng.request("job/events", {"jobId": job_id, "afterSeq": -1})
            assert bad["error"]["code"] == -32602
            assert eng.request("job/audit", {"jobId": "job_nope"})["error"]["data"]["code"] == "JOB_NOT_FOUND"
        finally:
            eng.stop()


def test_provider_list_shows_ids_and_names_only(project: Path, canary: str) -> None:
    with ScriptedProviderServer([]) as server:
        eng = start_engine(canary)
        try:
            cfg = config_for(server)
            cfg["providers"][0]["headers"] = {"X-Relay-Token": "relay-token-secret"}
            eng.initialize(project, cfg)
            result = eng.call("provider/list", {})
            assert result == {"providers": [{
                "id": "scripted", "displayName": "Scripted", "api": "chat", "available": True,
                "models": [{"id": "m1", "displayName": "Scripted model"}]}]}
            text = json.dumps(result)
            assert server.base_url not in text and "127.0.0.1" not in text
            assert "KEY" not in text and "relay-token" not in text
        finally:
            eng.stop()


def test_provider_probe_round_trip_is_cached(project: Path, canary: str) -> None:
    with ScriptedProviderServer(PROBE_TURNS) as server:
        eng = start_engine(canary)
        try:
            eng.initialize(project, config_for(server))
            first = eng.call("provider/probe", {"modelProfileId": "m1"})
            assert first["ok"] is True and first["toolCalling"] is True and first["cached"] is False
            assert server.requests[0]["tool_choice"] == "required"
            assert [m["role"] for m in server.requests[1]["messages"]][-1] == "tool"
            second = eng.call("provider/probe", {"modelProfileId": "m1"})
            assert second["cached"] is True and len(server.requests) == 2
        finally:
            eng.stop()


def test_provider_probe_reports_no_tool_calling_and_errors(project: Path, canary: str) -> None:
    turns = [{"text": "I can't call tools.", "finishReason": "stop"},
             {"status": 401, "body": {"error": {"message": "bad key"}}}]
    with ScriptedProviderServer(turns) as server:
        eng = start_engine(canary)
        try:
            eng.initialize(project, config_for(server))
            no_tools = eng.call("provider/probe", {"modelProfileId": "m1"})
            assert no_tools["ok"] is False and no_tools["toolCalling"] is False
            assert no_tools["error"]["code"] == "MODEL_TOOL_CALL_UNSUPPORTED"
            auth = eng.call("provider/probe", {"modelProfileId": "m1"})
            assert auth["ok"] is False and auth["error"]["code"] == "PROVIDER_AUTH"
            unknown = eng.request("provider/probe", {"modelProfileId": "nope"})
            assert unknown["error"]["data"]["code"] == "INVALID_REQUEST"
        finally:
            eng.stop()
        assert canary not in eng.all_output()


def test_provider_probe_without_key_is_ai_disabled(project: Path) -> None:
    with ScriptedProviderServer([]) as server:
        eng = start_engine("")
        try:
            eng.initialize(project, config_for(server))
            reply = eng.request("provider/probe", {"modelProfileId": "m1"})
            assert reply["error"]["data"]["code"] == "AI_DISABLED"
            assert eng.call("provider/list", {})["providers"][0]["available"] is False
        finally:
            eng.stop()


def test_session_get_reports_ai_modes_limits_and_recovered(project: Path, canary: str) -> None:
    with ScriptedProviderServer([]) as server:
        eng = start_engine(canary)
        try:
            assert eng.request("session/get", {})["error"]["code"] == -32002  # before initialize, like the rest
            cfg = config_for(server)
            cfg["limits"] = {"maxTargets": 3, "maxInstructionChars": 500}
            cfg["modes"] = {"trustedAuto": True}
            init = eng.initialize(project, cfg)
            session = eng.call("session/get", {})
            agents = session.pop("agents")  # the agent channel (docs/mcp.md): starting or listening by now
            assert agents["clients"] == [] and (agents["available"] or agents["reason"] == "the agent channel is "
                                                                                          "starting")
            assert session == {"aiEnabled": True, "applyModes": ["review", "trusted-auto"],
                               "limits": {"maxTargets": 3, "maxInstructionChars": 500}, "recovered": [],
                               "suggestions": False}
            assert session["applyModes"] == init["capabilities"]["applyModes"]
            again = eng.call("session/get")  # params may be omitted
            again.pop("agents")
            assert again == session
            assert eng.request("session/get", {"x": 1})["error"]["code"] == -32602
            text = json.dumps(session)
            assert server.base_url not in text and canary not in text and str(project) not in text
        finally:
            eng.stop()

        eng = EngineProcess(env={})  # no key: AI off, defaults
        try:
            eng.initialize(project, {"providers": config_for(server)["providers"]})
            off = eng.call("session/get", {})
            off.pop("agents")  # without a model an agent can still do jobs (docs/mcp.md)
            assert off == {"aiEnabled": False, "applyModes": ["review"],
                           "limits": {"maxTargets": 8, "maxInstructionChars": 2000},
                           "recovered": [], "suggestions": False}
        finally:
            eng.stop()

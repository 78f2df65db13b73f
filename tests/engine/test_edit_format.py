"""A job under ``editFormat: "anchors"`` end to end (issue 27 part 2; docs/design.md §6 "Edit formats"): the real
engine service, the real Chat adapter and a scripted local server whose model reads anchors, sends a stale one
(refused with the current anchors), then edits by anchors; the diff is exact and the ledger keeps line
numbers, never an anchor's hash."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest

from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.protocol.models import JobCreateParams, JobIdParams, TrustedConfig
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from spotpatch_agent.tools.anchors import anchor
from tests.conftest import make_repo

pytestmark = pytest.mark.anyio

KEY_ENV = "SPOTPATCH_EDIT_FORMAT_TEST_KEY"
APP = ("export function App({ price }: { price: number }) {\n"
       "  return (\n"
       "    <div>\n"
       "      <button className=\"btn\">Save</button>\n"
       "      <span>${price}</span>\n"
       "    </div>\n"
       "  );\n"
       "}\n")
ROWS = APP.split("\n")
TARGET = {"annotationId": "a1", "pageUrl": "/", "targets": [
    {"index": 1, "instruction": "Make the button primary and show the price with two decimals",
     "source": {"file": "src/App.tsx", "line": 4}, "element": {"tagName": "button", "text": "Save"}}]}
EXPECTED_DIFF_LINES = [
    '-      <button className="btn">Save</button>',
    "-      <span>${price}</span>",
    '+      <button className="btn btn-primary">Save</button>',
    "+      <span>${price.toFixed(2)}</span>",
]


def call(cid: str, name: str, args: Any) -> dict:
    return {"id": cid, "name": name, "arguments": args}


def at(number: int) -> str:
    return anchor(number, ROWS[number - 1])


async def run(root: Path, turns: list, monkeypatch: pytest.MonkeyPatch, edit_format: str | None):
    key = "sk-canary-" + secrets.token_hex(12)
    monkeypatch.setenv(KEY_ENV, key)
    model: dict[str, Any] = {"id": "m", "model": "scripted-model", "displayName": "M"}
    if edit_format is not None:
        model["editFormat"] = edit_format
    with ScriptedProviderServer(turns) as server:
        config = TrustedConfig.model_validate({"providers": [{
            "id": "p", "displayName": "P", "baseUrl": server.base_url, "apiKeyEnv": KEY_ENV, "models": [model]}]})
        service = EngineService(send_event=lambda _event: None)
        async with service.running():
            await service.configure(root, config)
            snap = await service.job_create(JobCreateParams.model_validate(
                {"annotation": TARGET, "modelProfileId": "m"}))
            await service.wait_job(snap.job_id)
            snap = await service.job_get(JobIdParams(job_id=snap.job_id))
            diff = await service.job_diff(JobIdParams(job_id=snap.job_id))
            audit = (await service.job_audit(JobIdParams(job_id=snap.job_id))).dump()
    return snap, diff, audit, server, key


def tool_output(server: ScriptedProviderServer, request_no: int, call_id: str) -> str:
    return next(m["content"] for m in server.requests[request_no]["messages"]
                if m["role"] == "tool" and m["tool_call_id"] == call_id)


async def test_a_scripted_model_edits_by_anchors_end_to_end(tmp_path: Path, monkeypatch) -> None:
    root = make_repo(tmp_path / "repo", {"src/App.tsx": APP})
    stale = anchor(4, '      <button className="btn btn-secondary">Save</button>')
    turns = [
        {"toolCalls": [call("r1", "read_file", {"path": "src/App.tsx", "startLine": None, "endLine": None})]},
        {"toolCalls": [call("e1", "edit_lines", {"path": "src/App.tsx", "startAnchor": stale, "endAnchor": at(5),
                                                 "newText": "x"})]},
        {"toolCalls": [call("e2", "edit_lines", {
            "path": "src/App.tsx", "startAnchor": at(4), "endAnchor": at(5),
            "newText": '      <button className="btn btn-primary">Save</button>\n'
                       "      <span>${price.toFixed(2)}</span>\n"})]},
        {"text": "Done.", "finishReason": "stop"},
    ]
    snap, diff, audit, server, key = await run(root, turns, monkeypatch, "anchors")
    assert snap.status == "awaiting-review", snap.error

    first = server.requests[0]
    offered = [t["function"]["name"] for t in first["tools"]]
    assert offered == ["list_files", "search_text", "read_file", "edit_lines", "apply_patch"]
    read_spec = next(t["function"] for t in first["tools"] if t["function"]["name"] == "read_file")
    assert "12#KT" in read_spec["description"]
    system = first["messages"][0]["content"]
    assert "edit_lines" in system and "replace_text" not in system

    assert f"    {at(4)}|       <button className=\"btn\">Save</button>" in tool_output(server, 1, "r1").split("\n")
    refused = tool_output(server, 2, "e1")
    assert refused.startswith("ERROR PATCH_REJECTED: startAnchor")
    assert f"is now {at(4)}" in refused and f"{at(5)}|       <span>${{price}}</span>" in refused
    assert tool_output(server, 3, "e2").startswith("Replaced lines 4-5 of src/App.tsx with 2 line(s)")

    hunk = diff.diff[diff.diff.index("@@"):]
    assert hunk == "".join(["@@ -1,8 +1,8 @@\n",
                            *(f" {row}\n" for row in ROWS[:3]), *(f"{line}\n" for line in EXPECTED_DIFF_LINES),
                            *(f" {row}\n" for row in ROWS[5:8])])
    assert diff.diff.startswith("diff --git a/src/App.tsx b/src/App.tsx\n")
    assert (root / "src/App.tsx").read_text() == APP  # only Apply writes the user's tree

    edits = [r for r in audit["records"] if r["type"] == "tool_call" and r["tool"] == "edit_lines"]
    assert [(r["ok"], r["path"], r["startLine"], r["endLine"]) for r in edits] == [
        (False, "src/App.tsx", 4, 5), (True, "src/App.tsx", 4, 5)]
    assert all("newTextSha256" in r and "startAnchor" not in r for r in edits)
    assert at(4).split("#")[1] not in str(edits)
    summary = audit["summary"]
    assert summary["toolCounts"] == {"read_file": 1, "edit_lines": 2}
    assert summary["targets"][0]["readBeforeFirstWrite"] is True
    assert key not in str(server.requests[1:]) and key not in str(audit)


def test_the_prompts_name_the_editing_tool_of_the_format() -> None:
    from spotpatch_agent.engine.prompt import SYSTEM_PROMPT, agent_task, system_prompt
    from spotpatch_agent.protocol.models import SpotAnnotation

    assert system_prompt("replace") == SYSTEM_PROMPT
    anchors = system_prompt("anchors")
    assert "edit_lines" in anchors and "replace_text" not in anchors and anchors != SYSTEM_PROMPT
    annotation = SpotAnnotation.model_validate(TARGET)
    fast = agent_task(annotation, max_turns=5, max_tool_calls=9, trusted_auto=True, edit_format="anchors")
    assert "one read_file of that file and one edit_lines." in fast and "replace_text" not in fast
    assert "one replace_text." in agent_task(annotation, max_turns=5, max_tool_calls=9, trusted_auto=True)


async def test_the_default_profile_keeps_replace_text_and_plain_line_numbers(tmp_path: Path, monkeypatch) -> None:
    root = make_repo(tmp_path / "repo", {"src/App.tsx": APP})
    turns = [
        {"toolCalls": [call("r1", "read_file", {"path": "src/App.tsx", "startLine": 4, "endLine": 4})]},
        {"text": "Nothing to do.", "finishReason": "stop"},
    ]
    snap, _diff, _audit, server, _key = await run(root, turns, monkeypatch, None)
    offered = [t["function"]["name"] for t in server.requests[0]["tools"]]
    assert offered == ["list_files", "search_text", "read_file", "replace_text", "apply_patch"]
    assert "replace_text" in server.requests[0]["messages"][0]["content"]
    assert '    4|       <button className="btn">Save</button>' in tool_output(server, 1, "r1")

"""A hostile model against the REAL loop (EngineService + ChatCompletionsAdapter + ScriptedProviderServer),
docs/design.md §5–§7, §16 invariants 1 and 3.

Over 200 generated malicious tool calls, spread over several jobs: traversal, absolute, symlinked, protected,
case-trick, unicode, NUL and percent-escaped paths; oversized inputs; duplicate ids; unknown tools; extra
fields; wrong types; invalid JSON; hostile check ids. Canary files live outside the project (reached through
tracked symlinks too) and in a protected ``.env``. Asserted: no canary value in any request the provider
received, in any event or in any job result; nothing outside the allowed set changed on disk (hashes of the
outside directory, the user's work tree and git refs/config before and after); and every job ended as the
rules say (read denials are retried and the job goes on; terminal write failures fail the job).
"""

from __future__ import annotations

import json
import re
import secrets
import sys
from pathlib import Path
from typing import Any

import pytest

from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.protocol.models import JobCreateParams, JobIdParams, TrustedConfig
from spotpatch_agent.provider.scripted import ScriptedProviderServer, sse
from tests.support.annotations import annotation, target
from tests.support.hostile_model import APP, World, hostile_paths

KEY_ENV = "SPOTPATCH_HOSTILE_TEST_KEY"
TARGET = annotation(target())
EDIT = {"path": "src/App.tsx", "oldText": ">Go<", "newText": ">Start<"}
LIMITS = {"maxToolCalls": 200, "maxTurns": 64}
CHECKS = [{"id": "ok", "name": "OK", "command": sys.executable, "args": ["-c", "print('fine')"]}]


def call(cid: str, name: str, args: Any) -> dict:
    return {"id": cid, "name": name, "arguments": args}


def read_args(path: Any) -> dict:
    return {"path": path, "startLine": None, "endLine": None}


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


class Run:
    def __init__(self) -> None:
        self.hostile = 0
        self.requests: list[Any] = []
        self.events: list[dict] = []
        self.results: list[Any] = []


async def run_job(world: World, turns: list, monkeypatch: pytest.MonkeyPatch, run: Run, hostile: int):
    monkeypatch.setenv(KEY_ENV, "sk-hostile-" + secrets.token_hex(8))
    events: list[dict] = []
    with ScriptedProviderServer(turns) as server:
        service = EngineService(send_event=events.append)
        async with service.running():
            await service.configure(world.root, TrustedConfig.model_validate({"providers": [{
                "id": "p", "displayName": "P", "baseUrl": server.base_url, "apiKeyEnv": KEY_ENV,
                "models": [{"id": "m", "model": "scripted-model", "displayName": "M"}]}],
                "checks": CHECKS, "limits": LIMITS}))
            create = JobCreateParams.model_validate({"annotation": TARGET, "modelProfileId": "m"})
            snap = await service.job_create(create)
            await service.wait_job(snap.job_id)
            snap = await service.job_get(JobIdParams(job_id=snap.job_id))
            diff = await service.job_diff(JobIdParams(job_id=snap.job_id))
    run.hostile += hostile
    run.requests.extend(server.requests)
    run.events.extend(events)
    run.results.append(snap.model_dump(mode="json"))
    run.results.append(diff.model_dump(mode="json"))
    return snap, diff, events, server


def finished(events: list[dict]) -> list[dict]:
    return [e for e in events if e["kind"] == "activity" and e["phase"] == "finished"]


@pytest.mark.anyio
async def test_a_hostile_model_reveals_nothing_and_changes_nothing_outside(world: World, monkeypatch) -> None:
    before = world.digest()
    run = Run()
    ok_read = read_args("src/util.ts")

    # --- job A: read denials are retried; hostile listings and searches reveal only allowed files.
    paths = hostile_paths(world)
    probes = [call(f"l{i}", "list_files", {"glob": g, "maxResults": 2000}) for i, g in enumerate(
        ["../**", "/etc/*", "**/.env*", ".git/**", "linkdir/**", "**/*", "**/*.key", "node_modules/**",
         "{..,/}/**", "**/../**"])]
    probes += [call(f"s{i}", "search_text", {"query": q, "glob": g, "maxResults": 200}) for i, (q, g) in enumerate(
        [("CANARY", None), ("API_TOKEN", None), ("CANARY", "**/.env"), ("CANARY", "linkdir/**"),
         ("_authToken", None), ("CANARY", "../**"), ("CANARY", "/**"), ("CANARY", "ignored.txt")])]
    hostile_a = [call(f"r{i}", "read_file", read_args(p)) for i, p in enumerate(paths)] + probes
    turns_a = []
    for t in range(0, len(hostile_a), 30):
        chunk = hostile_a[t:t + 30]
        # a successful call of each tool name ends the turn: the model "corrects" within the rules (each turn
        # asks something new: an identical read in a later turn is answered without running, tests/engine/
        # test_turn_endings.py)
        n = t // 30
        tail = [call(f"okr{t}", "read_file", {**ok_read, "startLine": 1, "endLine": 1 + n}),
                call(f"okl{t}", "list_files", {"glob": "**", "maxResults": 50 + n}),
                call(f"oks{t}", "search_text", {"query": "export", "glob": None, "maxResults": 5 + n})]
        turns_a.append({"toolCalls": chunk + tail})
    turns_a += [{"toolCalls": [call("w", "replace_text", EDIT)]}, {"text": "done", "finishReason": "stop"}]
    snap, diff, events, server = await run_job(world, turns_a, monkeypatch, run, len(hostile_a))
    assert snap.status == "awaiting-review", snap.error
    by_id = {e["toolCallId"]: e for e in finished(events)}
    for c in hostile_a:
        e = by_id[c["id"]]
        if c["name"] == "read_file":
            assert not e["ok"] and e["errorCode"] in ("TOOL_PATH_DENIED", "TOOL_ARGUMENTS_INVALID") and e["retryable"]
    denied = {m["content"] for r in server.requests for m in r["messages"]
              if m["role"] == "tool" and "TOOL_PATH_DENIED" in m["content"]}
    # One uniform answer, no hint of the reason; a path asked again in a later turn gets the stuck-call
    # guard's answer, which is uniform too (only the turn of the first failure differs).
    assert len({d for d in denied if "Not run:" not in d}) == 1
    assert len({re.sub(r"in turn \d+", "", d) for d in denied if "Not run:" in d}) <= 1
    assert [f.path for f in diff.files] == ["src/App.tsx"]

    # --- job B: malformed calls (extra fields, wrong types, not objects, duplicate keys, unknown tools,
    # hostile check ids): answered TOOL_ARGUMENTS_INVALID, no side effect; the job goes on.
    bad_reads = [read_args(5), read_args(None), read_args(["src/App.tsx"]), {"path": "src/App.tsx"},
                 {**read_args("src/App.tsx"), "extra": True}, {**read_args("src/App.tsx"), "startLine": "1"},
                 {**read_args("src/App.tsx"), "startLine": 1.5}, {**read_args("src/App.tsx"), "endLine": True},
                 {"Path": "src/App.tsx", "startLine": None, "endLine": None}, [], "null", '"src/App.tsx"', "1",
                 '{"path": "src/util.ts", "path": ".env", "startLine": null, "endLine": null}',
                 '{"path": "src/App.tsx", "startLine": NaN, "endLine": null}', '{"path": ', "[" * 5000,
                 {**read_args("src/App.tsx"), "__proto__": {"path": ".env"}}]
    bad_edits = [{**EDIT, "path": 1}, {**EDIT, "extra": "x"}, {"path": "src/App.tsx", "oldText": ">Go<"},
                 {**EDIT, "oldText": ""}, {**EDIT, "newText": ">Go<"}, {**EDIT, "newText": "x\x00y"}, "{}", [EDIT]]
    bad_checks = [{"checkId": c} for c in ["rm -rf /", "../ok", "OK", "ok ", "", "ok; id", "$(id)", "ok\x00"]] + [
        {"checkId": "ok", "command": "sh"}, {"checkId": ["ok"]}, {"checkId": None}, {"id": "ok"}]
    bad_lists = [{"glob": 5, "maxResults": 10}, {"glob": "**", "maxResults": 0}, {"glob": "**", "maxResults": "9"},
                 {"glob": "", "maxResults": 10}, {"glob": "**"}]
    turns_b: list[dict] = []
    hostile_b = 0
    for t, group in enumerate([bad_reads, bad_checks, bad_lists]):
        name = ["read_file", "run_check", "list_files"][t]
        calls = [call(f"b{t}_{i}", name, a) for i, a in enumerate(group)]
        unknown = [call(f"u{t}_{i}", n, {"cmd": "cat .env"}) for i, n in enumerate(
            [f"run_shell_{t}", f"READ_FILE_{t}", f"read_file_{t} ", f"../exec_{t}", f"fetch_{t}", f"write_file_{t}"])]
        hostile_b += len(calls) + len(unknown)
        ok = {"read_file": call(f"ok{t}", "read_file", ok_read),
              "run_check": call(f"ok{t}", "run_check", {"checkId": "ok"}),
              "list_files": call(f"ok{t}", "list_files", {"glob": "**", "maxResults": 50})}[name]
        turns_b.append({"toolCalls": [*calls, *unknown, ok]})
    # one turn of malformed edits (one strike), then the real edit in a later turn clears it
    turns_b.append({"toolCalls": [call(f"e{i}", "replace_text", a) for i, a in enumerate(bad_edits)]})
    hostile_b += len(bad_edits)
    # a provider may reuse an id in a later turn: legal, a new call
    turns_b.append({"toolCalls": [call("b0_0", "replace_text", EDIT)]})
    turns_b.append({"text": "done", "finishReason": "stop"})
    snap, diff, events, server = await run_job(world, turns_b, monkeypatch, run, hostile_b)
    assert snap.status == "awaiting-review", snap.error
    results = {(e["turn"], e["toolCallId"]): e for e in finished(events)}
    for t, group in enumerate([bad_reads, bad_checks, bad_lists]):
        for i in range(len(group)):
            e = results[(t + 1, f"b{t}_{i}")]
            assert not e["ok"] and e["errorCode"] == "TOOL_ARGUMENTS_INVALID", (t, i, e)
        assert results[(t + 1, f"ok{t}")]["ok"]
    assert all(not results[(4, f"e{i}")]["ok"] for i in range(len(bad_edits)))
    assert results[(5, "b0_0")]["ok"] and [f.path for f in diff.files] == ["src/App.tsx"]

    # --- jobs C: every hostile write is a terminal failure that changes nothing.
    outside_abs = str(world.outside / "canary.txt")
    writes = [(p, world.canary_out if "canary" in p or p == "link.txt" else "API_TOKEN")
              for p in [".env", ".ENV", ".Env", "．env", ".env.local", ".npmrc", "certs/server.key", "link.txt",
                        "linkdir/canary.txt", "../outside/canary.txt", outside_abs, ".git/config", "ignored.txt",
                        "src/%2e%2e/%2e%2e/outside/canary.txt", "src\\..\\..\\outside\\canary.txt",
                        "node_modules/x.js", "src/App.tsx\x00", "src/new.ts"]]
    for i, (path, old) in enumerate(writes):
        # oldText is a placeholder: the model never knows the canary, and must not learn it from the answer
        args = {"path": path, "oldText": "CANARY" if old != "API_TOKEN" else "API_TOKEN", "newText": "PWNED"}
        turns = [{"toolCalls": [call(f"w{i}", "replace_text", args)]}]
        snap, diff, events, _ = await run_job(world, turns, monkeypatch, run, 1)
        assert snap.status == "failed" and snap.error is not None, (path, snap)
        assert diff.diff == "", path
    for i, args in enumerate([{**EDIT, "newText": "x" * (1024 * 1024 + 1)},
                              {**EDIT, "oldText": "y" * (1024 * 1024 + 1)}]):
        snap, *_ = await run_job(world, [{"toolCalls": [call(f"big{i}", "replace_text", args)]}], monkeypatch, run, 1)
        assert snap.status == "failed" and snap.error.code == "LIMIT_EXCEEDED"
    snap, *_ = await run_job(world, [{"toolCalls": [call("g", "list_files", {"glob": "*" * 5000, "maxResults": 5})]}],
                             monkeypatch, run, 1)
    assert snap.status == "failed" and snap.error.code == "LIMIT_EXCEEDED"

    # --- job D: two different calls sharing one id in one turn fail the job before anything runs.
    def chunk(delta: dict, finish: str | None = None) -> str:
        return sse({"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "scripted-model",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    def delta(i: int, args: dict) -> dict:
        return {"tool_calls": [{"index": i, "id": "dup", "type": "function",
                                "function": {"name": "replace_text", "arguments": json.dumps(args)}}]}

    raw = [chunk({"role": "assistant"}), chunk(delta(0, EDIT)), chunk(delta(1, {**EDIT, "path": ".env"})),
           chunk({}, "tool_calls"), sse("[DONE]")]
    snap, diff, events, _ = await run_job(world, [{"raw": raw}], monkeypatch, run, 2)
    assert snap.status == "failed" and snap.error.code == "PROVIDER_PROTOCOL" and finished(events) == []

    # --- the invariants over everything
    assert run.hostile >= 200, run.hostile
    everything = json.dumps(run.requests) + json.dumps(run.events) + json.dumps(run.results)
    for secret in world.secrets:
        assert secret not in everything
    assert str(world.outside) not in json.dumps(run.events) + json.dumps(run.results)
    assert world.digest() == before
    assert (world.root / "src/App.tsx").read_text() == APP

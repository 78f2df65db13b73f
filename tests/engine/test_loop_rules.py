"""Loop rules of docs/design.md §5, §6, §9 through the real engine service, the real Chat adapter and a real
local server: idempotency of ``(turn, toolCallId)``, read concurrency vs serial writes, per-version caches,
the retry-once rule for ``TOOL_ARGUMENTS_INVALID``, and ``run_check`` (trusted checks only, minimal env,
bounded and cleaned output, process group killed on timeout, a version bump after every check)."""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from spotpatch_agent.engine.events import JobEventLog
from spotpatch_agent.engine.loop import LoopBudget, LoopStats, run_loop
from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.errors import JobFailure
from spotpatch_agent.protocol.models import JobCreateParams, JobIdParams, Limits, TrustedConfig
from spotpatch_agent.provider.base import ToolCallEvent, TurnEnd, TurnRequest
from spotpatch_agent.provider.scripted import ScriptedProviderServer, render_chat_turn, sse
from spotpatch_agent.tools.executor import ToolExecutor
from spotpatch_agent.tools.registry import tool_specs
from tests.conftest import git, make_repo
from tests.engine._service_support import run_service_job, scripted_config
from tests.support.annotations import annotation, target

KEY_ENV = "SPOTPATCH_LOOP_TEST_KEY"
APP = 'export const App = () => <button className="a">Go</button>;\n'
FILES = {"src/App.tsx": APP, "src/a.ts": "export const a = 1;\n", "src/b.ts": "export const b = 2;\n",
         "src/c.ts": "export const c = 3;\n", ".gitignore": "node_modules\n"}
TARGET = annotation(target())
READ_APP = {"path": "src/App.tsx", "startLine": None, "endLine": None}
EDIT = {"path": "src/App.tsx", "oldText": ">Go<", "newText": ">Start<"}
DONE = {"text": "Done.", "finishReason": "stop"}


def call(cid: str, name: str, args: Any) -> dict:
    return {"id": cid, "name": name, "arguments": args}


def read(cid: str, path: str) -> dict:
    return call(cid, "read_file", {"path": path, "startLine": None, "endLine": None})


def config(server: ScriptedProviderServer, checks: list[dict] | None = None, **limits: int) -> TrustedConfig:
    return scripted_config(server, KEY_ENV, checks, **limits)


async def run_job(root: Path, turns: list, monkeypatch: pytest.MonkeyPatch, checks: list[dict] | None = None,
                  **limits: int):
    return await run_service_job(root, turns, monkeypatch, key_env=KEY_ENV, annotation=TARGET, checks=checks,
                                 **limits)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", FILES)


def activity(events: list[dict]) -> list[tuple[str, str, str, int]]:
    """(phase, tool, toolCallId, turn) of every activity event, in emission order."""
    return [(e["phase"], e["tool"], e["toolCallId"], e["turn"]) for e in events if e["kind"] == "activity"]


def finished(events: list[dict]) -> list[tuple[str, bool, str | None]]:
    return [(e["tool"], e["ok"], e.get("errorCode"))
            for e in events if e["kind"] == "activity" and e["phase"] == "finished"]


def tool_messages(server: ScriptedProviderServer, request_no: int) -> list[dict]:
    return [m for m in server.requests[request_no]["messages"] if m["role"] == "tool"]


def offered(server: ScriptedProviderServer) -> list[str]:
    return [t["function"]["name"] for t in server.requests[0]["tools"]]


# ---------------------------------------------------------------- idempotency of (turn, toolCallId)


def _chunk(delta: dict, finish: str | None = None) -> str:
    return sse({"id": "chatcmpl-raw", "object": "chat.completion.chunk", "created": 0, "model": "scripted-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _call_delta(index: int, cid: str, name: str, args: dict) -> dict:
    return {"tool_calls": [{"index": index, "id": cid, "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)}}]}


@pytest.mark.anyio
async def test_a_replayed_stream_event_after_finish_runs_the_write_once(root, monkeypatch) -> None:
    rendered = render_chat_turn({"toolCalls": [call("w1", "replace_text", EDIT)]}, model="scripted-model")
    done = rendered.pop()  # "[DONE]"
    usage = rendered.pop()
    raw = [*rendered, _chunk(_call_delta(0, "w1", "replace_text", EDIT)), usage, done]  # relay replays the call
    snap, diff, events, server, _ = await run_job(root, [{"raw": raw}, DONE], monkeypatch)
    assert snap.status == "awaiting-review"
    assert activity(events) == [("started", "replace_text", "w1", 1), ("finished", "replace_text", "w1", 1)]
    assert [m["tool_call_id"] for m in tool_messages(server, 1)] == ["w1"]
    assert diff.diff.count("+export const App") == 1


@pytest.mark.anyio
@pytest.mark.parametrize("second_args", [EDIT, {**EDIT, "newText": ">Stop<"}], ids=["identical", "conflicting"])
async def test_two_calls_sharing_an_id_in_one_turn_fail_the_job_before_any_side_effect(
    root, monkeypatch, second_args,
) -> None:
    # The Chat adapter sees two slots (indexes 0 and 1) with one id: identical or not, that is a protocol
    # violation of the provider (PROVIDER_PROTOCOL); the loop never runs either call.
    raw = [_chunk({"role": "assistant", "content": ""}), _chunk(_call_delta(0, "dup", "replace_text", EDIT)),
           _chunk(_call_delta(1, "dup", "replace_text", second_args)), _chunk({}, "tool_calls"), sse("[DONE]")]
    snap, diff, events, _, _ = await run_job(root, [{"raw": raw}], monkeypatch)
    assert snap.status == "failed" and snap.error is not None and snap.error.code == "PROVIDER_PROTOCOL"
    assert activity(events) == []
    assert diff.diff == "" and (root / "src/App.tsx").read_text() == APP


@pytest.mark.anyio
async def test_the_same_id_in_a_later_turn_is_a_new_call(root, monkeypatch) -> None:
    turns = [{"toolCalls": [read("same", "src/App.tsx")]},
             {"toolCalls": [call("same", "replace_text", EDIT)]},
             {"toolCalls": [read("same", "src/App.tsx")]}, DONE]
    snap, _, events, server, _ = await run_job(root, turns, monkeypatch)
    assert snap.status == "awaiting-review"
    assert [(t, cid, turn) for phase, t, cid, turn in activity(events) if phase == "finished"] == [
        ("read_file", "same", 1), ("replace_text", "same", 2), ("read_file", "same", 3)]
    assert "Start" in tool_messages(server, 3)[-1]["content"]  # the later read really ran again


class _DuplicatingAdapter:
    """A provider adapter that emits the given events per turn verbatim (loop-level duplicates)."""

    def __init__(self, turns: list[list[Any]]) -> None:
        self._turns = list(turns)

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[Any]:
        for event in self._turns.pop(0):
            yield event

    async def aclose(self) -> None:
        pass


async def _loop(root: Path, turns: list[list[Any]]) -> tuple[str | BaseException, list[dict]]:
    events: list[dict] = []
    names = ("list_files", "search_text", "read_file", "replace_text")
    executor = ToolExecutor(root, Limits(), tools=names)
    try:
        final: str | BaseException = await run_loop(
            adapter=_DuplicatingAdapter(turns), model="m", system="s", task="t", tools=tool_specs(names),
            executor=executor, budget=LoopBudget(max_turns=5, max_tool_calls=10, tool_timeout_sec=30),
            events=JobEventLog("job_x", events.append), stats=LoopStats())
    except JobFailure as exc:
        final = exc
    return final, events


@pytest.mark.anyio
async def test_loop_runs_an_exact_duplicate_event_once_and_fails_a_conflicting_one(root) -> None:
    edit = ToolCallEvent("w", "replace_text", json.dumps(EDIT))
    final, events = await _loop(root, [[edit, edit, TurnEnd("tool_calls")], [TurnEnd("stop")]])
    assert final == ""
    assert activity(events) == [("started", "replace_text", "w", 1), ("finished", "replace_text", "w", 1)]
    assert (root / "src/App.tsx").read_text().count("Start") == 1

    other = ToolCallEvent("w", "replace_text", json.dumps({**EDIT, "oldText": ">Start<", "newText": ">X<"}))
    read_app = ToolCallEvent("w", "read_file", json.dumps(READ_APP))
    final, events = await _loop(root, [[other, read_app, TurnEnd("tool_calls")]])
    assert isinstance(final, JobFailure) and final.code.value == "PROVIDER_PROTOCOL" and events == []
    assert ">X<" not in (root / "src/App.tsx").read_text()


# ---------------------------------------------------------------- concurrency: reads overlap, writes serial


@pytest.mark.anyio
async def test_reads_of_one_turn_overlap_and_writes_run_serially_in_event_order(root, monkeypatch) -> None:
    turns = [{"toolCalls": [read("r1", "src/a.ts"), read("r2", "src/b.ts"), read("r3", "src/c.ts"),
                            call("s1", "search_text", {"query": "export", "glob": None, "maxResults": 50})]},
             {"toolCalls": [call("w1", "replace_text", {"path": "src/a.ts", "oldText": "1", "newText": "10"}),
                            call("w2", "replace_text", {"path": "src/a.ts", "oldText": "10", "newText": "100"}),
                            call("w3", "replace_text", {"path": "src/b.ts", "oldText": "2", "newText": "20"})]},
             DONE]
    snap, diff, events, _, _ = await run_job(root, turns, monkeypatch)
    assert snap.status == "awaiting-review"
    seq = [(phase, cid) for phase, _, cid, turn in activity(events)]
    # Turn 1: every read started before any finished — they were in flight together.
    first = seq[:8]
    assert [p for p, _ in first[:4]] == ["started"] * 4 and [p for p, _ in first[4:]] == ["finished"] * 4
    # They finish in whatever order they complete (a search can beat a read): each once, each ok.
    assert sorted(finished(events)[:4]) == [("read_file", True, None)] * 3 + [("search_text", True, None)]
    # Turn 2: each write finished before the next one started, in event order; w2 saw w1's result.
    assert seq[8:] == [("started", "w1"), ("finished", "w1"), ("started", "w2"), ("finished", "w2"),
                       ("started", "w3"), ("finished", "w3")]
    assert finished(events)[4:] == [("replace_text", True, None)] * 3
    assert "+export const a = 100;" in diff.diff and "+export const b = 20;" in diff.diff


# ---------------------------------------------------------------- caches per worktree version


@pytest.mark.anyio
async def test_reads_and_listings_after_a_write_or_a_check_are_never_stale(root, monkeypatch) -> None:
    checks = [{"id": "gen", "name": "Generate", "command": sys.executable,
               "args": ["-c", ("open('src/new.ts','w').write('export const n = 7;\\n');"
                               "p='src/App.tsx'; s=open(p).read(); open(p,'w').write(s.replace('Start','Begin'))")]}]
    listing = call("l1", "list_files", {"glob": "**/*.ts", "maxResults": 100})
    turns = [{"toolCalls": [read("r1", "src/App.tsx"), listing]},
             {"toolCalls": [call("w", "replace_text", EDIT)]},
             {"toolCalls": [read("r2", "src/App.tsx"), {**listing, "id": "l2"}]},
             {"toolCalls": [call("c", "run_check", {"checkId": "gen"})]},
             {"toolCalls": [read("r3", "src/App.tsx"), {**listing, "id": "l3"}, read("r4", "src/new.ts")]},
             DONE]
    snap, diff, events, server, _ = await run_job(root, turns, monkeypatch, checks=checks)
    assert snap.status == "awaiting-review", snap
    assert ">Go<" in tool_messages(server, 1)[0]["content"]
    after_write = tool_messages(server, 3)
    assert ">Start<" in after_write[-2]["content"] and ">Go<" not in after_write[-2]["content"]
    after_check = tool_messages(server, 5)
    assert "PASSED" in after_check[-4]["content"]
    assert ">Begin<" in after_check[-3]["content"]
    assert "src/new.ts" in after_check[-2]["content"] and "src/new.ts" not in after_write[-1]["content"]
    assert "export const n = 7;" in after_check[-1]["content"]
    assert "src/new.ts" in diff.diff


# ---------------------------------------------------------------- retry-once rule


@pytest.mark.anyio
async def test_a_second_invalid_call_of_the_same_tool_fails_the_job(root, monkeypatch) -> None:
    turns = [{"toolCalls": [call("c1", "read_file", {"path": "src/App.tsx"})]},
             {"toolCalls": [call("c2", "read_file", {"path": 5, "startLine": None, "endLine": None})]},
             {"toolCalls": [call("c3", "replace_text", EDIT)]}, DONE]
    snap, diff, events, server, _ = await run_job(root, turns, monkeypatch)
    assert snap.status == "failed" and snap.error.code == "LIMIT_EXCEEDED"
    assert "read_file" in snap.error.message and "only once" in snap.error.message
    assert len(server.requests) == 2 and diff.diff == ""
    assert finished(events) == [("read_file", False, "TOOL_ARGUMENTS_INVALID")] * 2


@pytest.mark.anyio
async def test_a_corrected_call_clears_the_strike_and_same_turn_mistakes_count_once(root, monkeypatch) -> None:
    bad = {"path": "src/App.tsx", "extra": 1, "startLine": None, "endLine": None}
    turns = [{"toolCalls": [call("a", "read_file", bad), call("b", "read_file", bad),  # one strike: same turn
                            call("x", "list_files", "not json")]},
             {"toolCalls": [read("c", "src/App.tsx"), call("y", "list_files", {"glob": "**", "maxResults": 5})]},
             {"toolCalls": [call("d", "read_file", bad)]},  # a new strike after a success: allowed
             {"toolCalls": [call("e", "replace_text", EDIT)]}, DONE]
    snap, diff, events, _, _ = await run_job(root, turns, monkeypatch)
    assert snap.status == "awaiting-review", snap.error
    assert [ok for _, ok, _ in finished(events)] == [False, False, False, True, True, False, True]


@pytest.mark.anyio
async def test_unknown_tool_names_strike_per_name(root, monkeypatch) -> None:
    turns = [{"toolCalls": [call("a", "run_shell", {"cmd": "id"})]},
             {"toolCalls": [call("b", "run_shell", {"cmd": "id"})]}, DONE]
    snap, _, _, server, _ = await run_job(root, turns, monkeypatch)
    assert snap.status == "failed" and snap.error.code == "LIMIT_EXCEEDED"
    assert "undeclared tool" in snap.error.message and "run_shell" not in snap.error.message


@pytest.mark.anyio
async def test_path_denials_stay_retryable(root, monkeypatch) -> None:
    # Different denied paths (an identical repeat is the stuck-call guard's: tests/engine/test_turn_endings.py).
    denied = (".env", ".env.local", ".npmrc", "id_rsa")
    turns = [{"toolCalls": [read(f"d{i}", path)]} for i, path in enumerate(denied)] + [
        {"toolCalls": [call("w", "replace_text", EDIT)]}, DONE]
    snap, _, events, _, _ = await run_job(root, turns, monkeypatch)
    assert snap.status == "awaiting-review"
    assert finished(events)[:4] == [("read_file", False, "TOOL_PATH_DENIED")] * 4


# ---------------------------------------------------------------- run_check


@pytest.mark.anyio
async def test_run_check_is_offered_only_with_checks_and_resolves_trusted_ids_only(root, monkeypatch) -> None:
    snap, _, _, server, _ = await run_job(root, [{"toolCalls": [call("w", "replace_text", EDIT)]}, DONE], monkeypatch)
    assert "run_check" not in offered(server) and offered(server)[:4] == [
        "list_files", "search_text", "read_file", "replace_text"]

    checks = [{"id": "unit", "name": "Unit", "command": sys.executable, "args": ["-c", "print('ok')"]},
              {"id": "lint", "name": "Lint", "command": sys.executable, "args": ["-c", "raise SystemExit(3)"],
               "required": False}]  # a required failing check would fail the job at validation (gates.py)
    turns = [{"toolCalls": [call("a", "run_check", {"checkId": "rm -rf /"})]},
             {"toolCalls": [call("b", "run_check", {"checkId": "unit"}), call("c", "run_check", {"checkId": "lint"})]},
             {"toolCalls": [call("w", "replace_text", EDIT)]}, DONE]
    snap, _, events, server, _ = await run_job(root, turns, monkeypatch, checks=checks)
    assert "run_check" in offered(server)
    unknown = tool_messages(server, 1)[0]["content"]
    assert unknown.startswith("ERROR TOOL_ARGUMENTS_INVALID") and "unit, lint" in unknown and "rm -rf" not in unknown
    results = [m["content"] for m in tool_messages(server, 2)[-2:]]
    assert results[0].startswith("Check unit (Unit) PASSED: exit code 0") and "ok" in results[0]
    assert results[1].startswith("Check lint (Lint) FAILED: exit code 3")
    assert finished(events)[1:3] == [("run_check", True, None), ("run_check", False, None)]
    assert snap.status == "awaiting-review"


@pytest.mark.anyio
async def test_run_check_env_is_minimal_and_output_clean_and_bounded(root, monkeypatch) -> None:
    monkeypatch.setenv("UNRELATED_SECRET_TOKEN", "tok-canary-123")
    script = ("import os,sys; print('\\x1b[31mRED\\x1b[0m', os.getcwd() + '/src/App.tsx'); "
              "print(sorted(os.environ)); print(os.environ.get('CI'), os.environ.get('NO_COLOR')); "
              "sys.stderr.write('E' * 5000)")
    checks = [{"id": "env", "name": "Env", "command": sys.executable, "args": ["-c", script]}]
    turns = [{"toolCalls": [call("a", "run_check", {"checkId": "env"})]},
             {"toolCalls": [call("w", "replace_text", EDIT)]}, DONE]
    snap, _, events, server, key = await run_job(root, turns, monkeypatch, checks=checks, checkOutputMaxBytes=1024)
    out = tool_messages(server, 1)[0]["content"]
    assert "RED src/App.tsx" in out and "\x1b" not in out and str(root) not in out and "/tmp" not in out
    assert KEY_ENV not in out and "UNRELATED_SECRET_TOKEN" not in out and key not in out
    assert "1 1" in out and "[output truncated]" in out and len(out.encode()) < 1400
    assert snap.status == "awaiting-review"


@pytest.mark.anyio
async def test_run_check_timeout_kills_the_whole_process_group(root, monkeypatch, tmp_path) -> None:
    # The check runs confined in its own pid namespace: its child's pid means nothing here, so the child is
    # found on the host by a unique token in its command line.
    token = f"spotpatch-loop-child-{os.getpid()}-{time.monotonic_ns()}"
    script = ("import subprocess,sys,time; "
              f"p=subprocess.Popen([sys.executable,'-c','import time; time.sleep(60)',{token!r}]); "
              "print('started', flush=True); time.sleep(60)")
    checks = [{"id": "slow", "name": "Slow", "command": sys.executable, "args": ["-c", script], "timeoutSec": 1,
               "required": False}]  # required, the host would run it again at validation and fail the job
    turns = [{"toolCalls": [call("a", "run_check", {"checkId": "slow"})]},
             {"toolCalls": [call("w", "replace_text", EDIT)]}, DONE]
    started = time.monotonic()
    snap, _, _, server, _ = await run_job(root, turns, monkeypatch, checks=checks)
    assert time.monotonic() - started < 30
    out = tool_messages(server, 1)[0]["content"]
    assert out.startswith("Check slow (Slow) FAILED: timed out after 1 s") and "started" in out

    def alive() -> list[str]:
        found = []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and token.encode() in (entry / "cmdline").read_bytes() \
                        and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(entry.name)
            except OSError:
                pass
        return found

    for _ in range(50):  # the killed child is reaped shortly after
        if not alive():
            break
        time.sleep(0.1)
    else:
        pytest.fail("the check's child process outlived the timeout")
    assert snap.status == "awaiting-review"
    assert git(root, "status", "--porcelain") == ""


@pytest.mark.anyio
async def test_check_whose_child_escapes_the_process_group_still_ends_at_its_timeout(tmp_path) -> None:
    """A grandchild that calls setsid() keeps the output pipe open; the check must still end near its timeout."""
    from spotpatch_agent.protocol.models import CheckConfig, Limits
    from spotpatch_agent.tools.executor import ToolExecutor

    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    script = ("import os, time\n"
              "if os.fork() == 0:\n    os.setsid()\n    time.sleep(8)\n    os._exit(0)\n"
              "time.sleep(8)\n")
    check = CheckConfig(id="esc", name="Escapes", command=sys.executable, args=["-c", script], timeout_sec=1)
    executor = ToolExecutor(repo, Limits(), tools=["run_check"], checks=(check,))
    started = time.monotonic()
    result = await executor.execute("run_check", '{"checkId": "esc"}')
    assert time.monotonic() - started < 6
    assert not result.ok and "timed out" in result.output


# ---------------------------------------------------------------- every call answered once (issue 7)


def assistant_call_ids(server: ScriptedProviderServer, request_no: int) -> list[str]:
    """Ids of the assistant tool calls echoed in request ``request_no`` (all turns so far, in order)."""
    return [c["id"] for m in server.requests[request_no]["messages"] if m["role"] == "assistant"
            for c in m.get("tool_calls") or []]


@pytest.mark.anyio
async def test_every_call_of_a_turn_gets_exactly_one_result_in_the_next_request_also_when_rejected(
    root, monkeypatch,
) -> None:
    rejected = [call("unknown|1", "delete_repo", {}), call("bad-json", "read_file", '{"path": "src/a.ts"'),
                read("denied", "../outside.txt"), call("schema", "read_file", {"path": "src/a.ts", "extra": 1})]
    turns = [{"toolCalls": [read("ok:1", "src/App.tsx"), *rejected]}, {"toolCalls": [call("w", "replace_text", EDIT)]},
             DONE]
    snap, _, _, server, _ = await run_job(root, turns, monkeypatch)
    assert snap.status == "awaiting-review"
    ids = ["ok:1", "unknown|1", "bad-json", "denied", "schema"]
    assert assistant_call_ids(server, 1) == ids
    answers = tool_messages(server, 1)
    assert [m["tool_call_id"] for m in answers] == ids  # each exactly once, original ids, event order
    assert not answers[0]["content"].startswith("ERROR")
    assert [m["content"].split(":")[0] for m in answers[1:]] == [
        "ERROR TOOL_ARGUMENTS_INVALID", "ERROR TOOL_ARGUMENTS_INVALID", "ERROR TOOL_PATH_DENIED",
        "ERROR TOOL_ARGUMENTS_INVALID"]
    assert [m["tool_call_id"] for m in tool_messages(server, 2)] == [*ids, "w"]


@pytest.mark.anyio
async def test_a_provider_id_reused_across_turns_is_echoed_verbatim_each_turn(root, monkeypatch) -> None:
    turns = [{"toolCalls": [read("call_0", "src/App.tsx")]},
             {"toolCalls": [call("call_0", "replace_text", EDIT)]},
             DONE]
    snap, _, _, server, _ = await run_job(root, turns, monkeypatch)
    assert snap.status == "awaiting-review"
    assert assistant_call_ids(server, 2) == ["call_0", "call_0"]
    answers = tool_messages(server, 2)
    assert [m["tool_call_id"] for m in answers] == ["call_0", "call_0"]
    assert "Go" in answers[0]["content"] and not answers[1]["content"].startswith("ERROR")


class _RecordingAdapter(_DuplicatingAdapter):
    """:class:`_DuplicatingAdapter` that keeps every request it was sent."""

    def __init__(self, turns: list[list[Any]]) -> None:
        super().__init__(turns)
        self.requests: list[TurnRequest] = []

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[Any]:
        self.requests.append(request)
        async for event in super().stream_turn(request):
            yield event


@pytest.mark.anyio
async def test_a_duplicate_event_is_answered_once_and_every_other_call_of_its_turn_still_gets_its_result(root) -> None:
    from spotpatch_agent.provider.base import ToolResultMessage

    ok = ToolCallEvent("r", "read_file", json.dumps(READ_APP))
    unknown = ToolCallEvent("u", "nope", "{}")
    bad = ToolCallEvent("b", "read_file", '{"path": ', invalid="arguments are not valid JSON")
    adapter = _RecordingAdapter([[ok, unknown, ok, bad, TurnEnd("tool_calls")], [TurnEnd("stop")]])
    names = ("list_files", "search_text", "read_file", "replace_text")
    await run_loop(adapter=adapter, model="m", system="s", task="t", tools=tool_specs(names),
                   executor=ToolExecutor(root, Limits(), tools=names),
                   budget=LoopBudget(max_turns=5, max_tool_calls=10, tool_timeout_sec=30),
                   events=JobEventLog("job_x", lambda _e: None), stats=LoopStats())
    answered = [i.call_id for i in adapter.requests[1].items if isinstance(i, ToolResultMessage)]
    assert answered == ["r", "u", "b"]


@pytest.mark.anyio
async def test_cancel_during_a_turns_tool_call_ends_the_job_without_another_request(root, monkeypatch) -> None:
    import anyio

    monkeypatch.setenv(KEY_ENV, "sk-canary-" + secrets.token_hex(12))
    checks = [{"id": "slow", "name": "Slow", "command": sys.executable, "args": ["-c", "import time; time.sleep(30)"]}]
    turns = [{"toolCalls": [read("r", "src/App.tsx"), call("c", "run_check", {"checkId": "slow"})]}, DONE]
    events: list[dict] = []
    with ScriptedProviderServer(turns) as server:
        service = EngineService(send_event=events.append)
        async with service.running():
            await service.configure(root, config(server, checks))
            create = JobCreateParams.model_validate({"annotation": TARGET, "modelProfileId": "m"})
            snap = await service.job_create(create)
            with anyio.fail_after(20):
                while ("started", "run_check", "c", 1) not in activity(events):
                    await anyio.sleep(0.02)
            await service.job_cancel(JobIdParams(job_id=snap.job_id))
            await service.wait_job(snap.job_id)
            final = await service.job_get(JobIdParams(job_id=snap.job_id))
    assert final.status == "cancelled"
    assert len(server.requests) == 1  # no half-answered turn is ever sent
    assert git(root, "status", "--porcelain") == ""


# ---------------------------------------------------------------- stop reasons and replayed reasoning (review)


@pytest.mark.anyio
@pytest.mark.parametrize("turn_no", [1, 2])
async def test_tool_calls_stop_reason_without_a_call_fails_as_provider_protocol(root, monkeypatch, turn_no) -> None:
    """A turn saying ``finish_reason: tool_calls`` with no call (valid or invalid) ended the job as an empty
    final answer on a later turn (or as "no tool calling" on the first): it is a provider protocol failure."""
    empty = [_chunk({"role": "assistant", "content": ""}), _chunk({}, "tool_calls"), sse("[DONE]")]
    turns = [{"raw": empty}] if turn_no == 1 else [{"toolCalls": [read("r", "src/App.tsx")]}, {"raw": empty}, DONE]
    snap, diff, _, server, _ = await run_job(root, turns, monkeypatch)
    assert snap.status == "failed" and snap.error is not None and snap.error.code == "PROVIDER_PROTOCOL"
    assert "said it called tools but sent no tool call" in snap.error.message
    assert len(server.requests) == turn_no and diff.diff == ""


def _responses_event(kind: str, **fields: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n"


@pytest.mark.anyio
async def test_responses_reasoning_items_with_encrypted_content_are_echoed_before_their_calls(root) -> None:
    """``store: false`` keeps nothing server-side: a reasoning model's ``reasoning`` items are sent back in the
    next input, in order, before the turn's calls — only those carrying ``encrypted_content`` (an ``rs_`` id
    alone is a reference to nothing: OpenAI answers 404). ``include`` is never requested (non-reasoning
    models answer 400 "Encrypted content is not supported with this model")."""
    from spotpatch_agent.provider.responses import ResponsesAdapter

    kept = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "look first"}],
            "encrypted_content": "gAAAA-opaque-1", "status": "completed"}
    bare = {"type": "reasoning", "id": "rs_2", "summary": []}
    fc = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read_file",
          "arguments": json.dumps(READ_APP), "status": "completed"}
    raw = [_responses_event("response.output_item.done", output_index=0, item=kept),
           _responses_event("response.output_item.done", output_index=1, item=bare),
           _responses_event("response.output_item.done", output_index=2, item=fc),
           _responses_event("response.completed", response={"status": "completed", "output": [kept, bare, fc]})]
    names = ("list_files", "search_text", "read_file", "replace_text")
    with ScriptedProviderServer([{"raw": raw}, DONE]) as server:
        adapter = ResponsesAdapter(base_url=server.base_url, api_key="sk-canary-" + secrets.token_hex(8))
        try:
            final = await run_loop(adapter=adapter, model="m", system="s", task="t", tools=tool_specs(names),
                                   executor=ToolExecutor(root, Limits(), tools=names),
                                   budget=LoopBudget(max_turns=5, max_tool_calls=10, tool_timeout_sec=30),
                                   events=JobEventLog("job_x", lambda _e: None), stats=LoopStats())
        finally:
            await adapter.aclose()
    assert final == "Done."
    second = server.requests[1]["input"]
    assert [i["type"] for i in second] == ["message", "reasoning", "function_call", "function_call_output"]
    assert second[1] == {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "look first"}],
                         "encrypted_content": "gAAAA-opaque-1"}
    assert all("include" not in body and body["store"] is False for body in server.requests)


@pytest.mark.anyio
@pytest.mark.parametrize("bad_name", ["", "read file", "x" * 65])
async def test_a_call_with_an_unusable_name_is_echoed_under_a_valid_placeholder_name(
        root, monkeypatch, bad_name) -> None:
    """A call without a usable function name is never run and gets its failed result, but the next request
    must not carry ``name: ""`` (or spaces, or > 64 characters): OpenAI rejects the whole request with 400."""
    first = "".join([_chunk({"role": "assistant"}),
                     _chunk({"tool_calls": [{"index": 0, "id": "bad1", "type": "function",
                                             "function": {"name": bad_name, "arguments": "{}"}}]}),
                     _chunk({}, "tool_calls"), "data: [DONE]\n\n"])
    snap, _diff, events, server, _key = await run_job(
        root, [{"raw": first}, {"toolCalls": [call("e1", "replace_text", EDIT)]}, DONE], monkeypatch)
    assert snap.status == "awaiting-review"
    echoed = [m for m in server.requests[1]["messages"] if m["role"] == "assistant"][0]["tool_calls"]
    assert [(c["id"], c["function"]["name"]) for c in echoed] == [("bad1", "invalid_tool_call")]
    assert [m["tool_call_id"] for m in tool_messages(server, 1)] == ["bad1"]
    assert tool_messages(server, 1)[0]["content"].startswith("ERROR TOOL_ARGUMENTS_INVALID")
    if not bad_name:  # the model is told what was wrong, not that its (valid) JSON was broken
        assert "This call was not run: the tool call has no function name" in tool_messages(server, 1)[0]["content"]


@pytest.mark.anyio
async def test_arguments_over_the_adapter_bound_end_the_job_with_limit_exceeded(root, monkeypatch) -> None:
    """Arguments above the adapter's bound (4 MiB characters) are terminal LIMIT_EXCEEDED, like arguments above
    the executor's limit (docs/security.md §5) — not a retryable invalid call the model may send again."""
    from spotpatch_agent.provider.calls import MAX_ARGUMENT_CHARS

    huge = {"path": "src/App.tsx", "oldText": ">Go<", "newText": "x" * (MAX_ARGUMENT_CHARS + 10)}
    snap, _diff, _events, server, _key = await run_job(
        root, [{"toolCalls": [call("big1", "replace_text", huge)]}, DONE], monkeypatch)
    assert snap.status == "failed" and snap.error is not None
    assert snap.error.code == "LIMIT_EXCEEDED"
    assert len(server.requests) == 1  # never answered to the model as a retryable mistake

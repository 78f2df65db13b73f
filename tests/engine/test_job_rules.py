"""The loop's rules through the real engine service, the real Chat adapter and a real local server
(docs/design.md §5, §6, §11): failed calls are answered, limits stop the job, hostile calls change nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import git, make_repo
from tests.engine._service_support import run_service_job
from tests.support.annotations import annotation, target

KEY_ENV = "SPOTPATCH_ENGINE_TEST_KEY"
FILES = {"src/App.tsx": 'export const App = () => <button className="a">Go</button>;\n', ".env": "SECRET=1\n",
         ".gitignore": "node_modules\n"}
TARGET = annotation(target())
EDIT = {"path": "src/App.tsx", "oldText": ">Go<", "newText": ">Start<"}


def call(cid: str, name: str, args: Any) -> dict:
    return {"id": cid, "name": name, "arguments": args}


async def run_job(root: Path, turns: list, monkeypatch: pytest.MonkeyPatch, **limits: int):
    return await run_service_job(root, turns, monkeypatch, key_env=KEY_ENV, annotation=TARGET, **limits)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", FILES)


def finished(events: list[dict]) -> list[tuple[str, bool, str | None]]:
    return [(e["tool"], e["ok"], e.get("errorCode"))
            for e in events if e["kind"] == "activity" and e["phase"] == "finished"]


@pytest.mark.anyio
async def test_truncated_arguments_are_a_failed_call_answered_to_the_model(root, monkeypatch) -> None:
    turns = [
        {"toolCalls": [call("c1", "read_file", '{"path": "src/App.tsx", "startLine": nu')]},
        {"toolCalls": [call("c2", "replace_text", {"path": "src/App.tsx", "oldText": ">Go<", "newText": ">Start<"})]},
        {"text": "Done.", "finishReason": "stop"},
    ]
    snap, diff, events, server, _ = await run_job(root, turns, monkeypatch)
    assert snap.status == "awaiting-review"
    assert finished(events) == [("read_file", False, "TOOL_ARGUMENTS_INVALID"), ("replace_text", True, None)]
    tool_msgs = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["c1"]
    assert tool_msgs[0]["content"].startswith("ERROR TOOL_ARGUMENTS_INVALID")
    assert "+export const App = () => <button className=\"a\">Start</button>;" in diff.diff


@pytest.mark.anyio
async def test_hostile_read_paths_are_denied_uniformly_and_reveal_nothing(root, monkeypatch, tmp_path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("TOP-SECRET-OUTSIDE\n")
    (root / "link.txt").symlink_to(outside)
    git(root, "add", "link.txt")
    git(root, "commit", "-q", "-m", "a tracked symlink to outside")
    hostile = ["/etc/passwd", "../outside.txt", str(outside), ".env", ".git/config", "link.txt",
               "src/../../outside.txt", "src%2F..%2F..%2Foutside.txt", "C:\\Windows\\win.ini", "node_modules/x.js",
               "nope.txt"]
    turns = [{"toolCalls": [call(f"r{i}", "read_file", {"path": p, "startLine": None, "endLine": None})
                            for i, p in enumerate(hostile)]},
             {"toolCalls": [call("w", "replace_text", EDIT)]},
             {"text": "ok", "finishReason": "stop"}]
    snap, diff, events, server, _ = await run_job(root, turns, monkeypatch)
    assert snap.status == "awaiting-review"
    results = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert len(results) == len(hostile) and len(set(results)) == 1 and "TOOL_PATH_DENIED" in results[0]
    everything = json.dumps(server.requests) + json.dumps(events)
    assert "TOP-SECRET-OUTSIDE" not in everything and "SECRET=1" not in everything
    assert str(tmp_path) not in json.dumps(events)


@pytest.mark.anyio
async def test_write_to_protected_path_fails_the_job_and_changes_nothing(root, monkeypatch) -> None:
    turns = [{"toolCalls": [call("w", "replace_text", {"path": ".env", "oldText": "SECRET=1", "newText": "SECRET=2"})]}]
    snap, diff, events, _, _ = await run_job(root, turns, monkeypatch)
    assert snap.status == "failed" and snap.error is not None and snap.error.code == "CHANGESET_REJECTED"
    assert (root / ".env").read_text() == "SECRET=1\n"
    assert git(root, "status", "--porcelain") == ""


@pytest.mark.anyio
async def test_max_turns_limit_fails_the_job(root, monkeypatch) -> None:
    read = {"path": "src/App.tsx", "startLine": None, "endLine": None}
    turns = [{"toolCalls": [call(f"c{i}", "read_file", read)]} for i in range(5)]
    snap, _, events, server, _ = await run_job(root, turns, monkeypatch, maxTurns=3)
    assert snap.status == "failed" and snap.error.code == "LIMIT_EXCEEDED"
    assert len(server.requests) == 3


@pytest.mark.anyio
async def test_max_tool_calls_limit_fails_the_job(root, monkeypatch) -> None:
    read = {"path": "src/App.tsx", "startLine": None, "endLine": None}
    turns = [{"toolCalls": [call(f"c{i}", "read_file", read) for i in range(4)]}]
    snap, *_ = await run_job(root, turns, monkeypatch, maxToolCalls=3)
    assert snap.status == "failed" and snap.error.code == "LIMIT_EXCEEDED"


@pytest.mark.anyio
async def test_unknown_tool_is_a_retryable_argument_error(root, monkeypatch) -> None:
    turns = [{"toolCalls": [call("x", "run_shell", {"cmd": "rm -rf /"}), call("y", "write_file", {"path": "x"})]},
             {"toolCalls": [call("w", "replace_text", EDIT)]},
             {"text": "ok", "finishReason": "stop"}]
    snap, _, events, _, _ = await run_job(root, turns, monkeypatch)
    assert snap.status == "awaiting-review"
    assert finished(events)[:2] == [("run_shell", False, "TOOL_ARGUMENTS_INVALID"),
                                    ("write_file", False, "TOOL_ARGUMENTS_INVALID")]


@pytest.mark.anyio
async def test_provider_auth_error_echoing_the_key_never_reveals_it(root, monkeypatch) -> None:
    def echo_key(_body: dict) -> dict:
        import os

        return {"status": 401, "body": {"error": {"message": f"Incorrect API key provided: {os.environ[KEY_ENV]}"}}}

    snap, _, events, server, key = await run_job(root, [echo_key], monkeypatch)
    assert snap.status == "failed" and snap.error.code == "PROVIDER_AUTH"
    assert key not in json.dumps(events) and key not in snap.error.message
    assert server.headers[0]["authorization"] == f"Bearer {key}"


@pytest.mark.anyio
async def test_model_that_edits_nothing_fails_explicitly(root, monkeypatch) -> None:
    turns = [{"toolCalls": [call("c", "list_files", {"glob": "**/*", "maxResults": 10})]},
             {"text": "Nothing to do.", "finishReason": "stop"}]
    snap, diff, events, _, _ = await run_job(root, turns, monkeypatch)
    assert snap.status == "failed" and snap.error.code == "CHANGESET_REJECTED"
    assert diff.diff == ""


@pytest.mark.anyio
async def test_failed_job_keeps_its_reviewable_diff_but_cannot_be_applied(root, monkeypatch) -> None:
    read = {"path": "src/App.tsx", "startLine": None, "endLine": None}
    turns = [{"toolCalls": [call("w", "replace_text", EDIT)]},
             {"toolCalls": [call("r1", "read_file", read)]},
             {"toolCalls": [call("r2", "read_file", read)]}]
    snap, diff, events, _, _ = await run_job(root, turns, monkeypatch, maxTurns=2)
    assert snap.status == "failed" and snap.error.code == "LIMIT_EXCEEDED"
    assert ">Start<" in diff.diff and [f.path for f in diff.files] == ["src/App.tsx"]
    assert any(e["kind"] == "diff" for e in events)
    assert git(root, "status", "--porcelain") == ""


@pytest.mark.anyio
async def test_hostile_tool_names_and_ids_are_bounded_and_redacted_in_events(root, monkeypatch) -> None:
    huge_id = "id-" + str(root) + "-" + "X" * 300_000
    turns = [{"toolCalls": [call(huge_id, "list_files", {"glob": "**/*", "maxResults": 5}),
                            call("c2", f"/root/.ssh/id_rsa {root}", {})]},
             {"toolCalls": [call("w", "replace_text", EDIT)]},
             {"text": f"done, see {root}/src/App.tsx", "finishReason": "stop"}]
    snap, _, events, server, _ = await run_job(root, turns, monkeypatch)
    assert snap.status == "awaiting-review"
    text = json.dumps(events)
    assert str(root) not in text
    assert max(len(json.dumps(e)) for e in events) < 10_000
    # the provider still gets its own ids back verbatim
    ids = [m["tool_call_id"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert ids[0].startswith("id-" + str(root)) and len(ids[0]) > 300_000

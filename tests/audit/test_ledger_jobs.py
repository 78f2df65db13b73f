"""The audit ledger through scripted jobs (issue 18, acceptance 1; docs/design.md §13): every record type
and each derivation — read the offered file vs only list/search it, a range that misses the offered line,
write before read, the file changed between offer and read, the bound (257 calls), a failing sink."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from spotpatch_agent.audit import JobLedger, derive_summary, read_ledger
from spotpatch_agent.protocol.models import JobAuditResult, JobIdParams, TrustedConfig
from tests.audit._support import call, read, records_of, replace, run_audited_job, target
from tests.conftest import git, make_repo
from tests.support.annotations import annotation

CARD = "".join(f"export const line{n} = {n};\n" for n in range(1, 41))
APP = 'export const App = () => <button className="a">Go</button>;\n'
FILES = {"src/App.tsx": APP, "src/Card.tsx": CARD, ".gitignore": "node_modules\n"}
DONE = {"text": "Done.", "finishReason": "stop"}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", FILES)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def end_of(audit: dict) -> dict:
    (end,) = [r for r in audit["records"] if r["type"] == "job_end"]
    return end


def assert_recomputes(audit: dict) -> None:
    """job_end equals the summary derived from the records before it; the wire model round-trips."""
    records = audit["records"]
    i = next(i for i, r in enumerate(records) if r["type"] == "job_end")
    end = records[i]
    derived = derive_summary(records[:i], outcome=end["outcome"], error_code=end.get("errorCode"),
                             audit_write_failed=end["auditWriteFailed"])
    assert {k: v for k, v in end.items() if k not in ("seq", "recordedAtMs", "type")} == derived
    assert JobAuditResult.model_validate(audit).dump() == audit
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))


@pytest.mark.anyio
async def test_read_the_offered_file_vs_only_list_and_search(root, monkeypatch) -> None:
    turns = [
        {"toolCalls": [read("r1", "src/App.tsx"), call("l1", "list_files", {"glob": "src/**", "maxResults": None}),
                       call("s1", "search_text", {"query": "line30", "glob": "src/*.tsx", "maxResults": 5})]},
        {"toolCalls": [replace("w1", "src/App.tsx", ">Go<", ">Start<")]},
        DONE,
    ]
    ran = await run_audited_job(root, turns, monkeypatch,
                                annotation(target(1, "src/App.tsx"), target(2, "src/Card.tsx", 30)))
    assert ran.status == "awaiting-review"
    start = records_of(ran, "job_start")[0]
    assert [t["path"] for t in start["targets"]] == ["src/App.tsx", "src/Card.tsx"]
    assert start["targets"][1]["sha256"] == sha(CARD) and start["targets"][1]["line"] == 30
    assert start["targets"][0]["instructionChars"] == len("Change it")
    assert start["targets"][0]["instructionSha256"] == sha("Change it")
    assert start["mode"] == "review" and start["localChangesIncluded"] is False and start["limits"]["maxTurns"] == 24
    t1, t2 = ran.audit["summary"]["targets"]
    assert t1 == {"index": 1, "path": "src/App.tsx", "line": 1, "read": True, "lineCovered": True,
                  "readBeforeFirstWrite": True, "contentSha256Match": True, "lines": {"start": 1, "end": 1}}
    assert t2["read"] is False and t2["lineCovered"] is False and t2["readBeforeFirstWrite"] is False
    assert "contentSha256Match" not in t2
    # Read-only calls of one turn run concurrently: they are recorded as they complete.
    calls = {c["callId"]: c for c in records_of(ran, "tool_call")}
    assert [c["tool"] for c in records_of(ran, "tool_call")][-1] == "replace_text"
    assert calls["l1"]["glob"] == "src/**" and calls["s1"]["query"] == "line30" and calls["s1"]["maxResults"] == 5
    assert calls["s1"]["glob"] == "src/*.tsx" and calls["r1"]["tool"] == "read_file"
    assert calls["w1"]["oldTextChars"] == 4 and calls["w1"]["newTextSha256"] == sha(">Start<")
    assert ran.audit["summary"]["firstWrite"] == {"seq": calls["w1"]["seq"], "tool": "replace_text",
                                                  "path": "src/App.tsx"}
    assert ran.audit["summary"]["toolCounts"] == {"read_file": 1, "list_files": 1, "search_text": 1, "replace_text": 1}
    assert_recomputes(ran.audit)


@pytest.mark.anyio
async def test_a_read_range_that_misses_the_offered_line(root, monkeypatch) -> None:
    turns = [{"toolCalls": [read("r1", "src/Card.tsx", 1, 10)]},
             {"toolCalls": [replace("w1", "src/Card.tsx", "line30 = 30", "line30 = 31")]}, DONE]
    ran = await run_audited_job(root, turns, monkeypatch, annotation(target(1, "src/Card.tsx", 30)))
    (t,) = ran.audit["summary"]["targets"]
    assert t["read"] is True and t["lineCovered"] is False and t["lines"] == {"start": 1, "end": 10}
    assert t["readBeforeFirstWrite"] is True and t["contentSha256Match"] is True
    assert records_of(ran, "tool_call")[0]["startLine"] == 1 and records_of(ran, "tool_call")[0]["endLine"] == 10
    assert_recomputes(ran.audit)


@pytest.mark.anyio
async def test_write_before_read(root, monkeypatch) -> None:
    turns = [{"toolCalls": [replace("w1", "src/Card.tsx", "line30 = 30", "line30 = 31")]},
             {"toolCalls": [read("r1", "src/Card.tsx", 25, 35)]}, DONE]
    ran = await run_audited_job(root, turns, monkeypatch, annotation(target(1, "src/Card.tsx", 30)))
    (t,) = ran.audit["summary"]["targets"]
    assert t["read"] is True and t["lineCovered"] is True and t["readBeforeFirstWrite"] is False
    assert t["contentSha256Match"] is False  # it read the bytes it had written, not those it was offered
    first = ran.audit["summary"]["firstWrite"]
    assert first["tool"] == "replace_text" and first["seq"] < records_of(ran, "tool_call")[1]["seq"]
    assert_recomputes(ran.audit)


@pytest.mark.anyio
async def test_the_file_changed_between_offer_and_read(root, monkeypatch) -> None:
    # Between the offer (job start) and the read, something other than the file tools changes the file:
    # a project check that rewrites it (the only way a job's worktree changes outside the tools).
    rewrite = "import pathlib; p = pathlib.Path('src/Card.tsx'); p.write_text(p.read_text().replace('= 5;', '= 55;'))"
    check = {"id": "gen", "name": "Generate", "command": sys.executable, "args": ["-c", rewrite], "required": False}
    turns = [{"toolCalls": [call("k1", "run_check", {"checkId": "gen"})]},
             {"toolCalls": [read("r1", "src/Card.tsx")]}, DONE]
    ran = await run_audited_job(root, turns, monkeypatch, annotation(target(1, "src/Card.tsx", 30)), checks=[check])
    (t,) = ran.audit["summary"]["targets"]
    assert t["read"] is True and t["lineCovered"] is True and t["contentSha256Match"] is False
    offered = records_of(ran, "job_start")[0]["targets"][0]["sha256"]
    served = [c for c in records_of(ran, "tool_call") if c["tool"] == "read_file"][0]["contentSha256"]
    assert offered == sha(CARD) and served == sha(CARD.replace("= 5;", "= 55;"))
    assert "firstWrite" not in ran.audit["summary"]  # a check's writes are not the agent's file writes
    assert_recomputes(ran.audit)


def test_257_calls_are_truncated_with_counts_kept() -> None:
    ledger = JobLedger("job_0000000000000001")
    ledger.record_job_start(jobId="job_0000000000000001", targets=[])
    for n in range(257):
        ledger.record_tool_call(turn=1 + n // 10, call_id=f"c{n}", name="read_file" if n % 2 else "list_files",
                                arguments_json='{"path": "src/App.tsx", "startLine": null, "endLine": null}',
                                ok=n % 3 != 0, code=None if n % 3 else "TOOL_PATH_DENIED", retryable=True,
                                duration_ms=1, output="src/App.tsx (lines 1-1 of 1)", content_sha256=None)
    ledger.finish(outcome="awaiting-review")
    records = ledger.records
    assert len(records) == 258  # job_start + 255 calls + truncated + job_end
    truncated = records[256]
    assert truncated["type"] == "truncated" and truncated["dropped"] == 2
    summary = ledger.summary(status="awaiting-review")
    assert summary["truncated"] is True and summary["droppedRecords"] == 2
    assert sum(summary["toolCounts"].values()) == 257  # counts kept for the dropped calls
    assert summary["failedCalls"] == {"TOOL_PATH_DENIED": sum(1 for n in range(257) if n % 3 == 0)}
    assert records[-1]["type"] == "job_end" and records[-1]["truncated"] is True


@pytest.mark.anyio
async def test_a_failing_sink_never_fails_the_job(root, monkeypatch) -> None:
    # Root ignores a directory's read-only bits, so the sink is made unwritable another way that holds for
    # every user: the ledger directory's place is taken by a read-only regular file.
    spot = root / ".git" / "spotpatch"
    spot.mkdir()
    (spot / "audit").write_text("not a directory")
    (spot / "audit").chmod(0o400)
    spot.chmod(0o500)
    turns = [{"toolCalls": [read("r1", "src/App.tsx")]},
             {"toolCalls": [replace("w1", "src/App.tsx", ">Go<", ">Start<")]}, DONE]
    try:
        ran = await run_audited_job(root, turns, monkeypatch, annotation(target(1, "src/App.tsx")),
                                    audit={"persist": True, "keep": 5})
    finally:
        spot.chmod(0o700)
    assert ran.status == "awaiting-review"
    assert ran.audit["summary"]["auditWriteFailed"] is True
    assert end_of(ran.audit)["auditWriteFailed"] is True
    assert (spot / "audit").read_text() == "not a directory"


@pytest.mark.anyio
async def test_checks_limits_and_persisted_ledger(root, monkeypatch) -> None:
    check = {"id": "lint", "name": "Lint", "command": sys.executable, "args": ["-c", "print('ok')"]}
    turns = [{"toolCalls": [read("r1", "src/App.tsx")]},
             {"toolCalls": [replace("w1", "src/App.tsx", ">Go<", ">Start<"),
                            call("k1", "run_check", {"checkId": "lint"})]},
             {"toolCalls": [read("r2", "src/Card.tsx")]}]  # then the turn limit
    ran = await run_audited_job(root, turns, monkeypatch, annotation(target(1, "src/App.tsx")),
                                audit={"persist": True, "keep": 5}, checks=[check], maxTurns=3)
    assert ran.status == "failed"
    end = end_of(ran.audit)
    assert end["outcome"] == "failed" and end["errorCode"] == "LIMIT_EXCEEDED" and end["limitsHit"] == ["maxTurns"]
    assert records_of(ran, "limit") == [{**records_of(ran, "limit")[0], "limit": "maxTurns"}]
    assert [c["checkId"] for c in records_of(ran, "tool_call") if c["tool"] == "run_check"] == ["lint"]
    path = root / ".git" / "spotpatch" / "audit" / f"{ran.job_id}.jsonl"
    persisted, skipped = read_ledger(path)
    assert skipped == 0 and persisted == ran.audit["records"]
    assert git(root, "status", "--porcelain") == ""  # never in the working tree
    assert_recomputes(ran.audit)


@pytest.mark.anyio
async def test_final_checks_apply_revert_and_suggestion_after_job_end(root, monkeypatch) -> None:
    check = {"id": "lint", "name": "Lint", "command": sys.executable, "args": ["-c", "raise SystemExit(0)"]}
    turns = [{"toolCalls": [read("r1", "src/App.tsx")]},
             {"toolCalls": [replace("w1", "src/App.tsx", ">Go<", ">Start<")]}, DONE]

    async def apply_revert_suggest(service, job_id: str) -> None:
        await service.job_apply(JobIdParams(job_id=job_id))
        await service.job_revert(JobIdParams(job_id=job_id))
        # How the suggestion lane reaches the ledger: the job object's ``ledger``.
        service._job(job_id).ledger.record_suggestion(
            excerpts=[{"path": "src/App.tsx", "startLine": 1, "endLine": 1, "sha256": sha(APP)},
                      {"path": "/etc/passwd", "startLine": 1, "endLine": 2, "sha256": "x"}],
            breaker="none", verified=2, unverified=1, outcome="ok")
        await service._job(job_id).ledger.persist()  # as job/suggest does, off the event loop

    ran = await run_audited_job(root, turns, monkeypatch, annotation(target(1, "src/App.tsx")),
                                audit={"persist": True, "keep": 5}, checks=[check], after=apply_revert_suggest)
    assert ran.status == "reverted"
    kinds = [r["type"] for r in ran.audit["records"]]
    assert kinds[-4:] == ["job_end", "apply", "revert", "suggestion"]
    assert kinds.index("check") < kinds.index("job_end")
    check_rec = records_of(ran, "check")[0]
    assert check_rec["checkId"] == "lint" and check_rec["status"] == "passed" and check_rec["exitCode"] == 0
    assert records_of(ran, "apply")[0] == {**records_of(ran, "apply")[0], "status": "applied", "fileCount": 1}
    assert records_of(ran, "revert")[0]["status"] == "reverted"
    suggestion = records_of(ran, "suggestion")[0]
    assert suggestion["excerpts"] == [{"path": "src/App.tsx", "startLine": 1, "endLine": 1, "sha256": sha(APP)},
                                      {"pathRejected": True, "startLine": 1, "endLine": 2}]
    summary = ran.audit["summary"]
    assert summary["suggestions"] == [{"outcome": "ok", "breaker": "none", "verified": 2, "unverified": 1}]
    assert [a["type"] for a in summary["applies"]] == ["apply", "revert"]
    end = end_of(ran.audit)  # job_end is unchanged; the live summary differs only in applies/suggestions
    assert {k: v for k, v in summary.items() if k not in ("applies", "suggestions")} == \
        {k: v for k, v in end.items() if k not in ("applies", "suggestions", "seq", "recordedAtMs", "type")}
    persisted, _ = read_ledger(root / ".git" / "spotpatch" / "audit" / f"{ran.job_id}.jsonl")
    assert persisted == ran.audit["records"]  # the records after job_end were appended too
    assert_recomputes(ran.audit)


@pytest.mark.anyio
async def test_retention_keeps_the_newest_and_the_reader_tolerates_a_torn_line(root, monkeypatch) -> None:
    ids = []
    for _ in range(3):
        turns = [{"toolCalls": [read("r1", "src/App.tsx")]},
                 {"toolCalls": [replace("w1", "src/App.tsx", ">Go<", ">Start<")]}, DONE]
        ran = await run_audited_job(root, turns, monkeypatch, annotation(target(1, "src/App.tsx")),
                                    audit={"persist": True, "keep": 2})
        ids.append(ran.job_id)
    directory = root / ".git" / "spotpatch" / "audit"
    assert sorted(p.name for p in directory.iterdir()) == sorted(f"{i}.jsonl" for i in ids[1:])
    path = directory / f"{ids[-1]}.jsonl"
    whole, _ = read_ledger(path)
    with path.open("ab") as handle:
        handle.write(b'{"seq": 99, "type": "tool_ca')  # a crash mid-append
    records, skipped = read_ledger(path)
    assert records == whole and skipped == 1
    cli = run_cli("audit", ids[-1], "--project", str(root))
    assert "Target 1: read `src/App.tsx` lines 1–1 before the first write" in cli.stdout
    assert "1 unreadable line(s) skipped" in cli.stdout
    listed = run_cli("audit", "--json", "--project", str(root))
    assert [r["jobId"] for r in json.loads(listed.stdout)["ledgers"]] == [ids[2], ids[1]]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """``spotpatch-agent ARGS`` in a child process (its real entry point, stdout captured)."""
    code = "import sys; from spotpatch_agent.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)


def test_audit_config_is_validated() -> None:
    assert TrustedConfig.model_validate({}).audit.persist is False
    assert TrustedConfig.model_validate({"audit": {"persist": True, "keep": 3}}).audit.keep == 3
    for bad in ({"persist": "yes"}, {"keep": 0}, {"keep": 10_001}, {"keep": 2.5}, {"path": "/tmp"}):
        with pytest.raises(ValueError):
            TrustedConfig.model_validate({"audit": bad})


@pytest.mark.anyio
async def test_a_stalled_sink_never_holds_up_the_job(root, monkeypatch) -> None:
    import threading
    import time

    from spotpatch_agent.audit import ledger as ledger_module
    from spotpatch_agent.audit import sink

    release = threading.Event()

    def stalled(_path, _records) -> bool:  # a disk that never answers (NFS gone, …)
        release.wait(30)
        return False

    monkeypatch.setattr(sink, "append", stalled)
    monkeypatch.setattr(ledger_module, "WRITE_TIMEOUT_SEC", 0.5)
    turns = [{"toolCalls": [read("r1", "src/App.tsx")]},
             {"toolCalls": [replace("w1", "src/App.tsx", ">Go<", ">Start<")]}, DONE]
    started = time.monotonic()
    try:
        ran = await run_audited_job(root, turns, monkeypatch, annotation(target(1, "src/App.tsx")),
                                    audit={"persist": True, "keep": 5})
    finally:
        release.set()
    assert ran.status == "awaiting-review" and time.monotonic() - started < 20
    statuses = [e["status"] for e in ran.events if e["kind"] == "status"]
    assert statuses[-1] == "awaiting-review"  # the last status went out; the write came after it
    assert ran.audit["summary"]["auditWriteFailed"] is True and end_of(ran.audit)["auditWriteFailed"] is True


def test_limit_records_name_the_limit_from_the_loop_messages() -> None:
    from spotpatch_agent.engine.job import limit_name

    assert limit_name("The model used all 24 turns without finishing.") == "maxTurns"
    assert limit_name("The model asked for more than 80 tool calls.") == "maxToolCalls"
    assert limit_name("The model sent the same failing read_file call 3 times (identical arguments, files "
                      "unchanged) … instead of using up its turns (maxRepeatedFailedCalls).") \
        == "maxRepeatedFailedCalls"
    assert limit_name("The model sent invalid arguments for read_file again after its one correction; the job "
                      "stops") == "argumentCorrections"
    assert limit_name("The read_file tool took longer than 30 s.") == "toolTimeoutSec"
    assert limit_name("The model sent tool-call arguments over the size limit.") == "argumentBytes"
    assert limit_name("something new") == "other"


@pytest.mark.anyio
async def test_a_job_that_fails_before_its_worktree_still_has_start_and_end(root, monkeypatch) -> None:
    monkeypatch.setenv("SPOTPATCH_SIMULATE_NO_SANDBOX", "1")  # checks must run confined, and cannot here
    check = {"id": "lint", "name": "Lint", "command": sys.executable, "args": ["-c", "pass"]}
    ran = await run_audited_job(root, [], monkeypatch, annotation(target(1, "src/App.tsx")), checks=[check],
                                sandbox="required")
    assert ran.status == "failed"
    kinds = [r["type"] for r in ran.audit["records"]]
    assert kinds == ["job_start", "job_end"]
    assert records_of(ran, "job_start")[0]["targets"][0]["hashSkipped"] == "not-started"
    end = end_of(ran.audit)
    assert end["outcome"] == "failed" and end["errorCode"] == "CHECK_FAILED" and end["toolCounts"] == {}
    assert_recomputes(ran.audit)

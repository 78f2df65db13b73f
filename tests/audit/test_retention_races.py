"""Retention of persisted ledgers against what happens after a job ended (docs/design.md §13): a ledger
that retention removed is never written again holding only its later records (an Apply of an older job
reviewed after newer ones ended), and an odd entry in the directory never stops retention nor is touched."""

from __future__ import annotations

import os

import pytest

from spotpatch_agent.audit import read_ledger
from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.protocol.models import JobCreateParams, JobIdParams
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.audit._support import KEY_ENV, config, read, replace, target
from tests.conftest import make_repo
from tests.support.annotations import annotation

FILES = {"src/App.tsx": 'export const App = () => <button className="a">Go</button>;\n',
         "src/Card.tsx": "export const line1 = 1;\n", ".gitignore": "node_modules\n"}
DONE = {"text": "Done.", "finishReason": "stop"}


def edit(path: str, old: str, new: str) -> list[dict]:
    return [{"toolCalls": [read("r1", path)]}, {"toolCalls": [replace("w1", path, old, new)]}, DONE]


@pytest.mark.anyio
@pytest.mark.parametrize("planted", [False, True], ids=["clean-dir", "dangling-symlink"])
async def test_an_apply_after_retention_removed_the_ledger_does_not_bring_back_a_fragment(tmp_path, monkeypatch,
                                                                                         planted: bool):
    monkeypatch.setenv(KEY_ENV, "sk-test-0123456789abcdef")
    root = make_repo(tmp_path / "repo", FILES)
    directory = root / ".git" / "spotpatch" / "audit"
    directory.mkdir(parents=True)
    odd = ["job_00000000000000ff.jsonl"] if planted else []
    if planted:
        os.symlink(tmp_path / "nowhere", directory / odd[0])  # dangling, under a ledger's name
    script = edit("src/App.tsx", ">Go<", ">Start<") + edit("src/Card.tsx", "line1 = 1", "line1 = 2")
    with ScriptedProviderServer(script) as server:
        service = EngineService(send_event=lambda e: None)
        async with service.running():
            await service.configure(root, config(server, audit={"persist": True, "keep": 1}))
            ids = []
            for path in ("src/App.tsx", "src/Card.tsx"):
                snap = await service.job_create(JobCreateParams.model_validate(
                    {"annotation": annotation(target(1, path)), "modelProfileId": "m"}))
                await service.wait_job(snap.job_id)
                assert (await service.job_get(JobIdParams(job_id=snap.job_id))).status == "awaiting-review"
                ids.append(snap.job_id)
            first, second = ids
            assert sorted(p.name for p in directory.iterdir()) == sorted(
                [f"{second}.jsonl", *odd])  # keep 1: the first job's file is gone
            await service.job_apply(JobIdParams(job_id=first))  # the user reviews the older job now
            audit = (await service.job_audit(JobIdParams(job_id=first))).dump()
    assert [r["type"] for r in audit["records"]][-2:] == ["job_end", "apply"]  # complete in memory
    assert sorted(p.name for p in directory.iterdir()) == sorted([f"{second}.jsonl", *odd])
    assert all(os.path.islink(directory / name) for name in odd)  # never followed, never removed
    records, skipped = read_ledger(directory / f"{second}.jsonl")
    assert [r["type"] for r in records] == ["job_start", "tool_call", "tool_call", "job_end"] and skipped == 0


@pytest.mark.anyio
async def test_a_stalled_disk_after_the_job_never_blocks_the_engine(tmp_path, monkeypatch):
    """An Apply's (or a suggestion run's) ledger line on a disk that stalls: the engine keeps serving
    meanwhile (its event loop is never blocked), the Apply returns within the write bound, and the
    summary says ``auditWriteFailed``."""
    import threading
    import time

    import anyio

    from spotpatch_agent.audit import ledger as ledger_module
    from spotpatch_agent.audit import sink
    from tests.audit._support import run_audited_job

    real = sink.append
    stalled, release = threading.Event(), threading.Event()

    def append(path, records, **kwargs) -> bool:
        if stalled.is_set():
            release.wait(30)  # a disk that stops answering once the job has been written
            return False
        return real(path, records, **kwargs)

    monkeypatch.setattr(sink, "append", append)
    monkeypatch.setattr(ledger_module, "WRITE_TIMEOUT_SEC", 1.0)
    root = make_repo(tmp_path / "repo", FILES)
    seen: dict[str, float] = {}

    async def apply_while_polling(service, job_id: str) -> None:
        stalled.set()
        answered = 0

        async def poll() -> None:
            nonlocal answered
            while True:
                await service.job_get(JobIdParams(job_id=job_id))
                answered += 1
                await anyio.sleep(0.05)

        async with anyio.create_task_group() as tg:
            tg.start_soon(poll)
            started = time.monotonic()
            await service.job_apply(JobIdParams(job_id=job_id))
            seen["apply"] = time.monotonic() - started
            seen["answered"] = answered
            tg.cancel_scope.cancel()

    try:
        ran = await run_audited_job(root, edit("src/App.tsx", ">Go<", ">Start<"), monkeypatch,
                                    annotation(target(1, "src/App.tsx")), audit={"persist": True, "keep": 5},
                                    after=apply_while_polling)
    finally:
        release.set()
    assert ran.status == "applied"
    assert seen["apply"] < 10 and seen["answered"] >= 5  # other requests were served during the write
    assert ran.audit["summary"]["auditWriteFailed"] is True


STALLED_EXIT = r"""
import sys, threading, anyio
from pathlib import Path
from spotpatch_agent.audit import ledger as ledger_module, sink
sink.append = lambda *a, **k: threading.Event().wait()  # a disk that never answers
ledger_module.WRITE_TIMEOUT_SEC = 0.2

async def main():
    ledger = ledger_module.JobLedger("job_0123456789abcdef", persist_dir=Path(sys.argv[1]))
    ledger.record_limit(limit="maxTurns")
    ledger.finish(outcome="failed")
    await ledger.flush()
    assert ledger.write_failed
    print("flushed", flush=True)

anyio.run(main)
"""


def test_the_engine_process_exits_even_when_the_ledger_disk_never_answers(tmp_path) -> None:
    """A write abandoned at the bound must not keep the engine's process alive at exit (a thread
    stuck on a dead mount is never joined)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", STALLED_EXIT, str(tmp_path / "audit")], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "flushed" in done.stdout, done.stderr

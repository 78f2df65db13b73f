"""The audit ledger's cost on the scripted demo job (issue 18: < 2 % of a job's engine time).

``python -m tests.bench.bench_audit [--jobs N] [--strict]``: runs the offline demo's scripted job
(``spotpatch_agent/demo/script.py``) ``--jobs`` times through the real engine service, the real Chat adapter
and a local scripted provider, with ``audit: {persist: true}`` (the costlier setting: JSONL + fsync).
Every call into the job's ledger is timed: the records and the ``job_end`` derivation (on the job's path)
and the JSONL write (``flush``, after the job's last status); the figure is their time as a share of the
job's engine time (``job/create`` → the job's run ended, flush included). Prints the median and the worst
job; ``--strict`` exits 1 when the median share is 2 % or more.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
from functools import wraps
from pathlib import Path

import anyio

from spotpatch_agent.audit.ledger import JobLedger
from spotpatch_agent.demo.runner import _config, make_demo_project
from spotpatch_agent.demo.script import DEMO_TARGETS, demo_turns
from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.protocol.models import JobCreateParams, JobIdParams, TrustedConfig
from spotpatch_agent.provider.scripted import ScriptedProviderServer

TARGET = 0.02
KEY_ENV = "SPOTPATCH_BENCH_AUDIT_KEY"


class _Meter:
    """Wall time spent inside the ledger's methods (sync and async), per job id."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}  # records and job_end: on the job's path
        self.flushed: dict[str, float] = {}  # the JSONL write, after the job's last status

    def install(self) -> None:
        for name in ("record_job_start", "record_tool_call", "record_check", "record_limit", "record_apply",
                     "finish"):
            setattr(JobLedger, name, self._sync(getattr(JobLedger, name)))
        JobLedger.flush = self._async(JobLedger.flush)  # type: ignore[method-assign]

    def _sync(self, fn):
        @wraps(fn)
        def timed(ledger, *args, **kwargs):
            started = time.perf_counter()
            try:
                return fn(ledger, *args, **kwargs)
            finally:
                self.spent[ledger.job_id] = self.spent.get(ledger.job_id, 0.0) + time.perf_counter() - started
        return timed

    def _async(self, fn):
        @wraps(fn)
        async def timed(ledger, *args, **kwargs):
            started = time.perf_counter()
            try:
                return await fn(ledger, *args, **kwargs)
            finally:
                self.flushed[ledger.job_id] = self.flushed.get(ledger.job_id, 0.0) + time.perf_counter() - started
        return timed


async def _run(jobs: int, project: Path, meter: _Meter) -> list[tuple[float, float, float]]:
    os.environ[KEY_ENV] = "sk-bench-" + secrets.token_hex(8)
    out: list[tuple[float, float]] = []
    with ScriptedProviderServer([]) as server:
        base = _config(server.base_url, KEY_ENV, "scripted-model").dump()
        config = TrustedConfig.model_validate({**base, "audit": {"persist": True, "keep": jobs + 1}})
        service = EngineService(send_event=lambda _e: None)
        async with service.running():
            await service.configure(project, config)
            annotation = {"annotationId": "bench", "pageUrl": "/", "targets": DEMO_TARGETS}
            for _ in range(jobs):
                server.add_turns(*demo_turns())
                started = time.perf_counter()
                snap = await service.job_create(JobCreateParams.model_validate(
                    {"annotation": annotation, "modelProfileId": "demo-model"}))
                await service.wait_job(snap.job_id)
                total = time.perf_counter() - started
                status = (await service.job_get(JobIdParams(job_id=snap.job_id))).status
                if status != "awaiting-review":
                    raise SystemExit(f"bench_audit: the demo job ended {status}")
                out.append((total, meter.spent.get(snap.job_id, 0.0), meter.flushed.get(snap.job_id, 0.0)))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_audit", description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=20, help="demo jobs to run (default 20; the first is a warm-up)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the median share is >= 2 %%")
    args = parser.parse_args(argv)
    meter = _Meter()
    meter.install()
    with tempfile.TemporaryDirectory(prefix="spotpatch-bench-audit-") as tmp:
        project = make_demo_project(Path(tmp) / "demo")
        runs = anyio.run(_run, args.jobs + 1, project, meter)[1:]
        files = len(list((project / ".git/spotpatch/audit").glob("job_*.jsonl")))
    on_path = [spent / total for total, spent, _ in runs]
    shares = [(spent + flushed) / total for total, spent, flushed in runs]
    median = statistics.median(shares)
    ms = lambda values: f"median {statistics.median(values) * 1000:7.2f} ms   worst {max(values) * 1000:.2f} ms"  # noqa: E731
    print(f"audit ledger on the scripted demo job ({len(runs)} jobs, persist on: {files} JSONL files written)")
    print(f"  job engine time               {ms([t for t, _, _ in runs])}")
    print(f"  ledger, on the job's path     {ms([s for _, s, _ in runs])}   (records, job_end)")
    print(f"  ledger, JSONL write + fsync   {ms([f for _, _, f in runs])}   (after the job's last status)")
    print(f"  share on the job's path       median {statistics.median(on_path) * 100:6.2f} %    "
          f"worst {max(on_path) * 100:.2f} %")
    verdict = "PASS" if median < TARGET else "FAIL"
    print(f"  share of the job, all         median {median * 100:6.2f} %    worst {max(shares) * 100:.2f} %   "
          f"target < {TARGET * 100:.0f} %  {verdict}")
    return 1 if args.strict and verdict == "FAIL" else 0


if __name__ == "__main__":
    sys.exit(main())

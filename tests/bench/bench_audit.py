"""The audit ledger's cost on the scripted demo job (issue 18: < 2 % of a job's engine time).

``python -m tests.bench.bench_audit [--jobs N] [--strict]``: runs the offline demo's scripted job
(``spotpatch_agent/demo/script.py``) ``--jobs`` times through the real engine service, the real Chat adapter
and a local scripted provider, with ``audit: {persist: true}`` (the costlier setting: JSONL + fsync).
Every call into the job's ledger (each record, the ``job_end`` derivation and the awaited write) is timed;
the figure is that time as a share of the job's engine time (``job/create`` → the job's run ended). Prints
the median and the worst job; ``--strict`` exits 1 when the median share is 2 % or more.
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
        self.spent: dict[str, float] = {}

    def install(self) -> None:
        for name in ("record_job_start", "record_tool_call", "record_check", "record_limit", "record_apply"):
            setattr(JobLedger, name, self._sync(getattr(JobLedger, name)))
        JobLedger.finish = self._async(JobLedger.finish)  # type: ignore[method-assign]

    def _add(self, ledger: JobLedger, seconds: float) -> None:
        self.spent[ledger.job_id] = self.spent.get(ledger.job_id, 0.0) + seconds

    def _sync(self, fn):
        @wraps(fn)
        def timed(ledger, *args, **kwargs):
            started = time.perf_counter()
            try:
                return fn(ledger, *args, **kwargs)
            finally:
                self._add(ledger, time.perf_counter() - started)
        return timed

    def _async(self, fn):
        @wraps(fn)
        async def timed(ledger, *args, **kwargs):
            started = time.perf_counter()
            try:
                return await fn(ledger, *args, **kwargs)
            finally:
                self._add(ledger, time.perf_counter() - started)
        return timed


async def _run(jobs: int, project: Path, meter: _Meter) -> list[tuple[float, float]]:
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
                out.append((total, meter.spent.get(snap.job_id, 0.0)))
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
    shares = [spent / total for total, spent in runs]
    median = statistics.median(shares)
    print(f"audit ledger on the scripted demo job ({len(runs)} jobs, persist on: {files} JSONL files written)")
    print(f"  job engine time     median {statistics.median(t for t, _ in runs) * 1000:8.1f} ms")
    print(f"  ledger time         median {statistics.median(s for _, s in runs) * 1000:8.2f} ms   "
          f"worst {max(s for _, s in runs) * 1000:.2f} ms")
    verdict = "PASS" if median < TARGET else "FAIL"
    print(f"  share of the job    median {median * 100:8.2f} %    worst {max(shares) * 100:.2f} %   "
          f"target < {TARGET * 100:.0f} %  {verdict}")
    return 1 if args.strict and verdict == "FAIL" else 0


if __name__ == "__main__":
    sys.exit(main())

"""What confining a check costs (issue 14; tests/bench/README.md "Check sandbox").

    .venv/bin/python -m tests.bench.bench_checks_sandbox            # about 10 s on 2 busy cores
    .venv/bin/python -m tests.bench.bench_checks_sandbox --strict   # exit 1 when a target is missed

Through :func:`spotpatch_agent.checks.runner.run_check_process`, the path every check takes, in a job-like
worktree under a project's ``node_modules/.spotpatch/`` (``HOME`` and the project hidden, as in a job):

- ``check start``: ``--runs`` runs of ``/bin/true`` confined and unconfined (``sandbox: "warn"`` with
  detection switched off by ``SPOTPATCH_SIMULATE_NO_SANDBOX``), alternating; medians; the added cost per
  check start must be < 50 ms;
- ``python -c pass`` the same (a real interpreter start: what most checks pay on top);
- ``detection, first call``: the one trial run (cached afterwards); ``detection, cached``: a later call,
  median of 1,000 (< 20 ms added per check after the first: the issue's budget).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from spotpatch_agent.checks import sandbox
from spotpatch_agent.checks.runner import run_check_process
from spotpatch_agent.protocol.models import CheckConfig, Limits

TARGET_ADDED_MS = 50.0
TARGET_CACHED_MS = 20.0


async def _timed(check: CheckConfig, cwd: Path, project: Path, *, confined: bool) -> float:
    if confined:
        os.environ.pop(sandbox.SIMULATE_ENV, None)
    else:
        os.environ[sandbox.SIMULATE_ENV] = "1"
    try:
        started = time.perf_counter()
        run = await run_check_process(check, cwd, Limits(), project_root=project, sandbox="warn")
        took = (time.perf_counter() - started) * 1000
    finally:
        os.environ.pop(sandbox.SIMULATE_ENV, None)
    assert run.ok, run.output
    assert run.sandbox == ("confined" if confined else "unconfined")
    return took


async def _bench(runs: int) -> list[tuple[str, float, float, str, bool]]:
    rows: list[tuple[str, float, float, str, bool]] = []
    sandbox.reset_detection()
    started = time.perf_counter()
    found = await sandbox.detect()
    first = (time.perf_counter() - started) * 1000
    if found.confinement is None:
        raise SystemExit(f"no check sandbox here: {found.reason}")
    cached = []
    for _ in range(1000):
        t0 = time.perf_counter()
        await sandbox.detect()
        cached.append((time.perf_counter() - t0) * 1000)
    with tempfile.TemporaryDirectory(prefix="spotpatch-bench-sandbox-") as tmp:
        project = Path(tmp) / "project"
        worktree = project / "node_modules" / ".spotpatch" / "job-bench"
        worktree.mkdir(parents=True)
        for label, check in (
            ("check start (/bin/true)", CheckConfig(id="t", name="T", command="/bin/true")),
            ("check start (python -c pass)",
             CheckConfig(id="p", name="P", command=sys.executable, args=["-c", "pass"])),
        ):
            await _timed(check, worktree, project, confined=True)  # warm the page cache for both
            await _timed(check, worktree, project, confined=False)
            confined, plain = [], []
            for _ in range(runs):
                confined.append(await _timed(check, worktree, project, confined=True))
                plain.append(await _timed(check, worktree, project, confined=False))
            added = statistics.median(confined) - statistics.median(plain)
            rows.append((label, statistics.median(confined), statistics.median(plain),
                         f"added {added:.1f} ms < {TARGET_ADDED_MS:.0f} ms", added < TARGET_ADDED_MS))
    rows.append(("detection, first call (trial run)", first, 0.0, "once per engine", True))
    med = statistics.median(cached)
    rows.append(("detection, cached (later checks)", med, 0.0, f"< {TARGET_CACHED_MS:.0f} ms", med < TARGET_CACHED_MS))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30, help="runs per side (default 30)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    rows = anyio.run(_bench, args.runs)
    print(f"{'metric':<36} {'confined':>12} {'unconfined':>12}  target")
    for label, value, base, target, ok in rows:
        baseline = f"{base:>9.2f} ms" if base else f"{'':>12}"
        print(f"{label:<36} {value:>9.2f} ms {baseline}  {target}  {'PASS' if ok else 'FAIL'}")
    return 1 if args.strict and not all(r[4] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())

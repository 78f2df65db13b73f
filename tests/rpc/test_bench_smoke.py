"""The benchmarks of tests/bench cannot rot: the entry point runs with tiny counts and prints every figure
(targets are not asserted here); the bench-only method exists only with ``SPOTPATCH_BENCH=1``; the lazy
imports that keep the cold start short stay lazy (issue 3)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import make_repo
from tests.engine_client import EngineProcess

REPO = Path(__file__).resolve().parents[2]
BENCH_METHOD = "$/spotpatch/benchEvents"


def test_bench_entry_point_prints_every_figure() -> None:
    env = {k: v for k, v in os.environ.items() if k != "SPOTPATCH_BENCH"}
    out = subprocess.run(  # noqa: PLW1510 - the exit code is asserted
        [sys.executable, "-m", "tests.bench", "--requests", "20", "--warmup", "5", "--events", "300",
         "--event-runs", "1", "--cold-runs", "1"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    for metric in ("job/list RTT p50", "job/list RTT p99", "job/event throughput", "cold start -> initialize"):
        assert metric in out.stdout
    for baseline in ("(echo)", "(echo frames)", "(python -c pass)", "(echo 1st reply)"):
        assert baseline in out.stdout
    assert "ratio" in out.stdout and ("PASS" in out.stdout or "FAIL" in out.stdout)


def test_bench_method_does_not_exist_without_the_variable(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    engine = EngineProcess(env={"SPOTPATCH_BENCH": ""})
    try:
        engine.initialize(root)
        reply = engine.request(BENCH_METHOD, {"count": 3})
        assert reply["error"]["code"] == -32601
        assert engine.events() == []
    finally:
        engine.stop()


def test_bench_method_emits_ordered_job_events_with_the_variable(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    engine = EngineProcess(env={"SPOTPATCH_BENCH": "1"})
    try:
        engine.initialize(root)
        result = engine.call(BENCH_METHOD, {"count": 120})
        events = engine.events(result["jobId"])  # the reply is queued after the last event
        assert [e["seq"] for e in events] == list(range(1, 121)) and result["lastSeq"] == 120
        assert {e["kind"] for e in events} == {"status", "activity"}
        assert engine.request(BENCH_METHOD, {"count": -1})["error"]["code"] == -32602
    finally:
        engine.stop()
    assert engine.stdout_faults == []


@pytest.mark.parametrize("module", ["spotpatch_agent.engine.job", "spotpatch_agent.engine.loop",
                                    "spotpatch_agent.tools", "wcmatch", "httpx", "spotpatch_agent.worktree.changes"])
def test_serving_does_not_import_the_job_runner(module: str) -> None:
    code = ("import sys, spotpatch_agent.cli, spotpatch_agent.engine.service, spotpatch_agent.rpc.server; "
            f"sys.exit({module!r} in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, check=False)
    assert run.returncode == 0, f"{module} is imported eagerly again"


def test_the_worktree_package_imports_no_module_of_its_own() -> None:
    # No facade: importing the package (as importing any one of its modules does) loads none of its modules.
    code = ("import sys, spotpatch_agent.worktree; "
            "sys.exit(sorted(m for m in sys.modules if m.startswith('spotpatch_agent.worktree.')) != [])")
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO, check=False).returncode == 0

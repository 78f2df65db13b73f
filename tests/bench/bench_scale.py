"""``python -m tests.bench.bench_scale``: what SpotPatch's own cost does as the repository grows (issue 17).

Generates repositories of 2,000 and 20,000 files (``--large`` adds 200,000) with ``tests/bench/scale_repo.py``
plus a near-empty one (6 files), and drives the real ``spotpatch-agent serve`` over stdio
(tests/engine_client.py) with a zero-latency scripted provider whose job is one ``replace_text`` call. Every
row is printed next to a baseline measured in the same run, with the ratio and the goal of issue 17:

- the per-tool rows (``list_files``/``search_text`` vs git, one ``replace_text``/``apply_patch`` call): from
  ``tests.bench.scale_tools.tool_rows`` when that module exists, else printed as "not measured";
- ``spawn -> initialize result``: process spawn → ``initialize`` result parsed, vs the same on the near-empty
  repository (goal < 1.2x);
- ``first job after initialize``: ``job/create`` sent right after ``initialize`` → the first tool call's
  ``activity started`` event, for the first engine start on the repository and for a restart, vs
  ``git worktree add --detach`` (goal ≤ 1.0x); ``later job start``: the same for later jobs (goal ≤ 0.2x);
- ``engine shutdown``: ``shutdown`` sent → process gone (``exit`` sent on the reply), goal ≤ 2 s — what the
  Vite plugin waits before it kills (docs/node-shim.md, *Stop*); baseline: the same on the near-empty repository;
- ``peak RSS`` (``VmHWM``, goal ≤ 120 MiB on 200k) and ``idle RSS after jobs`` vs idle RSS before them
  (goal ≤ 1.1x);
- ``cold start -> initialize (empty repo)`` vs ``python -c 'import pydantic, httpx, anyio, pylsp_jsonrpc'``
  (goal ≤ 1.5x).

Medians of ``--sessions`` engine sessions per size. ``--strict`` exits 1 when a goal is missed (2 when the
benchmark could not run). Not collected by pytest (conftest.py); test_bench_scale_smoke.py runs it tiny.
Usage and recorded figures: README.md, *Scale*.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from spotpatch_agent.provider.scripted import ScriptedProviderServer
from spotpatch_agent.worktree.pool import MIN_FILES
from spotpatch_agent.worktree.sweep import sweep_orphans
from tests.bench.bench_worktree import KEY_ENV, _config  # the same scripted provider config
from tests.bench.scale_repo import EDIT_NEEDLE, EDIT_PATH, make_repo
from tests.engine_client import EngineProcess

MIB = 1 << 20
IMPORTS = "import pydantic, httpx, anyio, pylsp_jsonrpc"
#: Goals of issue 17.
INIT_GOAL = 1.2
COLD_GOAL = 1.5
FIRST_JOB_GOAL = 1.0
LATER_JOB_GOAL = 0.2
SHUTDOWN_BUDGET_MS = 2000.0
IDLE_GOAL = 1.1
PEAK_GOAL_MIB = 120.0
PEAK_GOAL_FILES = 200_000


#: Both sides of every start-up figure may use and write ``.pyc`` files, as an installed engine does (a
#: ``PYTHONDONTWRITEBYTECODE`` in the caller's environment would make the engine recompile every start).
_PYC = {"PYTHONDONTWRITEBYTECODE": ""}


class BenchError(Exception):
    pass


@dataclass
class Row:
    metric: str
    value: float  # ms, MiB or a plain number (unit)
    baseline: float
    baseline_name: str
    goal: str
    ok: bool | None
    unit: str = "ms"

    @property
    def ratio(self) -> float:
        return self.value / self.baseline if self.baseline and not math.isnan(self.baseline) else float("nan")


@dataclass
class SizeSamples:
    init: list[float] = field(default_factory=list)
    first_job_fresh: list[float] = field(default_factory=list)
    first_job_restart: list[float] = field(default_factory=list)
    later_jobs: list[float] = field(default_factory=list)
    plain_add: list[float] = field(default_factory=list)
    shutdown: list[float] = field(default_factory=list)
    peak_rss: list[float] = field(default_factory=list)
    idle_before: list[float] = field(default_factory=list)
    idle_after: list[float] = field(default_factory=list)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _git(cwd: Path, *args: str) -> bytes:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True).stdout


def _annotation() -> dict[str, Any]:
    return {"annotationId": "scale", "pageUrl": "/", "targets": [
        {"index": 1, "instruction": "Change the heading.",
         "element": {"tagName": "h1", "text": "x", "attributes": {}}}]}


def _rss_mib(pid: int, field_name: str) -> float:
    """``VmRSS`` / ``VmHWM`` of ``pid`` in MiB (Linux ``/proc``; NaN elsewhere)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def _wait(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _pooled_worktrees(repo: Path) -> int:
    """Registered worktrees of ``repo`` besides the main one whose path is one of SpotPatch's job directories."""
    out = _git(repo, "worktree", "list", "--porcelain").decode("utf-8", "replace")
    paths = [line[len("worktree "):] for line in out.splitlines() if line.startswith("worktree ")]
    return sum(1 for p in paths[1:] if "/.spotpatch/job-" in p or "/spotpatch-worktrees/job-" in p)


class Session:
    """One engine process on ``repo``; times spawn → ``initialize`` result."""

    def __init__(self, repo: Path, server: ScriptedProviderServer) -> None:
        self.repo, self.server = repo, server
        started = time.perf_counter()
        self.eng = EngineProcess(env={KEY_ENV: "bench-key", "SPOTPATCH_BENCH": "", **_PYC})
        self.eng.initialize(repo, _config(server))
        self.init_s = time.perf_counter() - started

    def job(self) -> float:
        """One job to ``awaiting-review`` (then closed): seconds from ``job/create`` sent to ``activity started``."""
        self.server.add_turns(
            {"text": "Editing.", "toolCalls": [{"id": "call_1", "name": "replace_text", "arguments": {
                "path": EDIT_PATH, "oldText": EDIT_NEEDLE, "newText": EDIT_NEEDLE + "!"}}]},
            {"text": "Done.", "finishReason": "stop"})
        started = time.perf_counter()
        reply = self.eng.request("job/create", {"annotation": _annotation(), "modelProfileId": "m1"}, timeout=900)
        if "error" in reply:
            raise BenchError(f"job/create failed: {reply['error']}")
        job_id = reply["result"]["jobId"]
        self.eng.wait_for(lambda m: m.get("method") == "job/event" and m["params"]["jobId"] == job_id
                          and m["params"]["kind"] == "activity" and m["params"].get("phase") == "started", 900)
        first_tool = time.perf_counter() - started
        final = self.eng.wait_status(job_id, {"awaiting-review", "failed", "cancelled"}, timeout=900)
        if final["status"] != "awaiting-review":
            raise BenchError(f"the job ended {final['status']}: {final.get('message')}")
        self.eng.call("job/close", {"jobId": job_id})
        return first_tool

    def shutdown(self) -> float:
        """``shutdown`` sent → process gone (``exit`` sent as soon as the reply came), in seconds."""
        started = time.perf_counter()
        try:
            self.eng.request("shutdown", timeout=120)
            self.eng.notify("exit")
            self.eng.proc.wait(120)
        except (TimeoutError, subprocess.TimeoutExpired, OSError) as exc:
            self.eng.kill()
            raise BenchError(f"the engine did not stop: {exc}") from None
        return time.perf_counter() - started


def _plain_add(repo: Path, scratch: Path, n: int) -> float:
    """Seconds of ``git worktree add --detach --quiet <dir> HEAD``; the worktree is then unregistered and its
    directory moved aside (deleted at the end of the run, untimed)."""
    target = scratch / f"plain-{repo.name}-{n}"
    started = time.perf_counter()
    _git(repo, "worktree", "add", "--detach", "--quiet", str(target), "HEAD")
    took = time.perf_counter() - started
    shutil.rmtree(target / ".git", ignore_errors=True)
    try:
        os.unlink(target / ".git")
    except OSError:
        pass
    _git(repo, "worktree", "prune")
    return took


def bench_size(repo: Path, files: int, args: argparse.Namespace, scratch: Path, out: Any) -> SizeSamples:
    s = SizeSamples()
    pooled = files >= MIN_FILES  # the pool's ``auto`` mode keeps a warm worktree from this size on

    def settle() -> None:  # the warm worktree, when the pool keeps one, is ready (or recycled)
        if pooled and not _wait(lambda: _pooled_worktrees(repo) >= 1, 600):
            raise BenchError("the warm worktree never appeared")
        time.sleep(0.5)

    with ScriptedProviderServer() as server:
        for n in range(args.sessions):
            s.plain_add.append(_plain_add(repo, scratch, len(s.plain_add)))
            session = Session(repo, server)
            try:
                s.init.append(session.init_s)
                if n == 0:  # settle: the warm worktree (when the pool is on) is ready, then the idle RSS
                    first = session.job()
                    s.first_job_fresh.append(first)
                    settle()
                    s.idle_before.append(_rss_mib(session.eng.proc.pid, "VmRSS"))
                    for _ in range(args.later_jobs):
                        s.plain_add.append(_plain_add(repo, scratch, len(s.plain_add)))
                        s.later_jobs.append(session.job())
                    settle()
                    s.idle_after.append(_rss_mib(session.eng.proc.pid, "VmRSS"))
                else:
                    s.first_job_restart.append(session.job())
                    settle()
                s.peak_rss.append(_rss_mib(session.eng.proc.pid, "VmHWM"))
                s.shutdown.append(session.shutdown())
            except BaseException:
                print(session.eng.all_output()[-3000:], file=sys.stderr)
                session.eng.kill()
                raise
        print(f"  {files} files: init {_median(s.init) * 1000:.0f} ms, first job {s.first_job_fresh[0] * 1000:.0f} ms, "
              f"plain add {_median(s.plain_add) * 1000:.0f} ms, shutdown {_median(s.shutdown) * 1000:.0f} ms",
              file=out)
        out.flush()
    return s


def cold_start(repo: Path, runs: int) -> tuple[float, float]:
    """Medians (s) of spawn → ``initialize`` result on ``repo`` and of ``python -c 'import …'``, alternating."""
    engine, imports = [], []
    with ScriptedProviderServer() as server:
        for _ in range(runs):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", IMPORTS], check=True, env={**os.environ, **_PYC})
            imports.append(time.perf_counter() - started)
            session = Session(repo, server)
            engine.append(session.init_s)
            session.shutdown()
    return _median(engine), _median(imports)


def tool_rows_for(repo: Path, label: str) -> list[dict[str, Any]] | None:
    """The other half's rows (tests/bench/scale_tools.py), or None when that module is not there."""
    try:
        module = importlib.import_module("tests.bench.scale_tools")
    except ModuleNotFoundError:
        return None
    try:
        return module.tool_rows(repo, label)
    except Exception as exc:  # noqa: BLE001 - the other rows still count; this one is reported as failed
        print(f"  tool rows [{label}] failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None


def build_rows(label: str, files: int, s: SizeSamples, empty: SizeSamples) -> list[Row]:
    ms = 1000
    add = _median(s.plain_add) * ms
    rows = [
        Row(f"spawn -> initialize result [{label}]", _median(s.init) * ms, _median(empty.init) * ms,
            "same, near-empty repo", f"<{INIT_GOAL:g}x", _median(s.init) < INIT_GOAL * _median(empty.init)),
        Row(f"first job after initialize, first start [{label}]", _median(s.first_job_fresh) * ms, add,
            "git worktree add --detach", f"<={FIRST_JOB_GOAL:g}x",
            _median(s.first_job_fresh) * ms <= FIRST_JOB_GOAL * add),
        Row(f"first job after initialize, restart [{label}]", _median(s.first_job_restart) * ms, add,
            "git worktree add --detach", f"<={FIRST_JOB_GOAL:g}x",
            _median(s.first_job_restart) * ms <= FIRST_JOB_GOAL * add if s.first_job_restart else None),
        Row(f"later job start (warm pool) [{label}]", _median(s.later_jobs) * ms, add, "git worktree add --detach",
            f"<={LATER_JOB_GOAL:g}x", _median(s.later_jobs) * ms <= LATER_JOB_GOAL * add if s.later_jobs else None),
        Row(f"engine shutdown -> process gone [{label}]", max(s.shutdown) * ms, max(empty.shutdown) * ms,
            "same, near-empty repo", f"<={SHUTDOWN_BUDGET_MS:g} ms", max(s.shutdown) * ms <= SHUTDOWN_BUDGET_MS),
        Row(f"engine peak RSS [{label}]", max(s.peak_rss), max(empty.peak_rss), "same, near-empty repo",
            f"<={PEAK_GOAL_MIB:g} MiB" if files >= PEAK_GOAL_FILES else "-",
            max(s.peak_rss) <= PEAK_GOAL_MIB if files >= PEAK_GOAL_FILES else None, unit="MiB"),
        Row(f"idle RSS after jobs [{label}]", _median(s.idle_after), _median(s.idle_before), "idle RSS before them",
            f"<={IDLE_GOAL:g}x", _median(s.idle_after) <= IDLE_GOAL * _median(s.idle_before), unit="MiB"),
    ]
    return rows


def print_table(rows: list[Row], out: Any) -> list[str]:
    header = ("metric", "SpotPatch", "baseline", "ratio", "goal", "result")
    lines = [header]
    for r in rows:
        value = "not measured" if math.isnan(r.value) else f"{r.value:.1f} {r.unit}"
        base = "-" if math.isnan(r.baseline) else f"{r.baseline:.1f} {r.unit} ({r.baseline_name})"
        ratio = "-" if math.isnan(r.ratio) else f"{r.ratio:.2f}x"
        lines.append((r.metric, value, base, ratio, r.goal, "-" if r.ok is None else ("PASS" if r.ok else "FAIL")))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for n, line in enumerate(lines):
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip(), file=out)
        if n == 0:
            print("  ".join("-" * w for w in widths), file=out)
    missed = [r.metric for r in rows if r.ok is False]
    print(f"\n{len(missed)} goal(s) missed" + (f": {', '.join(missed)}" if missed else ""), file=out)
    return missed


#: Goal of issue 17 for the tool rows: ``list_files``/``search_text`` within 1.5x of git; one ``replace_text`` /
#: ``apply_patch`` within 1.5x of the same call on the smallest repository of the run.
TOOL_GOAL = 1.5


def _tool_table_rows(found: list[dict[str, Any]] | None, label: str, smallest: dict[str, float]) -> list[Row]:
    """Rows of ``tests.bench.scale_tools.tool_rows`` (``{"metric", "value_ms", "baseline_ms", "ratio"}``); a row
    without a baseline is compared with the same metric on the smallest size (``smallest``, filled here)."""
    if found is None:
        return [Row(f"{name} [{label}]", float("nan"), float("nan"), "", "-", None) for name in (
            "list_files '**' vs git ls-files", "search_text vs git grep -F -n", "one replace_text",
            "one apply_patch")]
    rows = []
    for item in found:
        name = str(item["metric"]).replace(f"({label})", "").strip()
        value = float(item["value_ms"])
        if item.get("baseline_ms") is not None:
            base, base_name = float(item["baseline_ms"]), "git"
        else:
            smallest.setdefault(name, value)
            base, base_name = smallest[name], "same call, smallest repo"
        rows.append(Row(f"{name} [{label}]", value, base, base_name, f"<={TOOL_GOAL:g}x",
                        value <= TOOL_GOAL * base))
    return rows


def _label(files: int) -> str:
    return f"{files // 1000}k" if files >= 1000 and files % 1000 == 0 else str(files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000,20000", help="comma-separated file counts (default 2000,20000)")
    parser.add_argument("--large", action="store_true", help="add the 200,000-file repository (minutes)")
    parser.add_argument("--sessions", type=int, default=3, help="engine sessions per size (default 3; >= 2)")
    parser.add_argument("--later-jobs", type=int, default=2, help="later jobs in the first session (default 2)")
    parser.add_argument("--cold-runs", type=int, default=7, help="cold starts on the near-empty repo (default 7)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a goal is missed")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    if args.large:
        sizes.append(200_000)
    if args.sessions < 2 or args.later_jobs < 1 or args.cold_runs < 1 or not sizes:
        parser.error("--sessions must be at least 2, --later-jobs and --cold-runs at least 1")
    out = sys.stdout
    print(f"SpotPatch scale benchmark (issue 17) — git {_git(Path.cwd(), 'version').decode().split()[-1]}, "
          f"{os.cpu_count()} CPUs, sizes {', '.join(_label(n) for n in sizes)}", file=out)
    scratch = Path(tempfile.mkdtemp(prefix="spotpatch-bench-scale-"))
    rows: list[Row] = []
    smallest: dict[str, float] = {}
    try:
        empty_repo = make_repo(scratch / "repo-empty", 0)
        cold, imports = cold_start(empty_repo, args.cold_runs)
        empty = bench_size(empty_repo, 6, args, scratch, out)
        for files in sizes:
            started = time.perf_counter()
            repo = make_repo(scratch / f"repo-{files}", files)
            print(f"  generated {files} files in {time.perf_counter() - started:.1f} s", file=out)
            rows += _tool_table_rows(tool_rows_for(repo, _label(files)), _label(files), smallest)
            rows += build_rows(_label(files), files, bench_size(repo, files, args, scratch, out), empty)
            anyio.run(sweep_orphans, repo)  # the warm worktree the last session parked (untimed)
            _git(repo, "worktree", "prune")
        rows.append(Row("cold start -> initialize [empty repo]", cold * 1000, imports * 1000,
                        f"python -c '{IMPORTS}'", f"<={COLD_GOAL:g}x", cold <= COLD_GOAL * imports))
        print(file=out)
        missed = print_table(rows, out)
    except (BenchError, TimeoutError, AssertionError, subprocess.CalledProcessError) as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())

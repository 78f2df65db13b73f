"""Engine lifecycle over a real subprocess (docs/design.md §3), complementing tests/rpc/test_serve_bad_frames.py
and the e2e EOF/parent-death tests: how fast the engine exits, with which code, and that it leaves no job
worktree and no process behind.

A running job is parked in one of two places: a stalled model turn (the provider keeps the stream open),
or a slow tool subprocess (a ``git`` wrapper on ``PATH`` turns the job's ``git grep`` into ``sleep 60``),
so that the engine really has a child process to take down. Orphans are caught with a subreaper: while a
test runs, this pytest process adopts whatever the engine leaves behind (:class:`Subreaper`).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.conftest import make_repo
from tests.protocol_robustness._support import (
    Engine,
    Subreaper,
    descendants,
    slow_git_path,
    slow_search_turn,
    still_alive,
    wait_for_descendant,
)
from tests.support.annotations import demo_annotation
from tests.support.serve import KEY_ENV, config_for, job_worktrees, wait_model_turn

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc and prctl")

STALLS = ["model-turn", "tool-subprocess"]
#: Seconds within which the engine exits after stdin EOF, ``exit`` or its parent's death, running job included.
#: Broken, it waits for that job instead: its stalled model stream (the provider's 60 s idle timeout) or its
#: hung ``git`` (``sleep 60``), 15x longer; or it runs out the 8 s stop budget (``EngineService.stop_all``),
#: 2x, which also leaves the job's worktree and processes behind (:func:`assert_nothing_left`). Measured
#: 0.3-1.6 s on a 2-core machine running the Python and Node suites side by side (a 1 s limit failed there).
EXIT_WITHIN = 4.0


def script(stall: str) -> list[dict]:
    return [{"stall": True}] if stall == "model-turn" else [slow_search_turn()]


def start_running_job(stall: str, project: Path, canary: str, tmp_path: Path, server: ScriptedProviderServer,
                      reaper: Subreaper, process_id: int | None = None) -> tuple[Engine, str]:
    eng = Engine(env={KEY_ENV: canary, "PATH": slow_git_path(tmp_path / "bin")})
    reaper.adopt_known(eng.proc.pid)
    eng.call("initialize", {"protocolVersion": "0.1", "processId": process_id or os.getpid(),
                            "clientInfo": {"name": "lifecycle"}, "projectRoot": str(project),
                            "config": config_for(server)})
    job_id = eng.call("job/create", {"annotation": demo_annotation(), "modelProfileId": "m1"})["jobId"]
    eng.wait_status(job_id, {"running"})
    if stall == "model-turn":
        wait_model_turn(server)
    else:
        wait_for_descendant(eng.proc.pid, "sleep")
    return eng, job_id


def assert_nothing_left(eng: Engine, project: Path, job_dir: Path, before: dict, reaper: Subreaper) -> None:
    assert job_worktrees(project) == [], "a job worktree is still registered"
    assert not job_dir.exists(), "the job worktree directory was left behind"
    assert still_alive(before) == {}, f"processes of the engine survived it: {still_alive(before)}"
    assert reaper.orphans() == {}, "the engine left orphan processes"
    assert eng.stdout_faults == []


@pytest.mark.parametrize("stall", STALLS)
def test_stdin_eof_with_a_running_job_exits_fast_and_leaves_nothing(
        stall: str, project: Path, canary: str, tmp_path: Path) -> None:
    with ScriptedProviderServer(script(stall)) as server, Subreaper() as reaper:
        eng, _ = start_running_job(stall, project, canary, tmp_path, server, reaper)
        try:
            [job_dir] = job_worktrees(project)
            before = descendants(eng.proc.pid)
            if stall == "tool-subprocess":
                assert "sleep" in {comm for _, comm in before.values()}  # the check below has teeth
            assert eng.proc.stdin is not None
            started = time.monotonic()
            eng.proc.stdin.close()
            code = eng.proc.wait(15)
            elapsed = time.monotonic() - started
            print(f"\n{stall}: exit {elapsed * 1000:.0f} ms after stdin EOF")
            assert code == 1, "EOF without shutdown is not a clean exit"
            assert elapsed < EXIT_WITHIN, f"the engine took {elapsed:.2f} s to exit after stdin EOF"
            assert_nothing_left(eng, project, job_dir, before, reaper)
        finally:
            eng.kill()


@pytest.mark.parametrize("stall", STALLS)
def test_parent_death_with_a_running_job_exits_fast_and_leaves_nothing(
        stall: str, project: Path, canary: str, tmp_path: Path) -> None:
    parent = subprocess.Popen(["sleep", "60"])
    try:
        with ScriptedProviderServer(script(stall)) as server, Subreaper() as reaper:
            reaper.adopt_known(parent.pid)
            eng, _ = start_running_job(stall, project, canary, tmp_path, server, reaper, process_id=parent.pid)
            try:
                [job_dir] = job_worktrees(project)
                before = descendants(eng.proc.pid)
                parent.kill()
                parent.wait()
                started = time.monotonic()
                code = eng.proc.wait(15)
                elapsed = time.monotonic() - started
                print(f"\n{stall}: exit {elapsed * 1000:.0f} ms after the parent died")
                assert code == 1
                assert elapsed < EXIT_WITHIN, f"the engine took {elapsed:.2f} s to exit after its parent died"
                assert_nothing_left(eng, project, job_dir, before, reaper)
            finally:
                eng.kill()
    finally:
        parent.kill()
        parent.wait()


def test_exit_without_shutdown_during_a_job_is_code_1_and_cleans_up(project: Path, canary: str, tmp_path: Path) -> None:
    with ScriptedProviderServer(script("tool-subprocess")) as server, Subreaper() as reaper:
        eng, _ = start_running_job("tool-subprocess", project, canary, tmp_path, server, reaper)
        try:
            [job_dir] = job_worktrees(project)
            before = descendants(eng.proc.pid)
            started = time.monotonic()
            eng.notify("exit")
            code = eng.proc.wait(15)
            assert code == 1
            assert time.monotonic() - started < EXIT_WITHIN
            assert_nothing_left(eng, project, job_dir, before, reaper)
        finally:
            eng.kill()


def test_shutdown_stops_the_job_before_it_answers_then_exit_is_code_0(
        project: Path, canary: str, tmp_path: Path) -> None:
    with ScriptedProviderServer(script("tool-subprocess")) as server, Subreaper() as reaper:
        eng, job_id = start_running_job("tool-subprocess", project, canary, tmp_path, server, reaper)
        try:
            [job_dir] = job_worktrees(project)
            before = descendants(eng.proc.pid)
            assert eng.request("shutdown", timeout=5)["result"] is None
            # By the time shutdown is answered the job was cancelled and cleaned up.
            assert job_worktrees(project) == [] and not job_dir.exists()
            assert still_alive(before) == {}
            # The job's last status event was written before the shutdown reply (frames keep their order).
            assert [e["status"] for e in eng.events(job_id) if e["kind"] == "status"][-1] == "cancelled"
            assert eng.request("job/get", {"jobId": job_id})["error"]["code"] == -32600
            started = time.monotonic()
            eng.notify("exit")
            assert eng.proc.wait(15) == 0
            assert time.monotonic() - started < EXIT_WITHIN
            assert_nothing_left(eng, project, job_dir, before, reaper)
        finally:
            eng.kill()


def test_stdin_eof_when_idle_is_code_1(tmp_path: Path) -> None:
    eng = Engine()
    try:
        eng.initialize(make_repo(tmp_path / "repo", {"a.txt": "a\n"}))
        assert eng.proc.stdin is not None
        started = time.monotonic()
        eng.proc.stdin.close()
        assert eng.proc.wait(15) == 1
        assert time.monotonic() - started < EXIT_WITHIN
    finally:
        eng.kill()
    assert eng.stdout_faults == []


def test_stdin_eof_in_the_middle_of_a_frame_exits_and_says_so(tmp_path: Path) -> None:
    eng = Engine()
    try:
        eng.initialize(make_repo(tmp_path / "repo", {"a.txt": "a\n"}))
        eng.send_raw(b'Content-Length: 100\r\n\r\n{"jsonrpc":')
        assert eng.proc.stdin is not None
        eng.proc.stdin.close()
        assert eng.proc.wait(15) == 1
    finally:
        eng.kill()
    assert "stdin closed in the middle of a frame" in eng.stderr_text()

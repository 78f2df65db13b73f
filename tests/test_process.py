"""``process.kill_processes_inside`` (the orphan sweep's process stop, docs/security.md §6): only this user's
processes whose working directory is inside the directory, or a ``git`` naming it in its arguments — not a
sibling whose name merely starts the same, not another program naming it — are killed, with their
descendants."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from spotpatch_agent.process import kill_processes_inside, processes_inside

pytestmark = pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="needs /proc (Linux)")


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2 :].split()[0] != b"Z"


def test_kills_what_works_inside_and_its_descendants_only(tmp_path: Path) -> None:
    inside, sibling = tmp_path / "job-1" / "deep", tmp_path / "job-10"
    inside.mkdir(parents=True)
    sibling.mkdir()
    # A shell working inside whose child works elsewhere (a descendant), and a process in the sibling.
    worker = subprocess.Popen(["sh", "-c", f"cd {tmp_path} && sleep 120 & wait"], cwd=inside)
    neighbour = subprocess.Popen(["sleep", "120"], cwd=sibling)
    grandchild = None
    try:
        deadline = time.monotonic() + 30
        while grandchild is None:  # the shell has started its sleep
            assert time.monotonic() < deadline, "the shell never started its child"
            for entry in os.listdir("/proc"):
                if entry.isdigit():
                    try:
                        stat = Path(f"/proc/{entry}/stat").read_bytes()
                    except OSError:
                        continue
                    if int(stat[stat.rindex(b")") + 2 :].split()[1]) != worker.pid:
                        continue
                    try:  # the forked subshell counts only once it has done its `cd` (else it is inside too)
                        moved = os.readlink(f"/proc/{entry}/cwd") == os.path.realpath(tmp_path)
                    except OSError:
                        continue
                    if moved:
                        grandchild = int(entry)
        assert processes_inside(tmp_path / "job-1") == [worker.pid]
        assert os.getpid() not in processes_inside(Path.cwd())

        killed = kill_processes_inside(tmp_path / "job-1")

        assert worker.pid in killed and grandchild in killed
        worker.wait(timeout=10)
        assert not _running(grandchild)
        assert _running(neighbour.pid)
        assert processes_inside(tmp_path / "job-1") == []
        assert kill_processes_inside(tmp_path / "nothing-here") == []
    finally:
        if grandchild is not None and _running(grandchild):
            os.kill(grandchild, signal.SIGKILL)
        for proc in (worker, neighbour):
            proc.kill()
            proc.wait()


def test_a_git_naming_the_directory_is_listed_another_program_naming_it_is_not(tmp_path: Path) -> None:
    job = tmp_path / "job-1"
    git_on_it = subprocess.Popen(["git", "hash-object", "--stdin", "--path", f"{job}/a.txt"],
                                 stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, cwd=tmp_path)
    git_on_sibling = subprocess.Popen(["git", "hash-object", "--stdin", "--path", f"{tmp_path}/job-10/a.txt"],
                                      stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, cwd=tmp_path)
    editor = subprocess.Popen(["sh", "-c", "sleep 120; :", "sh", f"{job}/a.txt"], cwd=tmp_path)  # not git, naming it
    try:
        deadline = time.monotonic() + 30
        while not all(Path(f"/proc/{p.pid}/comm").read_text().strip() in ("git", "sh")
                      for p in (git_on_it, git_on_sibling, editor)):
            assert time.monotonic() < deadline, "the processes never started"
            time.sleep(0.01)
        assert f"{job}/a.txt".encode() in Path(f"/proc/{editor.pid}/cmdline").read_bytes()
        assert processes_inside(job) == [git_on_it.pid]
    finally:
        for proc in (git_on_it, git_on_sibling, editor):
            proc.kill()
            proc.wait()

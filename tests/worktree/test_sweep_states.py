"""The start-up sweep covers every state a job's worktree can be left in (issue 12, sweep finding).

Each orphan is made for real: an engine-like process runs the real worktree code and is SIGKILLed (with every
git it started) at one point — after the sidecar, after the directory, inside ``git worktree add``'s checkout
(a smudge filter holds it there: the registration is locked "initializing" and holds an ``index.lock``),
before the marker, mid-job, mid-removal, after ``git worktree lock``, with a warm pool worktree — or, for the
one window no process can be stopped in (inside ``worktree add`` before it writes ``gitdir``), built exactly
as git leaves it. Then the real engine starts (``spotpatch-agent serve`` + ``initialize``) and every orphan
is gone: directory, registration and sidecar. Worktrees of a live engine (marked, or mid-checkout) and the
user's own worktrees (plain, locked, prunable, named like ours) are never touched.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from spotpatch_agent.worktree.marker import MARKER_NAME
from spotpatch_agent.worktree.removal import TRASH_PREFIX, empty_trash_in
from spotpatch_agent.worktree.sidecar import OWNER_SUFFIX
from tests.conftest import git
from tests.engine_client import EngineProcess
from tests.worktree._util import worktree_list

#: An engine-like process: runs the real worktree code for ``point``, then dies by SIGKILL (or, for
#: ``live-*``, prints "ready" and stays alive until its stdin closes).
CHILD = textwrap.dedent('''
    import os, signal, subprocess, sys
    from pathlib import Path
    import anyio
    from spotpatch_agent.worktree import create, placement, removal, sidecar
    from spotpatch_agent.worktree.pool import WorktreePool

    root, point = Path(sys.argv[1]), sys.argv[2]

    def die(*_args):
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    async def main():
        if point == "after-sidecar":  # the sidecar exists, the directory not yet
            base = await placement.node_modules_base(root) or placement.temp_base()
            placement.ensure_private_dir(base)
            sidecar.write_sidecar(base, "job-" + os.urandom(8).hex())
            die()
        if point == "after-mkdir":  # empty job directory, no registration
            print(await placement.make_job_dir(root), flush=True)
            die()
        if point == "before-marker":  # `worktree add` done, the marker not yet written
            create.write_marker = die
            await create.create_worktree(root, "job-before-marker")
        if point in ("mid-job", "live-job"):
            wt = await create.create_worktree(root, "job-" + point)
            print(wt.path, flush=True)
            if point == "live-job":
                print("ready", flush=True)
                sys.stdin.read()
                await removal.remove_worktree(root, wt)
                return
            die()
        if point == "mid-removal":  # `worktree remove` failed, the directory is deleted, the registration not yet
            wt = await create.create_worktree(root, "job-mid-removal")
            original, run_git = removal.rmtree, removal.run_git
            removal.rmtree = lambda p: (original(p), die())
            removal.run_git = lambda args, **kw: run_git(
                ["worktree", "remove", "--no-such-option"] if args[:2] == ["worktree", "remove"] else args, **kw)
            await removal.remove_worktree(root, wt)
        if point == "git-locked":  # a marked job worktree someone locked with `git worktree lock`
            wt = await create.create_worktree(root, "job-locked")
            subprocess.run(["git", "worktree", "lock", "--reason", "held", str(wt.path)], cwd=root, check=True)
            die()
        if point == "pool":  # a warm pool worktree (marker "pool-…"), its checkout being reset
            pool = WorktreePool(root, mode="on")
            await pool.warm()
            (pool._idle[0].admin_dir / "index.lock").write_bytes(b"")
            die()
        if point in ("in-checkout", "live-checkout"):  # the smudge filter holds `worktree add` in its checkout
            await create.create_worktree(root, "job-" + point)

    anyio.run(main)
''')


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_bytes()
            except OSError:
                continue
            if int(stat[stat.rindex(b")") + 2 :].split()[1]) == pid:
                found.append(int(entry))
    return found


def kill_family(pid: int) -> None:
    """SIGKILL ``pid`` and all its descendants (git runs in its own session, so not by process group)."""
    family, todo = [], [pid]
    while todo:
        current = todo.pop()
        family.append(current)
        todo.extend(_children_of(current))
    for member in family:
        try:
            os.kill(member, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Child:
    """One engine-like process at ``point`` (see :data:`CHILD`)."""

    def __init__(self, root: Path, point: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, str(root), point], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)

    def wait_killed(self) -> list[str]:
        out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == -signal.SIGKILL, err
        return out.split()

    def wait_ready(self) -> Path:
        assert self.proc.stdout is not None
        path = Path(self.proc.stdout.readline().strip())
        assert self.proc.stdout.readline().strip() == "ready"
        return path

    def kill(self) -> None:
        kill_family(self.proc.pid)
        self.proc.wait(timeout=30)


def registrations(root: Path) -> list[Path]:
    folder = root / ".git" / "worktrees"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def start_engine(root: Path, env: dict[str, str]) -> str:
    engine = EngineProcess(env=env)
    try:
        engine.initialize(root)
    finally:
        engine.stop()
    return engine.all_output()


@pytest.mark.parametrize("placement", ["temp", "node_modules"])
def test_the_engine_start_sweeps_every_orphan_state_and_nothing_else(
    repo_factory, tmp_path: Path, private_tempdir: Path, placement: str
) -> None:
    root = repo_factory({".gitignore": "node_modules/\n", ".gitattributes": "*.slow filter=slow\n",
                         "a.txt": "a\n", "b.slow": "held\n"})
    if placement == "node_modules":
        (root / "node_modules").mkdir()
        base = root / "node_modules" / ".spotpatch"
    else:
        base = private_tempdir / "spotpatch-worktrees"
    held, gate = tmp_path / "held", tmp_path / "gate"
    held.mkdir()
    # While `gate` exists, a smudge filter holds `git worktree add` inside its checkout (a 200,000-file
    # checkout, in short); otherwise it passes the content through.
    git(root, "config", "filter.slow.smudge",
        f"sh -c 'if [ -e {gate} ]; then touch {held}/$$; exec sleep 120; fi; cat'")
    env = {**os.environ, "TMPDIR": str(private_tempdir), "SPOTPATCH_WORKTREE_POOL": "0"}

    # The user's own worktrees: plain, locked, prunable, and one in a directory named like ours.
    (tmp_path / "users").mkdir()
    users = {"plain": tmp_path / "users-plain", "locked": tmp_path / "users-locked",
             "gone": tmp_path / "users-gone", "ourname": tmp_path / "users" / "job-0123456789abcdef"}
    for path in users.values():
        git(root, "-c", "filter.slow.smudge=cat", "worktree", "add", "-q", "--detach", str(path), "HEAD")
    git(root, "worktree", "lock", "--reason", "the user's", str(users["locked"]))
    subprocess.run(["rm", "-rf", str(users["gone"])], check=True)
    users_admins = set(registrations(root))

    # A live engine: one marked worktree mid-job, one held inside `worktree add` (locked, index.lock).
    live_job = Child(root, "live-job", env)
    live_job_path = live_job.wait_ready()
    live_checkout = hold_in_checkout(root, "live-checkout", env, held, gate)
    try:
        live_admins = set(registrations(root)) - users_admins
        assert len(live_admins) == 2
        checkout_admin = next(a for a in live_admins if (a / "locked").exists())
        assert (checkout_admin / "locked").read_text().strip() == "initializing"
        assert (checkout_admin / "index.lock").exists()

        # Orphans, one per state.
        for point in ("after-sidecar", "after-mkdir", "before-marker", "mid-job", "mid-removal", "git-locked",
                      "pool"):
            Child(root, point, env).wait_killed()
        hold_in_checkout(root, "in-checkout", env, held, gate).kill()
        # Inside `worktree add` before it wrote `gitdir` (no process can be stopped there): as git leaves it.
        [half] = Child(root, "after-mkdir", env).wait_killed()
        half_admin = root / ".git" / "worktrees" / Path(half).name
        half_admin.mkdir()
        (half_admin / "locked").write_text("initializing\n")

        orphans = set(registrations(root)) - users_admins - live_admins
        assert len(orphans) == 7  # before-marker, mid-job, mid-removal, git-locked, pool, in-checkout, half
        assert any((a / "locked").read_text().strip() == "initializing" and (a / "index.lock").exists()
                   for a in orphans if (a / "locked").exists())
        assert any((a / MARKER_NAME).exists() and (a / "index.lock").exists() for a in orphans)  # the pool one

        output = start_engine(root, env)

        assert set(registrations(root)) == users_admins | live_admins, output
        listed = {p.resolve() for p in worktree_list(root)}
        assert live_job_path.resolve() in listed and (live_job_path / "a.txt").is_file()
        for name, path in users.items():
            assert path.resolve() in listed, name
            if name != "gone":
                assert (path / "a.txt").is_file(), name
        assert (root / ".git" / "worktrees" / users["locked"].name / "locked").read_text().strip() == "the user's"
        # In our base: only what the live engine owns (its two job directories and their sidecars), and the
        # orphans moved aside (``trash-*``, issue 17), whose files are deleted after initialize's reply: this
        # engine stopped at once, so the trash may still be there; the next start's background deletes it.
        left = sorted(p.name for p in base.iterdir() if not p.name.startswith(TRASH_PREFIX))
        assert len(left) == 4 and sum(n.endswith(OWNER_SUFFIX) for n in left) == 2, left
        empty_trash_in([base])
        assert sorted(p.name for p in base.iterdir()) == left
    finally:
        live_checkout.kill()
        live_job.proc.stdin.close()
        live_job.proc.wait(timeout=60)

    # The live engine died inside `worktree add` (the reported state): the next start sweeps it too.
    assert (checkout_admin / "locked").exists() and (checkout_admin / "index.lock").exists()
    start_engine(root, env)
    assert set(registrations(root)) == users_admins
    empty_trash_in([base])  # what that start's background does once initialize answered
    assert not base.exists() or not any(base.iterdir())


def hold_in_checkout(root: Path, point: str, env: dict[str, str], held: Path, gate: Path,
                     timeout: float = 60) -> Child:
    """A child whose `git worktree add` is held inside its checkout by the smudge filter (see the test)."""
    before = set(held.iterdir())
    gate.touch()
    child = Child(root, point, env)
    deadline = time.monotonic() + timeout
    while not set(held.iterdir()) - before:
        assert time.monotonic() < deadline, "the smudge filter never ran"
        time.sleep(0.01)
    gate.unlink()
    return child


def test_a_reused_pid_is_not_the_owner(repo_factory, private_tempdir: Path) -> None:
    """Containers restart with the same small pids: a sidecar or marker naming this very engine's pid (or a
    running stranger's) but another process start is a dead engine's, and its worktree is swept."""
    root = repo_factory({"a.txt": "a\n"})
    env = {**os.environ, "TMPDIR": str(private_tempdir), "SPOTPATCH_WORKTREE_POOL": "0"}
    stranger = subprocess.Popen(["sleep", "120"])
    try:
        Child(root, "before-marker", env).wait_killed()
        Child(root, "mid-job", env).wait_killed()
        [unmarked, marked] = sorted(registrations(root), key=lambda a: (a / MARKER_NAME).exists())
        marker = json.loads((marked / MARKER_NAME).read_text())
        (marked / MARKER_NAME).write_text(json.dumps({**marker, "pid": stranger.pid}))
        sidecar = private_tempdir / "spotpatch-worktrees" / (unmarked.name + OWNER_SUFFIX)
        record = json.loads(sidecar.read_text())
        engine = EngineProcess(env=env)
        try:
            # The new engine got the dead one's pid: its own start differs from the recorded one.
            sidecar.write_text(json.dumps({**record, "pid": engine.proc.pid}))
            engine.initialize(root)
        finally:
            engine.stop()
        assert registrations(root) == []
    finally:
        stranger.kill()
        stranger.wait()


def test_the_sweep_runs_while_the_users_tree_is_blocked(repo_factory, private_tempdir: Path) -> None:
    """An orphan is swept at the next start even when the user's tree cannot take a job (here git's own
    ``index.lock`` in the user's repository, which the engine never deletes)."""
    root = repo_factory({"a.txt": "a\n"})
    env = {**os.environ, "TMPDIR": str(private_tempdir), "SPOTPATCH_WORKTREE_POOL": "0"}
    Child(root, "mid-job", env).wait_killed()
    assert len(registrations(root)) == 1
    (root / ".git" / "index.lock").write_bytes(b"")
    start_engine(root, env)
    assert registrations(root) == [] and (root / ".git" / "index.lock").exists()


def test_an_unmarked_registration_whose_directory_and_sidecar_were_cleaned_away(
    repo_factory, private_tempdir: Path
) -> None:
    """Killed inside `worktree add` (locked "initializing", an ``index.lock``), then the temp directory was
    cleaned (a reboot): no directory, no sidecar, a registration git's prune never removes (it is locked)."""
    root = repo_factory({"a.txt": "a\n"})
    env = {**os.environ, "TMPDIR": str(private_tempdir), "SPOTPATCH_WORKTREE_POOL": "0"}
    Child(root, "before-marker", env).wait_killed()
    [admin] = registrations(root)
    (admin / "locked").write_text("initializing\n")
    (admin / "index.lock").write_bytes(b"")
    subprocess.run(["rm", "-rf", str(private_tempdir / "spotpatch-worktrees")], check=True)
    start_engine(root, env)
    assert registrations(root) == []


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2 :].split()[0] != b"Z"


def _family(pid: int) -> list[int]:
    family, todo = [], [pid]
    while todo:
        current = todo.pop()
        family.append(current)
        todo.extend(_children_of(current))
    return family


@pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="needs /proc (Linux)")
def test_processes_a_killed_engine_left_writing_in_its_worktree_are_stopped_and_it_is_swept(
    repo_factory, tmp_path: Path, private_tempdir: Path
) -> None:
    """Breaker 12, F6: the engine is SIGKILLed inside ``git worktree add``; git runs in its own session, so it
    and its checkout (here a smudge filter that keeps writing files into the job directory) live on,
    reparented to init. The next engine start stops them and sweeps the worktree: no registration, no
    directory, no sidecar, no process left. Before the fix the sweep's delete lost the race against the
    writer ("could not delete …") and left the directory and its sidecar."""
    root = repo_factory({".gitattributes": "*.slow filter=slow\n", "a.txt": "a\n", "b.slow": "held\n"})
    held, gate = tmp_path / "held", tmp_path / "gate"
    held.mkdir()
    # While `gate` exists the filter records its pid, then rewrites 200 files in its working directory (the
    # job's checkout) until killed; otherwise it passes the content through.
    writer = 'i=0; while :; do i=$(( (i + 1) % 200 )); echo x > spotpatch-writer-$i; done'
    git(root, "config", "filter.slow.smudge", f"sh -c 'if [ -e {gate} ]; then touch {held}/$$; {writer}; fi; cat'")
    env = {**os.environ, "TMPDIR": str(private_tempdir), "SPOTPATCH_WORKTREE_POOL": "0"}
    base = private_tempdir / "spotpatch-worktrees"

    child = hold_in_checkout(root, "in-checkout", env, held, gate)
    [writer_pid] = [int(p.name) for p in held.iterdir()]
    left = _family(child.proc.pid)[1:]  # git worktree add, its checkout, the filter
    try:
        child.proc.kill()  # the engine only: its git keeps running
        child.proc.wait(timeout=30)
        assert _running(writer_pid)
        [job_dir] = [p for p in base.iterdir() if p.is_dir()]
        assert os.path.realpath(f"/proc/{writer_pid}/cwd").startswith(os.path.realpath(job_dir))
        written = job_dir / "spotpatch-writer-7"
        for _round in range(2):  # it writes, and keeps writing after we delete what it wrote
            deadline = time.monotonic() + 30
            while not written.exists():
                assert time.monotonic() < deadline, "the filter does not write into the job directory"
                time.sleep(0.01)
            written.unlink(missing_ok=True)
        assert len(registrations(root)) == 1

        output = start_engine(root, env)

        assert not [pid for pid in [writer_pid, *left] if _running(pid)], output
        assert registrations(root) == [], output
        # The job directory was moved aside (issue 17); its files go in the background after the reply.
        assert all(p.name.startswith(TRASH_PREFIX) for p in base.iterdir()) if base.exists() else True
        empty_trash_in([base])
        assert not base.exists() or not any(base.iterdir()), sorted(p.name for p in base.iterdir())
        assert "could not delete" not in output and "cleanup failed" not in output, output
    finally:
        for pid in [writer_pid, *left]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_an_empty_sidecar_without_its_directory_is_swept(repo_factory, private_tempdir: Path) -> None:
    """Breaker 12, F6 (the random-kill run): a kill between the sidecar's exclusive create and its write
    leaves an empty ``job-<random>.owner`` and no directory (made only after the write). It names no owner,
    so it used to stay for ever; the next start removes it. A written sidecar of a live engine stays."""
    root = repo_factory({"a.txt": "a\n"})
    env = {**os.environ, "TMPDIR": str(private_tempdir), "SPOTPATCH_WORKTREE_POOL": "0"}
    base = private_tempdir / "spotpatch-worktrees"
    base.mkdir(mode=0o700)
    empty = base / ("job-" + "0" * 16 + OWNER_SUFFIX)
    empty.write_bytes(b"")
    live_job = Child(root, "live-job", env)
    try:
        live_path = live_job.wait_ready()
        start_engine(root, env)
        assert not empty.exists()
        assert live_path.is_dir() and (base / (live_path.name + OWNER_SUFFIX)).is_file()
    finally:
        live_job.proc.stdin.close()
        live_job.proc.wait(timeout=60)


@pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="needs /proc (Linux)")
def test_a_git_a_dead_engine_left_working_on_its_empty_job_directory_is_stopped(
    repo_factory, private_tempdir: Path
) -> None:
    """Breaker 12, F6 (the random-kill run): killed right after making its job directory, the engine leaves
    ``git worktree add <dir>`` starting (own session, cwd the repository). The sweep used to delete the empty
    directory and its sidecar, after which that git re-created and filled it: a worktree with neither
    marker nor sidecar, never swept. A git naming the directory (here a stand-in that waits on its stdin)
    is now stopped first."""
    root = repo_factory({"a.txt": "a\n"})
    env = {**os.environ, "TMPDIR": str(private_tempdir), "SPOTPATCH_WORKTREE_POOL": "0"}
    [job_dir] = Child(root, "after-mkdir", env).wait_killed()
    stand_in = subprocess.Popen(["git", "hash-object", "--stdin", "--path", f"{job_dir}/a.txt"],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, cwd=root)
    try:
        deadline = time.monotonic() + 30
        while job_dir.encode() not in Path(f"/proc/{stand_in.pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline, "the stand-in never ran"
            time.sleep(0.01)
        output = start_engine(root, env)
        assert stand_in.wait(timeout=30) == -signal.SIGKILL, output
        assert not Path(job_dir).exists() and not Path(job_dir + OWNER_SUFFIX).exists()
    finally:
        stand_in.kill()
        stand_in.wait()

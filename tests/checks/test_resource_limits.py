"""Issue 25 acceptance 1: every check runs under resource limits the kernel enforces (checks/limits.py).

A fork bomb, a memory balloon, a disk fill (private temp and worktree), endless output, 10,000 open files and a
CPU spin — each inside a real confined check (bubblewrap, the engine's cgroup) with small configured limits —
is stopped by its limit, and the check's result names the limit and its value. While the fork bomb and the
balloon run, a second activity of this machine (a thread timing 10 ms sleeps) never waits a second and
answers within 100 ms (p99; on a machine already busy, no worse than its own baseline: assert_responsive).
A normal TypeScript check still passes under the default limits.

Safety on a shared machine: every hostile check has small limits and a short ``timeoutSec``; the fork bomb and
the balloons run only where a cgroup bounds them (as root ``RLIMIT_NPROC`` does not bind).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from spotpatch_agent.checks import limits as limits_mod
from spotpatch_agent.checks.runner import CheckRun, run_check_process
from spotpatch_agent.checks.sandbox.bwrap import bwrap_argv
from spotpatch_agent.checks.sandbox.plan import SandboxPlan
from spotpatch_agent.protocol.models import CheckConfig, CheckLimits, Limits
from tests.conftest import make_repo

pytestmark = [pytest.mark.anyio,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the limits proven here are Linux's")]

SMALL = {"processes": 64, "memoryMiB": 64, "fileSizeMiB": 8, "tmpMiB": 16, "cpuSec": 1, "openFiles": 256,
         "diskMiB": 32}
DISK_STOPPED = "[Stopped: the check hit its disk limit (limits.diskMiB = 32 MiB): it wrote more than that to disk.]"
#: A system Python: the sandbox's view has the system directories, not this test's virtual environment.
PYTHON = shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3"
needs_python = pytest.mark.skipif(not os.path.isfile(PYTHON), reason="needs a system python3 in /usr/bin")
TYPESCRIPT = Path(__file__).resolve().parents[2] / "node-shim" / "node_modules" / "typescript"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "wt", {"README.md": "x\n"})


def _cgroup_kinds() -> tuple[str, ...]:
    probe = limits_mod.create_cgroup(limits_mod.resolve(CheckLimits()))
    if probe is None:
        return ()
    probe.close()
    return probe.kinds


def needs_cgroup(kind: str) -> pytest.MarkDecorator:
    # Without a cgroup a fork bomb run as root is bounded only by its timeout: never run it then.
    return pytest.mark.skipif(kind not in _cgroup_kinds(), reason=f"needs a writable {kind} cgroup (root, v1 or v2)")


def sh_check(script: str, *, timeout: int = 10, **limits: int) -> CheckConfig:
    return CheckConfig.model_validate({"id": "hostile", "name": "Hostile", "command": "/bin/sh",
                                       "args": ["-c", script], "timeoutSec": timeout, "limits": {**SMALL, **limits}})


def _left_cgroups() -> list[Path]:
    return [p for p in Path("/sys/fs/cgroup").glob(f"**/spotpatch-check-{os.getpid()}-*") if p.is_dir()]


_SAMPLER = """
import json, sys, threading, time
late, done = [], threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
while not done.is_set():
    start = time.perf_counter()
    time.sleep(0.01)
    late.append(time.perf_counter() - start - 0.01)
print(json.dumps(late))
"""


@contextmanager
def responsiveness() -> Iterator[list[float]]:
    """Lateness (seconds) of 10 ms sleeps in a second process of this machine while the block runs."""
    late: list[float] = []
    sampler = subprocess.Popen([sys.executable, "-c", _SAMPLER], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        time.sleep(0.1)
        yield late
    finally:
        out, _ = sampler.communicate(b"", timeout=30)
        late.extend(json.loads(out))


async def hostile_for(check: CheckConfig, worktree: Path, seconds: float = 1.5) -> tuple[CheckRun, list[float]]:
    """Run ``check`` again and again for ``seconds`` while sampling the machine's responsiveness."""
    with responsiveness() as late:
        end = time.perf_counter() + seconds
        result = await run(check, worktree)
        while time.perf_counter() < end:
            result = await run(check, worktree)
    return result, late


def assert_responsive(late: list[float]) -> None:
    """No stall: every wake-up within a second (an unconfined fork bomb or balloon freezes this machine for
    far longer), and the p99 of the lateness under 100 ms. This machine is shared with other test runs
    (and two cores are few against 64 busy processes): when the p99 misses, a baseline of the same length
    is measured right after, and the hostile check must keep the p90 under 100 ms or within half again
    the baseline's (a p99 of under 100 samples is one outlier: the p90 is what a user would feel)."""
    assert len(late) > 10
    assert max(late) < 1.0, (max(late), len(late))
    if quantile(late, 0.99) < 0.1:
        return
    with responsiveness() as baseline:
        time.sleep(1.5)
    assert quantile(late, 0.9) < max(0.1, 1.5 * quantile(baseline, 0.9)), (
        quantile(late, 0.9), quantile(baseline, 0.9), max(late), len(late))


def quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


async def run(check: CheckConfig, worktree: Path, limits: Limits | None = None) -> CheckRun:
    started = time.perf_counter()
    result = await run_check_process(check, worktree, limits or Limits())
    assert time.perf_counter() - started < check.timeout_sec + 5  # type: ignore[operator]
    assert _left_cgroups() == []
    return result


@needs_cgroup("pids")
async def test_a_fork_bomb_is_stopped_by_the_process_limit_and_the_machine_stays_responsive(worktree: Path) -> None:
    result, late = await hostile_for(sh_check("f() { f | f & }; f; sleep 10"), worktree)
    assert result.status == "failed", result
    assert result.output.startswith("[Stopped: the check hit its process limit (limits.processes = 64)")
    assert result.duration_ms < 5000
    assert_responsive(late)
    assert "cgroup" in result.sandbox_note() and "processes 64" in result.sandbox_note()


@needs_python
@needs_cgroup("memory")
async def test_a_memory_balloon_of_several_processes_is_stopped_by_the_cgroup(worktree: Path) -> None:
    balloon = f'{PYTHON} -c "import time; a = bytearray(b\\"x\\") * (40 << 20); time.sleep(1)"'
    result, late = await hostile_for(sh_check(f"for i in 1 2 3 4; do {balloon} & done; wait"), worktree)
    assert result.status == "failed", result
    assert "memory limit (limits.memoryMiB = 64 MiB): the kernel killed a process" in result.output
    assert_responsive(late)


@needs_python
async def test_one_process_balloon_is_refused_by_the_data_limit(worktree: Path) -> None:
    result = await run(sh_check(f'exec {PYTHON} -c "a = bytearray(b\\"x\\") * (200 << 20)"'), worktree)
    assert result.status == "failed" and "MemoryError" in result.output
    assert "memory limit (limits.memoryMiB = 64 MiB)" in result.output


async def test_a_64_gib_write_into_the_private_temp_ends_at_its_tmpfs_size(worktree: Path, tmp_path: Path) -> None:
    result, late = await hostile_for(sh_check("head -c 64G /dev/zero > /tmp/fill; s=$?; df -k /tmp | tail -1; exit $s",
                                              fileSizeMiB=1024), worktree)
    assert result.status == "failed", result
    assert "temp size limit (limits.tmpMiB = 16 MiB)" in result.output
    assert "No space left on device" in result.output
    assert_responsive(late)


async def test_one_huge_file_in_the_worktree_ends_at_the_file_size_limit(worktree: Path) -> None:
    result = await run(sh_check("exec head -c 64G /dev/zero > big"), worktree)
    assert (result.status, result.signal) == ("failed", 25), result
    assert result.output.startswith("[Stopped: the check hit its file size limit (limits.fileSizeMiB = 8 MiB)")
    assert (worktree / "big").stat().st_size == 8 << 20


async def test_many_files_filling_the_worktree_disk_are_stopped_by_the_watchdog(worktree: Path) -> None:
    script = 'i=0; while [ $i -lt 40 ]; do head -c 7000000 /dev/zero > "fill$i" || exit 1; i=$((i+1)); done'
    result = await run(sh_check(script), worktree)
    assert result.status == "failed", result
    assert result.output.startswith(DISK_STOPPED)
    written = sum(p.stat().st_size for p in worktree.glob("fill*"))
    assert 32 << 20 < written < 200 << 20  # stopped within a few polls, far from the 280 MB it meant to write


async def test_without_the_write_counters_the_free_space_and_a_walk_stop_a_fill(
        worktree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits_mod.CheckCgroup, "written", lambda self: None)  # no cgroup, or unreadable counters
    script = 'i=0; while [ $i -lt 40 ]; do head -c 7000000 /dev/zero > "fill$i" || exit 1; i=$((i+1)); done'
    result = await run(sh_check(script), worktree)
    assert result.status == "failed" and result.output.startswith(DISK_STOPPED), result
    assert sum(p.stat().st_size for p in worktree.glob("fill*")) < 200 << 20


@needs_cgroup("pids")
async def test_a_fill_into_a_deleted_but_open_file_is_stopped_too(worktree: Path) -> None:
    # Invisible to a walk of the worktree: the kernel's write counters of the check's processes see it.
    script = ('exec 3>hidden; rm hidden; i=0; while [ $i -lt 40 ]; do head -c 7000000 /dev/zero >&3 || exit 1; '
              'i=$((i+1)); done')
    result = await run(sh_check(script, fileSizeMiB=1024), worktree)
    assert result.status == "failed" and result.output.startswith(DISK_STOPPED), result


async def test_endless_output_is_bounded_and_ends_at_the_timeout(worktree: Path) -> None:
    limits = Limits(checkOutputMaxBytes=4096)
    result = await run(sh_check("yes spotpatch", timeout=2, cpuSec=60), worktree, limits)
    assert result.status == "timed-out" and result.truncated
    assert len(result.output.encode()) < 4096 + 200
    assert result.output.startswith("spotpatch\nspotpatch\n")


@needs_python
async def test_ten_thousand_open_files_end_at_the_open_files_limit(worktree: Path) -> None:
    script = f'exec {PYTHON} -c "import os; [os.open(\\"/dev/null\\", os.O_RDONLY) for _ in range(10000)]"'
    result = await run(sh_check(script), worktree)
    assert result.status == "failed" and "Too many open files" in result.output
    assert result.output.startswith("[The check failed probably on its open files limit (limits.openFiles = 256)")


async def test_a_cpu_spin_is_stopped_by_the_cpu_limit(worktree: Path) -> None:
    result = await run(sh_check("while :; do :; done", timeout=20), worktree)
    assert (result.status, result.signal) == ("failed", 24), result
    assert result.output.startswith("[Stopped: the check hit its CPU time limit (limits.cpuSec = 1 s) (SIGXCPU).]")
    assert result.duration_ms < 10_000


async def test_an_unconfined_check_gets_the_same_rlimits(worktree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPOTPATCH_SIMULATE_NO_SANDBOX", "1")
    result = await run_check_process(sh_check("while :; do :; done", timeout=20), worktree, Limits(), sandbox="warn")
    assert (result.sandbox, result.status, result.signal) == ("unconfined", "failed", 24), result
    assert "CPU time limit (limits.cpuSec = 1 s)" in result.output
    assert "limits enforced by the kernel" in result.sandbox_note()


async def test_the_check_sees_its_limits(worktree: Path) -> None:
    result = await run(sh_check("ulimit -t; ulimit -f; ulimit -d; ulimit -n; ulimit -c; df -k /tmp | tail -1"),
                       worktree)
    assert result.ok, result
    lines = result.output.splitlines()
    assert lines[:5] == ["1", str(8 << 11), str(64 << 10), "256", "0"]
    assert lines[5].split()[:2] == ["tmpfs", "16384"]


def test_bwrap_mounts_a_sized_tmpfs_as_temp(tmp_path: Path) -> None:
    plan = SandboxPlan(cwd=tmp_path, temp_dir=tmp_path / "t", network=False, writable=(tmp_path,),
                       temp_size=16 << 20)
    argv = bwrap_argv("/usr/bin/bwrap", plan, ["/bin/true"])
    at = argv.index("--tmpfs", argv.index("--size"))
    assert argv[at - 4: at + 2] == ["--size", str(16 << 20), "--perms", "1777", "--tmpfs", "/tmp"]
    assert str(tmp_path / "t") not in argv


def test_check_limits_are_validated_and_default_safely() -> None:
    resolved = limits_mod.resolve(CheckLimits())
    assert (resolved.processes, resolved.file_size_bytes >> 20, resolved.tmp_bytes >> 20, resolved.cpu_sec,
            resolved.open_files, resolved.disk_bytes >> 20) == (2048, 1024, 1024, 1800, 8192, 4096)
    assert 256 << 20 <= resolved.memory_bytes
    with pytest.raises(ValueError, match="memoryMib"):
        CheckConfig.model_validate({"id": "a", "name": "a", "command": "x", "limits": {"memoryMib": 64}})
    with pytest.raises(ValueError, match="processes"):
        CheckConfig.model_validate({"id": "a", "name": "a", "command": "x", "limits": {"processes": 1}})


needs_node = pytest.mark.skipif(shutil.which("npm") is None or not (TYPESCRIPT / "bin" / "tsc").is_file(),
                                reason="needs npm and node-shim's installed TypeScript (tests/run.sh installs both)")


@needs_node
async def test_a_real_typescript_check_passes_under_the_default_limits(tmp_path: Path) -> None:
    tsconfig = {"compilerOptions": {"strict": True, "noEmit": True, "target": "ES2020", "module": "ESNext",
                                    "moduleResolution": "Bundler", "skipLibCheck": True, "types": []},
                "include": ["src"]}
    root = make_repo(tmp_path / "app", {
        "package.json": json.dumps({"name": "app", "private": True, "scripts": {"typecheck": "tsc --noEmit"}}),
        "tsconfig.json": json.dumps(tsconfig), "src/price.ts": "export const price = (v: number) => `$${v}`;\n"})
    shutil.copytree(TYPESCRIPT, root / "node_modules" / "typescript", symlinks=True)
    (root / "node_modules" / ".bin").mkdir()
    (root / "node_modules" / ".bin" / "tsc").symlink_to("../typescript/bin/tsc")
    check = CheckConfig(id="typecheck", name="Type check", command="npm", args=["run", "--silent", "typecheck"],
                        timeoutSec=300)
    result = await run_check_process(check, root, Limits())
    assert result.ok, result.output
    assert "limits enforced by the kernel" in result.sandbox_note() and "processes 2048" in result.sandbox_note()
    assert _left_cgroups() == []


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
async def test_node_and_webassembly_run_under_a_small_memory_limit(worktree: Path) -> None:
    # RLIMIT_DATA, not RLIMIT_AS: V8 reserves gigabytes of address space for a WebAssembly memory (an
    # RLIMIT_AS of 4 GiB makes this throw "could not allocate memory"); its committed memory is what counts.
    script = "new WebAssembly.Memory({initial: 1}); console.log('wasm ok')"
    check = CheckConfig.model_validate({"id": "node", "name": "Node", "command": shutil.which("node"),
                                        "args": ["-e", script], "timeoutSec": 30, "limits": {"memoryMiB": 128}})
    result = await run(check, worktree)
    assert result.ok and result.output.strip() == "wasm ok", result


@needs_cgroup("pids")
def test_a_cgroup_left_by_a_dead_engine_is_swept() -> None:
    group = limits_mod.create_cgroup(limits_mod.resolve(CheckLimits()))
    assert group is not None
    try:
        dead = 4_000_000  # above pid_max: no such process
        stale = group.dirs[0].parent / f"spotpatch-check-{dead}-0123456789ab"
        stale.mkdir()
        live = group.dirs[0].parent / f"spotpatch-check-{os.getpid()}-0123456789ab"
        live.mkdir()
        again = limits_mod.create_cgroup(limits_mod.resolve(CheckLimits()))
        assert again is not None
        again.close()
        assert not stale.exists() and live.exists()
    finally:
        live.rmdir()
        group.close()


@needs_cgroup("pids")
async def test_through_the_engine_the_model_sees_the_limit_and_the_job_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.engine._gates_support import FILES, KEY_ENV, edit, run_check, run_one_job

    monkeypatch.setenv(KEY_ENV, "sk-test-" + "1" * 24)
    root = make_repo(tmp_path / "app", FILES)
    bomb = {"id": "bomb", "name": "Bomb", "command": "/bin/sh", "args": ["-c", "f() { f | f & }; f; sleep 10"],
            "required": False, "timeoutSec": 10, "limits": SMALL}
    fine = {"id": "fine", "name": "Fine", "command": "/bin/sh", "args": ["-c", "echo fine"], "timeoutSec": 10}
    result = await run_one_job(root, [edit("w"), run_check("b", "bomb"), run_check("f", "fine"),
                                      {"text": "Done.", "finishReason": "stop"}], checks=[bomb, fine])
    assert result.snap is not None and result.snap.status == "awaiting-review", result.snap
    texts = {m["tool_call_id"]: m["content"] for body in result.server.requests for m in body.get("messages", [])
             if m.get("role") == "tool"}
    assert texts["b"].startswith("Check bomb (Bomb) FAILED")
    assert "[Stopped: the check hit its process limit (limits.processes = 64): a fork was refused.]" in texts["b"]
    assert "limits enforced by the kernel (rlimits and a cgroup" in texts["b"]
    assert texts["f"].startswith("Check fine (Fine) PASSED") and "fine" in texts["f"]
    assert [e["status"] for e in result.kinds("check") if e["checkId"] == "fine"] == ["passed"]
    assert _left_cgroups() == []


def test_a_delegated_cgroup_v2_subtree_gets_pids_max_and_memory_max(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # A file-level stand-in for /sys/fs/cgroup (this machine is v1): the files the engine reads and writes.
    own = tmp_path / "user.slice" / "engine.scope"
    own.mkdir(parents=True)
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    (own / "cgroup.controllers").write_text("cpu memory pids\n")
    (own / "cgroup.subtree_control").write_text("memory pids\n")
    (own / "cgroup.procs").write_text("")
    monkeypatch.setattr(limits_mod, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(limits_mod, "_own_cgroups", lambda: {"": "/user.slice/engine.scope"})
    group = limits_mod.create_cgroup(limits_mod.resolve(CheckLimits(processes=100, memoryMiB=256)))
    assert group is not None and (group.version, group.kinds) == (2, ("pids", "memory"))
    [directory] = group.dirs
    assert directory.parent == own and directory.name.startswith(f"spotpatch-check-{os.getpid()}-")
    assert (directory / "pids.max").read_text() == "100"
    assert (directory / "memory.max").read_text() == str(256 << 20)
    assert (directory / "memory.swap.max").read_text() == "0"
    (directory / "pids.events").write_text("max 3\n")
    (directory / "memory.events").write_text("low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n")
    assert (group.pids_refused(), group.oom_kills()) == (3, 1)
    assert group.describe() == "cgroup v2 (pids and memory)"
    (own / "cgroup.controllers").write_text("cpu\n")  # nothing delegated: rlimits only
    assert limits_mod.create_cgroup(limits_mod.resolve(CheckLimits())) is None


ESLINT = TYPESCRIPT.parent / "eslint"


@pytest.mark.skipif(shutil.which("node") is None or not (ESLINT / "bin" / "eslint.js").is_file(),
                    reason="needs node and node-shim's installed ESLint (tests/run.sh installs it)")
async def test_a_real_eslint_check_passes_under_the_default_limits(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "app", {
        "eslint.config.mjs": 'export default [{files: ["src/**/*.js"], rules: {"no-unused-vars": "error"}}];\n',
        "src/a.js": "export const used = 1;\n", ".gitignore": "node_modules\n"})
    (root / "node_modules").symlink_to(ESLINT.parent.resolve())  # node-shim's install: ESLint and its dependencies
    check = CheckConfig(id="lint", name="Lint", command=shutil.which("node") or "node",
                        args=["node_modules/eslint/bin/eslint.js", "src"], timeoutSec=120,
                        readPaths=[str(ESLINT.parent.resolve())])  # where the link leads, shown read-only
    result = await run_check_process(check, root, Limits(), project_root=root)
    assert result.ok, result.output
    assert "limits enforced by the kernel" in result.sandbox_note()
    (root / "src" / "a.js").write_text("const unused = 1;\n")
    failed = await run_check_process(check, root, Limits(), project_root=root)
    assert failed.status == "failed" and "no-unused-vars" in failed.output, failed.output


def test_a_wrapper_that_cannot_join_the_cgroup_runs_nothing_and_names_no_path(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    procs = tmp_path / "missing" / "cgroup.procs"
    done = subprocess.run(limits_mod.cgroup_argv([procs], ["/bin/sh", "-c", f"touch {marker}"]),
                          capture_output=True, text=True, timeout=10)
    assert done.returncode == limits_mod.WRAPPER_FAILED and not marker.exists()
    assert done.stderr == "spotpatch: the check did not run: it could not join its cgroup\n"


def test_rlimit_nproc_is_set_only_where_the_kernel_counts_it_per_user_namespace() -> None:
    assert [limits_mod.nproc_per_namespace(r) for r in ("5.10.0-28-amd64", "5.13.19", "5.14.0", "6.18.44-fc-v1252",
                                                        "10.1", "garbage")] == [False, False, True, True, True, False]
    argv = limits_mod.rlimit_argv(limits_mod.resolve(CheckLimits(processes=64)), ["/bin/true"], processes=True)
    assert argv[4] == ("64" if limits_mod.nproc_per_namespace() else "-")


@needs_cgroup("pids")
async def test_with_an_old_bubblewrap_the_temp_dir_is_on_disk_and_counted_in_the_disk_limit(
        worktree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from spotpatch_agent.checks.sandbox import bwrap as bwrap_mod

    monkeypatch.setattr(bwrap_mod, "supports_tmpfs_size", lambda binary: False)  # bwrap < 0.7 or setuid
    script = 'i=0; while [ $i -lt 40 ]; do head -c 7000000 /dev/zero > "/tmp/fill$i" || exit 1; i=$((i+1)); done'
    result = await run(sh_check(script), worktree)
    assert result.status == "failed" and result.output.startswith(DISK_STOPPED), result
    assert "the private temp dir is on disk here" in result.sandbox_note()


def test_this_bubblewrap_knows_the_tmpfs_size() -> None:
    from spotpatch_agent.checks.sandbox.bwrap import find_bwrap, supports_tmpfs_size

    binary = find_bwrap()
    if binary is None:
        pytest.skip("bubblewrap is not installed")
    assert supports_tmpfs_size(binary)


async def test_the_private_home_is_in_the_sized_tmpfs_with_its_toolchain_links(
        worktree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / ".nvm" / "bin").mkdir(parents=True)
    (home / ".nvm" / "bin" / "tool").write_text("#!/bin/sh\necho toolchain\n")
    (home / ".nvm" / "bin" / "tool").chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    script = ('echo "$HOME"; df -k "$HOME" | tail -1 | cut -c1-5; "$HOME/.nvm/bin/tool"; '
              'touch "$HOME/written" && echo wrote')
    result = await run(sh_check(script), worktree)
    assert result.ok, result
    lines = result.output.splitlines()
    assert lines[0].endswith("/home") and lines[1:] == ["tmpfs", "toolchain", "wrote"]  # /tmp shows as $TMP
    assert not (home / "written").exists()


async def test_a_worktree_script_as_the_command_runs_behind_the_limits(worktree: Path) -> None:
    (worktree / "check.sh").write_text("#!/bin/sh\nulimit -t\necho ran in \"$(pwd)\"\n")
    (worktree / "check.sh").chmod(0o755)
    check = CheckConfig.model_validate({"id": "s", "name": "S", "command": "./check.sh", "timeoutSec": 10,
                                        "limits": {"cpuSec": 7}})
    result = await run(check, worktree)
    assert result.ok, result
    assert result.output.splitlines()[0] == "7" and result.output.splitlines()[1].startswith("ran in ")

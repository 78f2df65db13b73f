"""The host-side check runner with real subprocesses (issue 8 acceptance 1; docs/design.md §9)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import anyio
import pytest
from pydantic import ValidationError

from spotpatch_agent.checks import CheckRun, check_env, run_check_process
from spotpatch_agent.protocol.models import CheckConfig, Limits

pytestmark = pytest.mark.anyio

CANARY = "sk-canary-3f9a1c7e55d04b2b"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def py_check(script: str, *, check_id: str = "c", **fields: object) -> CheckConfig:
    """A check that runs ``python -c script`` (the engine's own interpreter: no PATH lookup)."""
    return CheckConfig(id=check_id, name=f"Check {check_id}", command=sys.executable, args=["-c", script], **fields)


async def run(script: str, cwd: Path, *, limits: Limits | None = None, **fields: object) -> CheckRun:
    return await run_check_process(py_check(script, **fields), cwd, limits or Limits())


def gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (absent, or a zombie waiting for its new parent to reap it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return not stat.parent.exists()


async def wait_gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        await anyio.sleep(0.05)
    return gone(pid)


def host_pids(token: str) -> list[int]:
    """Host pids whose command line holds ``token`` (a confined check's own pids are of its pid namespace)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes() and not gone(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


async def wait_token_gone(token: str, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and host_pids(token):
        await anyio.sleep(0.05)
    return not host_pids(token)


def spawner(pidfile: Path) -> str:
    """A script that starts a sleeping grandchild (same process group), records its pid, then sleeps. The
    grandchild's command line holds ``pidfile.name`` (the pid it writes is of the sandbox's pid namespace).
    ``pidfile`` lies in the check's working directory (written by its relative name: the sandbox shows the
    worktree at a neutral path)."""
    return ("import subprocess, sys, time\n"
            f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', {pidfile.name!r}])\n"
            f"open({pidfile.name!r}, 'w').write(str(p.pid))\n"
            "print('started', flush=True)\n"
            "time.sleep(60)\n")


async def test_passing_check(tmp_path: Path) -> None:
    result = await run("import os; print('hello from', os.getcwd())", tmp_path)
    assert result.status == "passed" and result.ok and result.started
    assert (result.exit_code, result.signal, result.truncated) == (0, None, False)
    assert result.output == "hello from .\n"  # the worktree (at a neutral path in the sandbox), made relative
    assert result.check_id == "c" and result.name == "Check c" and result.required
    assert 0 <= result.duration_ms < 10_000


async def test_non_zero_exit_fails(tmp_path: Path) -> None:
    result = await run("import sys; print('2 errors'); sys.exit(3)", tmp_path, required=False)
    assert result.status == "failed" and not result.ok and not result.required
    assert (result.exit_code, result.signal) == (3, None)
    assert result.output == "2 errors\n" and result.outcome() == "exit code 3"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
async def test_a_check_killed_by_a_signal_fails_with_that_signal(tmp_path: Path, sig: signal.Signals) -> None:
    result = await run(f"import os; print('bye', flush=True); os.kill(os.getpid(), {int(sig)})", tmp_path)
    assert result.status == "failed" and not result.ok
    assert (result.exit_code, result.signal) == (None, int(sig))
    assert result.output == "bye\n" and result.outcome() == f"killed by signal {int(sig)}"


async def test_timeout_kills_the_whole_process_tree(tmp_path: Path) -> None:
    pidfile = tmp_path / f"grandchild-{os.getpid()}-{time.monotonic_ns()}.pid"
    started = time.monotonic()
    result = await run(spawner(pidfile), tmp_path, timeout_sec=1)
    assert time.monotonic() - started < 10
    assert result.status == "timed-out" and not result.ok
    assert (result.exit_code, result.signal) == (None, None) and result.output == "started\n"
    assert pidfile.read_text() and await wait_token_gone(pidfile.name), "the grandchild outlived the timeout"


async def test_check_timeout_limit_applies_when_the_check_has_none(tmp_path: Path) -> None:
    result = await run("import time; time.sleep(30)", tmp_path, limits=Limits(check_timeout_sec=1))
    assert result.status == "timed-out" and result.duration_ms < 10_000


async def test_cancellation_leaves_no_orphan(tmp_path: Path) -> None:
    pidfile = tmp_path / f"grandchild-{os.getpid()}-{time.monotonic_ns()}.pid"
    results: list[CheckRun] = []
    async with anyio.create_task_group() as tg:
        async def go() -> None:
            results.append(await run(spawner(pidfile), tmp_path, timeout_sec=60))

        tg.start_soon(go)
        with anyio.fail_after(10):
            while not pidfile.exists() or not pidfile.read_text():
                await anyio.sleep(0.02)
        assert host_pids(pidfile.name)  # the grandchild runs (proves the token finds it)
        tg.cancel_scope.cancel()
    assert results == []  # cancelled, not reported as a result
    assert await wait_token_gone(pidfile.name), "the grandchild outlived the cancellation"


async def test_huge_output_is_bounded_and_never_blocks(tmp_path: Path) -> None:
    script = "import sys\nfor _ in range(2000): sys.stdout.write('x' * 2047 + '\\n')\nsys.stderr.write('tail')"
    with anyio.fail_after(30):
        result = await run(script, tmp_path, limits=Limits(check_output_max_bytes=1024))
    assert result.status == "passed" and result.truncated
    assert result.output.endswith("\n[output truncated]") and len(result.output.encode()) <= 1024 + 20
    assert "tail" not in result.output


async def test_output_exactly_at_the_bound_is_not_truncated(tmp_path: Path) -> None:
    result = await run("import sys; sys.stdout.write('y' * 1024)", tmp_path, limits=Limits(check_output_max_bytes=1024))
    assert result.output == "y" * 1024 and not result.truncated


async def test_ansi_and_control_characters_are_stripped_and_bytes_decoded_leniently(tmp_path: Path) -> None:
    script = (r"import sys; sys.stdout.buffer.write(b'\x1b[1;31merror\x1b[0m TS2322\r\n"
              r"\x1b]8;;file:///x\x07link\x1b]8;;\x07 \x1b[2K\x07bell \xff\xfe end\n')")
    result = await run(script, tmp_path)
    assert "\x1b" not in result.output and "\x07" not in result.output and "\r" not in result.output
    assert result.output == "error TS2322\nlink bell \ufffd\ufffd end\n"


async def test_absolute_paths_become_relative(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    worktree = project / "node_modules" / ".spotpatch" / "wt"  # a worktree under the project (spec)
    worktree.mkdir(parents=True)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    script = ("import os; print(os.getcwd() + '/src/App.tsx(3,1)'); print('in', os.getcwd());"
              f"print({str(project)!r} + '/vite.config.ts'); print({str(home)!r} + '/.npmrc');"
              f"print({str(worktree)!r} + '-other/x')")
    check = py_check(script)
    result = await run_check_process(check, worktree, Limits(), project_root=project)
    lines = result.output.splitlines()
    assert lines[:4] == ["src/App.tsx(3,1)", "in .", "vite.config.ts", "~/.npmrc"]
    assert lines[4] == "node_modules/.spotpatch/wt-other/x"  # "wt-other" is not the worktree "wt"


async def test_no_credential_reaches_the_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "SPOTPATCH_SESSION_TOKEN", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN",
                 "NPM_CONFIG__AUTH", "DB_PASSWORD", "LC_API_TOKEN", "UNRELATED_SETTING"):
        monkeypatch.setenv(name, CANARY)
    monkeypatch.setenv("NODE_OPTIONS", "--max-old-space-size=64")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    result = await run("import json, os; print(json.dumps(dict(os.environ)))", tmp_path)
    env = json.loads(result.output)
    assert CANARY not in result.output
    assert set(env) <= {"PATH", "HOME", "LANG", "TMPDIR", "LC_ALL", "LC_CTYPE", "CI", "FORCE_COLOR", "NO_COLOR",
                        "PWD"} | {k for k in env if k.startswith("LC_") and "TOKEN" not in k}
    assert "NODE_OPTIONS" not in env and "LC_API_TOKEN" not in env
    assert (env["CI"], env["FORCE_COLOR"], env["NO_COLOR"], env["LC_ALL"]) == ("1", "0", "1", "C.UTF-8")
    assert env["PATH"]  # shown with $HOME as ~, like every path in the output


async def test_node_options_only_when_the_check_lists_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODE_OPTIONS", "--max-old-space-size=64")
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    script = "import os; print(os.environ.get('NODE_OPTIONS'), os.environ.get('OPENAI_API_KEY'))"
    assert (await run(script, tmp_path)).output == "None None\n"
    listed = await run(script, tmp_path, pass_env=["NODE_OPTIONS"])
    assert listed.output == "--max-old-space-size=64 None\n"
    assert "NODE_OPTIONS" not in check_env()
    assert check_env(["NODE_OPTIONS", "OPENAI_API_KEY"]).keys() >= {"NODE_OPTIONS"}
    assert "OPENAI_API_KEY" not in check_env(["NODE_OPTIONS", "OPENAI_API_KEY"])


@pytest.mark.parametrize("names", [["OPENAI_API_KEY"], ["GITHUB_TOKEN"], ["PATH"], ["NODE_OPTIONS", "NODE_OPTIONS"]])
def test_pass_env_accepts_only_node_options(names: list[str]) -> None:
    with pytest.raises(ValidationError):
        CheckConfig.model_validate({"id": "t", "name": "T", "command": "tsc", "passEnv": names})
    assert CheckConfig.model_validate({"id": "t", "name": "T", "command": "tsc", "passEnv": ["NODE_OPTIONS"]}).pass_env


async def test_a_command_that_cannot_start_is_a_failure_not_an_exception(tmp_path: Path) -> None:
    check = CheckConfig(id="missing", name="Missing", command=str(tmp_path / "no-such-tool"), args=["--x"])
    result = await run_check_process(check, tmp_path, Limits())
    assert result.status == "failed" and not result.started and not result.ok
    assert (result.exit_code, result.signal) == (None, None)
    assert "could not be started" in result.output and str(tmp_path) not in result.output


async def test_shell_syntax_is_not_interpreted(tmp_path: Path) -> None:
    check = CheckConfig(id="argv", name="Argv", command=sys.executable,
                        args=["-c", "import sys; print(sys.argv[1:])", "$HOME", ";", "touch", "pwned"])
    result = await run_check_process(check, tmp_path, Limits())
    assert result.output == "['$HOME', ';', 'touch', 'pwned']\n" and not (tmp_path / "pwned").exists()


def test_public_surface_is_pinned() -> None:
    import spotpatch_agent.checks as checks

    assert checks.__all__ == ["CheckRun", "Suggestion", "check_env", "check_timeout", "run_check_process",
                              "suggest_checks"]

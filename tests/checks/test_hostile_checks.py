"""Issue 14 acceptance 1: a hostile check cannot reach the user's secrets, processes, network or files.

A prompt-injected model writes ``attack.py`` and the configured checks run it (``python attack.py <attempt>``).
Every attempt must fail, and say so in the check's own output, which is what the model sees:

- through the real engine (``spotpatch-agent serve`` spawned like Vite spawns it, a real scripted provider
  on 127.0.0.1): the model creates the script with ``apply_patch`` and runs every attempt with ``run_check``;
  the host's final check stage runs the required ones again;
- the same attempts straight through :func:`run_check_process` (breadth, fast).

The host side checks each effect too: no file of the temp ``HOME``, the user's project or the host temp dir
changed; the TCP and Unix listeners got no connection; no canary (in secret stores, in the engine's and its
parent's environment) reached an output, event or provider request; no process of the check outlived it.
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spotpatch_agent.checks.runner import run_check_process
from spotpatch_agent.protocol.models import CheckConfig, Limits
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.checks._hostile import DENIED, Victim, host_processes_with, make_victim
from tests.checks._support import FILES, KEY_ENV, call, create_file_patch
from tests.engine_client import EngineProcess

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the confinement proven here is Linux's")

CANARY_ENV = "SPOTPATCH_HOSTILE_CANARY"


def attack_check(name: str, *, required: bool = True) -> dict:
    return {"id": name, "name": f"Attempt {name}", "command": sys.executable, "args": ["attack.py", name],
            "required": required, "timeoutSec": 30}


@pytest.fixture
def victim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Victim]:
    canary = "sk-hostile-canary-" + secrets.token_hex(12)
    token = f"spotpatch-hostile-daemon-{secrets.token_hex(6)}"
    found = make_victim(tmp_path, canary, token, FILES)
    # The engine's parent (here the test, like Vite) holds the canary in its environment too.
    monkeypatch.setenv(CANARY_ENV, canary)
    try:
        yield found
    finally:
        found.close()


def assert_untouched(victim: Victim, before: dict[str, bytes | None]) -> None:
    after = victim.snapshot()
    changed = sorted(k for k in set(before) | set(after) if before.get(k, b"<absent>") != after.get(k, b"<absent>"))
    assert changed == [], f"files changed on the host: {changed}"
    assert victim.accepted() == 0, "the TCP listener on 127.0.0.1 got a connection"
    for sock in victim.sockets:
        sock.setblocking(False)
        with pytest.raises(BlockingIOError):
            sock.accept()
    assert host_processes_with(victim.token) == [], "a process of the check outlived it"


def tool_texts(server: ScriptedProviderServer) -> dict[str, str]:
    """``tool_call_id → content`` of every tool result the engine sent the model (last request holds all)."""
    texts: dict[str, str] = {}
    for body in server.requests:
        for message in body.get("messages", []):
            if message.get("role") == "tool":
                texts[message["tool_call_id"]] = message["content"]
    return texts


def test_hostile_checks_through_the_real_engine_job(victim: Victim) -> None:
    """The model writes attack.py and runs every attempt with run_check; the host runs the required ones
    again in the final check stage. 31 attempts, each denied, twice (model run and host run)."""
    before = victim.snapshot()
    key = "sk-hostile-key-" + secrets.token_hex(12)
    with ScriptedProviderServer([]) as server:
        engine = EngineProcess(env={"HOME": str(victim.home), KEY_ENV: key, CANARY_ENV: victim.canary})
        try:
            script = victim.attack_script(engine_pid=engine.proc.pid, parent_pid=os.getpid())
            model_runs = ["daemon-start", *DENIED]
            server.add_turns(
                {"toolCalls": [call("w", "apply_patch", {"patch": create_file_patch("attack.py", script)})]},
                {"toolCalls": [call(f"r-{n}", "run_check", {"checkId": n}) for n in model_runs[:16]]},
                {"toolCalls": [call(f"r-{n}", "run_check", {"checkId": n}) for n in model_runs[16:]]},
                {"text": "Done.", "finishReason": "stop"},
            )
            config = {
                "providers": [{"id": "p", "displayName": "P", "baseUrl": server.base_url, "apiKeyEnv": KEY_ENV,
                               "models": [{"id": "m", "model": "scripted-model", "displayName": "M"}]}],
                "checks": [attack_check("daemon-start", required=False), *(attack_check(n) for n in DENIED)],
                "limits": {"maxToolCalls": 80},
            }
            init = engine.initialize(victim.project, config)
            assert init["capabilities"]["checksSandbox"]["state"] == "confined"
            job = engine.call("job/create", {"annotation": {
                "annotationId": "a", "pageUrl": "/", "targets": [{
                    "index": 1, "instruction": "Make the button say Start",
                    "source": {"file": "src/App.tsx", "line": 1},
                    "element": {"tagName": "button"}}]}, "modelProfileId": "m"})
            final = engine.wait_status(job["jobId"], {"failed", "awaiting-review", "cancelled"}, timeout=240)
            events = engine.events(job["jobId"])
            output = engine.all_output()
        finally:
            engine.close()
    assert final["status"] == "failed", final
    error = next(e["error"] for e in events if e["kind"] == "error")
    assert error["code"] == "CHECK_FAILED" and "Required check failed" in error["message"]

    # Model runs: every tool result says the check ran confined and shows the denial, never a success.
    texts = tool_texts(server)
    for name in model_runs:
        text = texts[f"r-{name}"]
        assert "Ran confined (sandbox): no network" in text, text
        if name == "daemon-start":
            assert "ATTEMPT daemon-start: SUCCEEDED" in text, text  # it started, inside the check's namespace
            continue
        assert f"ATTEMPT {name}: DENIED" in text and "SUCCEEDED" not in text, text
    # Host runs (final stage): every required attempt ran again, denied, its event says confined, no network.
    checks = {e["checkId"]: e for e in events if e["kind"] == "check"}
    assert set(checks) == set(DENIED)
    for name, event in checks.items():
        assert (event["status"], event["sandbox"], event["network"]) == ("failed", "confined", False), event
        assert f"ATTEMPT {name}: DENIED" in event["output"] and "SUCCEEDED" not in event["output"], event
    # Nothing secret anywhere the model, the page or a log sees.
    everything = repr(events) + output + repr(server.requests)
    assert victim.canary not in everything and key not in everything
    assert_untouched(victim, before)


@pytest.fixture
def worktree(victim: Victim, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A job-like worktree under the project's node_modules/.spotpatch/ holding attack.py; HOME is the victim's."""
    path = victim.project / "node_modules" / ".spotpatch" / f"job-{secrets.token_hex(4)}"
    path.mkdir(parents=True)
    (path / "attack.py").write_text(victim.attack_script(engine_pid=os.getpid(), parent_pid=os.getppid()))
    monkeypatch.setenv("HOME", str(victim.home))
    return path


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_each_hostile_attempt_is_denied_by_run_check_process(victim: Victim, worktree: Path,
                                                                    anyio_backend: str) -> None:
    before = victim.snapshot()
    for name in DENIED:
        if name == "daemon-alive":
            continue
        run = await run_check_process(CheckConfig.model_validate(attack_check(name)), worktree, Limits(),
                                      project_root=victim.project)
        assert run.sandbox == "confined" and not run.network
        assert run.status == "failed" and f"ATTEMPT {name}: DENIED" in run.output, run.output
        assert victim.canary not in run.output
    assert_untouched(victim, before)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_daemon_dies_with_its_check(victim: Victim, worktree: Path, anyio_backend: str) -> None:
    """A double-forked, setsid daemon is outside the check's process group, but inside its pid namespace:
    it is gone the moment the check returns (no wait), and a later check sees its heartbeat stopped."""
    started = await run_check_process(CheckConfig.model_validate(attack_check("daemon-start")), worktree, Limits(),
                                      project_root=victim.project)
    assert started.ok and "daemon running" in started.output, started.output
    assert host_processes_with(victim.token) == []  # checked at once: the kernel killed it with the check
    beat = (worktree / "daemon.beat").read_text()
    alive = await run_check_process(CheckConfig.model_validate(attack_check("daemon-alive")), worktree, Limits(),
                                    project_root=victim.project)
    assert "ATTEMPT daemon-alive: DENIED" in alive.output and (worktree / "daemon.beat").read_text() == beat


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_network_check_reaches_the_local_listener_and_says_so(victim: Victim, worktree: Path,
                                                                       anyio_backend: str) -> None:
    """Acceptance 2: ``network: true`` (trusted config only) lets a check connect; the run says so. The rest
    of the confinement stays: the secret stores are still hidden."""
    check = CheckConfig.model_validate({**attack_check("connect-local-listener"), "network": True})
    run = await run_check_process(check, worktree, Limits(), project_root=victim.project)
    assert run.ok and "ATTEMPT connect-local-listener: SUCCEEDED: connected and sent" in run.output
    assert (run.sandbox, run.network) == ("confined", True) and "network allowed" in run.sandbox_note()
    deadline = time.monotonic() + 5
    count = victim.accepted()
    while count == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
        count = victim.accepted()
    assert count == 1
    secret = CheckConfig.model_validate({**attack_check("read-ssh-key"), "network": True})
    denied = await run_check_process(secret, worktree, Limits(), project_root=victim.project)
    assert "ATTEMPT read-ssh-key: DENIED" in denied.output and victim.canary not in denied.output


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_attempts_are_real_unconfined_they_succeed(victim: Victim, worktree: Path, anyio_backend: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite is not vacuous: with no sandbox (``sandbox: "warn"`` on a machine made unavailable — the
    engine's behaviour before issue 14) the same script reads the key, reaches the listener and writes into
    the user's checkout."""
    monkeypatch.setenv("SPOTPATCH_SIMULATE_NO_SANDBOX", "1")
    for name in ("read-ssh-key", "connect-local-listener", "write-working-tree", "create-in-home"):
        run = await run_check_process(CheckConfig.model_validate(attack_check(name)), worktree, Limits(),
                                      project_root=victim.project, sandbox="warn")
        assert run.sandbox == "unconfined" and f"ATTEMPT {name}: SUCCEEDED" in run.output, run.output
    assert victim.accepted() == 1 and "pwned" in (victim.project / "src/App.tsx").read_text()
    assert (victim.home / "pwned.txt").exists()

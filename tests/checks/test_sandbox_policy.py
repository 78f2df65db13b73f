"""Issue 14 acceptance 3 and the engine surfaces: ``checksSandbox`` in ``initialize``/``session/get``, the
check event's ``sandbox``/``network``, the ``run_check`` result text, and ``sandbox: "required"`` vs ``"warn"``
on a machine where confinement is unavailable (simulated with ``SPOTPATCH_SIMULATE_NO_SANDBOX``, the
test-only knob). Real jobs: in-process engine, real Chat adapter, real local scripted provider, real checks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from spotpatch_agent.checks.runner import SandboxUnavailable, run_check_process
from spotpatch_agent.checks.sandbox import SIMULATE_ENV, detect
from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.protocol.models import CheckConfig, InitializeParams, Limits, TrustedConfig
from tests.conftest import make_repo
from tests.engine._gates_support import DONE, FILES, KEY_ENV, edit, py_check, run_check, run_one_job

pytestmark = pytest.mark.anyio

HAS_BWRAP = sys.platform.startswith("linux")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(KEY_ENV, "sk-test-" + "0" * 24)
    return make_repo(tmp_path / "repo", FILES)


def tool_texts(result) -> list[str]:  # noqa: ANN001 - JobRun
    return [m["content"] for body in result.server.requests for m in body.get("messages", [])
            if m.get("role") == "tool"]


PASSING = py_check("unit", "print('fine')")


async def _initialize(root: Path, config: dict) -> tuple[dict, dict]:
    from spotpatch_agent import PROTOCOL_VERSION

    service = EngineService(send_event=lambda _e: None)
    async with service.running():
        init = await service.initialize(InitializeParams.model_validate(
            {"protocolVersion": PROTOCOL_VERSION, "projectRoot": str(root), "config": config}))
        got = await service.session_get()
    return init.dump()["capabilities"], got.dump()


@pytest.mark.skipif(not HAS_BWRAP, reason="bubblewrap is the Linux sandbox")
async def test_initialize_and_session_get_report_confined_checks(root: Path) -> None:
    capabilities, session = await _initialize(root, {"checks": [PASSING]})
    expected = {"state": "confined", "mechanism": "bubblewrap", "policy": "required"}
    assert capabilities["checksSandbox"] == expected and session["checksSandbox"] == expected
    capabilities, session = await _initialize(root, {})
    assert "checksSandbox" not in capabilities and "checksSandbox" not in session  # no checks, nothing to say


async def test_session_get_shows_unavailable_with_the_reason_and_the_policy(root: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SIMULATE_ENV, "1")
    _, session = await _initialize(root, {"checks": [PASSING]})
    box = session["checksSandbox"]
    assert box["state"] == "unavailable" and box["policy"] == "required"
    assert SIMULATE_ENV in box["reason"] and 'sandbox: "warn"' in box["reason"]
    _, session = await _initialize(root, {"checks": [PASSING], "sandbox": "warn"})
    assert session["checksSandbox"]["policy"] == "warn" and "UNCONFINED" in session["checksSandbox"]["reason"]


@pytest.mark.skipif(not HAS_BWRAP, reason="bubblewrap is the Linux sandbox")
async def test_a_confined_check_says_so_in_its_event_and_its_run_check_result(root: Path) -> None:
    result = await run_one_job(root, [edit("w"), run_check("c", "unit"), DONE], checks=[PASSING])
    assert result.snap is not None and result.snap.status == "awaiting-review", result.snap
    [event] = result.kinds("check")
    assert (event["status"], event["sandbox"], event["network"]) == ("passed", "confined", False)
    [text] = [t for t in tool_texts(result) if t.startswith("Check unit")]
    assert "Ran confined (sandbox): no network" in text and "UNCONFINED" not in text


async def test_required_and_unavailable_fails_the_job_before_any_check_runs(root: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SIMULATE_ENV, "1")
    marker = root.parent / "ran"
    check = py_check("unit", f"open({str(marker)!r}, 'w').write('x')")
    result = await run_one_job(root, [edit("w"), run_check("c", "unit"), DONE], checks=[check])
    assert result.snap is not None and result.snap.status == "failed"
    assert result.snap.error is not None and result.snap.error.code == "CHECK_FAILED"
    message = result.snap.error.message
    assert 'sandbox: "required"' in message and '"sandbox": "warn"' in message and "install" in message
    assert not marker.exists() and result.kinds("check") == [] and result.server.requests == []  # no model turn


async def test_required_and_unavailable_the_runner_itself_refuses(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Defence in depth: run_check_process never runs a check unconfined unless told ``warn``."""
    monkeypatch.setenv(SIMULATE_ENV, "1")
    marker = tmp_path / "ran"
    check = CheckConfig(id="c", name="C", command=sys.executable, args=["-c", f"open({str(marker)!r}, 'w')"])
    with pytest.raises(SandboxUnavailable) as info:
        await run_check_process(check, tmp_path, Limits())
    assert info.value.code == "CHECK_FAILED" and not marker.exists()
    run = await run_check_process(check, tmp_path, Limits(), sandbox="warn")
    assert run.ok and run.sandbox == "unconfined" and run.network and marker.exists()


async def test_warn_runs_unconfined_and_every_engine_surface_says_so(root: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SIMULATE_ENV, "1")
    result = await run_one_job(root, [edit("w"), run_check("c", "unit"), DONE], checks=[PASSING], sandbox="warn")
    assert result.snap is not None and result.snap.status == "awaiting-review", result.snap
    [event] = result.kinds("check")
    assert (event["status"], event["sandbox"], event["network"]) == ("passed", "unconfined", True)
    [text] = [t for t in tool_texts(result) if t.startswith("Check unit")]
    assert "WARNING: this check ran UNCONFINED" in text


async def test_the_knob_never_loosens_a_confined_machine_without_warn(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The knob's only values: unset/0 (real detection) or anything else (unavailable); it cannot name a
    binary or a weaker mechanism, and with the default policy it only ever stops checks."""
    for value in ("1", "yes", "/bin/true", "off"):
        monkeypatch.setenv(SIMULATE_ENV, value)
        assert (await detect()).confinement is None
        with pytest.raises(SandboxUnavailable):
            await run_check_process(CheckConfig(id="c", name="C", command="true"), tmp_path, Limits())
    monkeypatch.setenv(SIMULATE_ENV, "0")
    if HAS_BWRAP:
        assert (await detect()).confinement is not None


def test_read_paths_refuse_secret_stores_and_whole_homes() -> None:
    bad = ["~/.ssh", "~/.ssh/id_ed25519", "~/.aws/credentials", "~/.config/gcloud", "~/.netrc", "~/.npmrc",
           "~/.docker/config.json", "~/.gnupg", "/home/someone/.ssh", "~/.local/share/keyrings", "/", "~",
           "relative/path", "~/../etc", "/home/someone", "~/.mozilla/firefox"]
    for raw in bad:
        with pytest.raises(ValueError, match="readPaths"):
            CheckConfig.model_validate({"id": "c", "name": "C", "command": "x", "readPaths": [raw]})
    ok = CheckConfig.model_validate({"id": "c", "name": "C", "command": "x",
                                     "readPaths": ["~/.cache/tools", "/opt/sdk"], "network": True})
    assert ok.read_paths == ["~/.cache/tools", "/opt/sdk"] and ok.network
    assert TrustedConfig().sandbox == "required"
    with pytest.raises(ValueError):
        TrustedConfig.model_validate({"sandbox": "off"})

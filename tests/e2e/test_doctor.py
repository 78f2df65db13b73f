"""``spotpatch-agent doctor`` (issue 20) on real git repositories and a scripted provider on 127.0.0.1: a
healthy set-up passes every item (exit 0); a broken one names each problem with its fix (exit 1); the key
variable is reported set or unset, never its value; the probe is bounded and can be skipped."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.conftest import make_repo
from tests.support.cli import cli

KEY_ENV = "SP_DOCTOR_KEY"
PROBE_OK = [{"toolCalls": [{"id": "p1", "name": "report_ready", "arguments": {"ready": True}}]},
            {"text": "OK", "finishReason": "stop"}]


@pytest.fixture
def canary() -> str:
    return "sk-doctor-canary-" + secrets.token_hex(12)


def project_with_config(tmp_path: Path, base_url: str, *, commit: bool = True) -> Path:
    config = {"$schema": "./spotpatch.config.schema.json", "providers": [{
        "id": "local", "displayName": "Local", "baseUrl": base_url, "apiKeyEnv": KEY_ENV,
        "models": [{"id": "m1", "model": "scripted-model", "displayName": "M1"}]}]}
    files = {"index.html": "<h1>hi</h1>\n", ".gitignore": "node_modules/\n"}
    if commit:
        files["spotpatch.config.json"] = json.dumps(config)
    root = make_repo(tmp_path / "app", files)
    if not commit:
        (root / "spotpatch.config.json").write_text(json.dumps(config))
    return root


def doctor_json(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict, str]:
    res = cli("doctor", "--json", *args, env=env)
    return res.returncode, json.loads(res.stdout), res.stdout + res.stderr


def by_id(report: dict) -> dict[str, dict]:
    return {item["id"]: item for item in report["items"]}


def test_healthy_setup_passes_every_item_and_never_shows_the_key(tmp_path: Path, canary: str) -> None:
    with ScriptedProviderServer(PROBE_OK) as server:
        project = project_with_config(tmp_path, server.base_url)
        res = cli("doctor", "--project", str(project), env={KEY_ENV: canary})
        assert len(server.requests) == 2  # the probe's two turns really reached the provider
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert out.startswith("\u2713 git: git version ")
    for line in ("\u2713 engine: spotpatch-agent ", "\u2713 project health: clean: a job can start",
                 "\u2713 config: spotpatch.config.json is valid (1 provider(s), 0 check(s))",
                 f"\u2713 provider local key: {KEY_ENV} is set",
                 "\u2713 provider local probe (m1): reachable, tool calling works",
                 "Ready: every required item passed."):
        assert line in out, line
    assert "\u2717" not in out and "fix:" not in out
    assert canary not in out + res.stderr and str(tmp_path) not in out


def test_broken_setup_names_each_problem_with_its_fix(tmp_path: Path, canary: str) -> None:
    project = make_repo(tmp_path / "app", {"index.html": "<h1>hi</h1>\n"})
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--symlinks", str(project / ".venv")],
                   check=True, capture_output=True, timeout=120)
    (project / "spotpatch.config.json").write_text(json.dumps({
        "providers": [{"id": "p", "displayName": "P", "baseUrl": "http://127.0.0.1:9/v1", "apiKeyEnv": KEY_ENV,
                       "apiKey": canary, "models": []}], "limitz": {}}))
    res = cli("doctor", "--project", str(project))
    assert res.returncode == 1
    out = res.stdout
    assert "\u2717 project health: blocked: untracked-symlink" in out
    assert ("    - untracked-symlink: .venv/\n      fix: `.venv/` is an untracked folder with symlinks "
            "(a Python virtualenv): add it to .gitignore.") in out
    assert "\u2717 config: spotpatch.config.json is not a valid SpotPatch config (3 errors)" in out
    assert "    providers.0.apiKey: Extra inputs are not permitted" in out and "    limitz: Extra inputs" in out
    assert "    fix: fix the keys listed (docs/configuration.md; unknown keys are errors)." in out
    assert "required item(s) failed: project health, config" in out
    assert canary not in out + res.stderr  # a key pasted into the config is never echoed back


def test_unset_key_fails_and_skips_the_probe_and_json_lists_the_items(tmp_path: Path) -> None:
    with ScriptedProviderServer(PROBE_OK) as server:
        project = project_with_config(tmp_path, server.base_url)
        code, report, _ = doctor_json("--project", str(project))
        assert server.requests == []
    assert code == 1 and report["ok"] is False and report["exitCode"] == 1
    items = by_id(report)
    assert list(items) == ["git", "engine", "project", "config", "key:local", "probe:m1", "agents"]
    # Bring your own agent (docs/mcp.md): the client's set-up line; no dev server runs, so nothing to attach to.
    assert items["agents"]["status"] == "skip" and items["agents"]["required"] is False
    assert "no SpotPatch engine is running for this project" in items["agents"]["detail"]
    setup = ("set up your client once: `spotpatch-agent mcp --print-config claude-code --project .` (or codex, "
             "vscode, cursor) in the app's folder prints its lines (docs/mcp.md)")
    assert items["agents"]["lines"] == [setup]
    assert items["key:local"]["status"] == "fail" and items["key:local"]["detail"] == f"{KEY_ENV} is not set"
    assert f"set {KEY_ENV} in the environment" in items["key:local"]["fix"]
    assert items["probe:m1"] == {"id": "probe:m1", "title": "provider local probe (m1)", "status": "skip",
                                 "required": False, "detail": f"skipped: {KEY_ENV} is not set", "lines": []}
    assert items["project"]["data"]["state"] == "clean"


def test_no_probe_contacts_no_provider_and_local_changes_are_a_warning(tmp_path: Path, canary: str) -> None:
    with ScriptedProviderServer(PROBE_OK) as server:
        project = project_with_config(tmp_path, server.base_url, commit=False)
        code, report, text = doctor_json("--project", str(project), "--no-probe", env={KEY_ENV: canary})
        assert server.requests == []
    assert code == 0, text
    items = by_id(report)
    assert items["probe:m1"]["status"] == "skip" and items["probe:m1"]["detail"] == "skipped (--no-probe)"
    project_item = items["project"]
    assert project_item["status"] == "warn" and "--include-local-changes" in project_item["fix"]
    assert project_item["lines"][0] == "- local-changes: spotpatch.config.json"
    assert canary not in text


def test_probe_failure_is_bounded_and_redacts_what_the_server_said(tmp_path: Path, canary: str) -> None:
    turns = [{"status": 401, "body": {"error": {"message": f"invalid key {canary}"}}}]
    with ScriptedProviderServer(turns) as server:
        project = project_with_config(tmp_path, server.base_url)
        code, report, text = doctor_json("--project", str(project), env={KEY_ENV: canary})
    assert code == 1
    probe = by_id(report)["probe:m1"]
    assert probe["status"] == "fail" and probe["detail"].startswith("PROVIDER_AUTH")
    assert "--no-probe" in probe["fix"] and canary not in text
    with ScriptedProviderServer([{"stall": True}]) as server:
        project2 = project_with_config(tmp_path / "two", server.base_url)
        started = time.monotonic()
        code, report, text = doctor_json("--project", str(project2), "--probe-timeout", "2",
                                         env={KEY_ENV: canary})
        elapsed = time.monotonic() - started
    assert code == 1 and elapsed < 30, elapsed
    assert by_id(report)["probe:m1"]["detail"].startswith("PROVIDER_UNAVAILABLE: the probe took longer than 2 s")


def test_not_a_repository_fails_with_git_init(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    code, report, _ = doctor_json("--project", str(tmp_path / "plain"), "--no-probe")
    project = by_id(report)["project"]
    assert code == 1 and project["status"] == "fail" and "git init" in project["fix"]
    assert list((tmp_path / "plain").iterdir()) == []  # doctor wrote nothing


def test_a_committed_virtualenv_is_a_warning_with_the_fix(tmp_path: Path, canary: str) -> None:
    project = make_repo(tmp_path / "app", {"index.html": "<h1>hi</h1>\n", ".venv/pyvenv.cfg": "home = /usr/bin\n",
                                           ".venv/lib/site.py": "x = 1\n", "venv/readme.txt": "not a venv\n"})
    code, report, text = doctor_json("--project", str(project), "--no-probe", env={KEY_ENV: canary})
    items = by_id(report)
    assert items["project"]["status"] == "pass", text
    item = items["committed-venv:.venv"]
    assert item["status"] == "warn" and item["detail"] == "`.venv/` is committed (2 tracked files)"
    assert item["fix"] == "remove it from git (`git rm -r --cached .venv`) and add it to `.gitignore`."
    assert "committed-venv:venv" not in items, "a folder without pyvenv.cfg is not a virtualenv"


def test_a_vision_profile_is_probed_with_an_image_and_a_refusal_is_a_warning(tmp_path: Path, canary: str) -> None:
    refused = {"status": 400, "body": {"error": {"message": "image input is not supported", "type": "invalid"}}}
    accepted = {"text": "Red", "finishReason": "stop"}
    for answer, mark, says in ((accepted, "\u2713", "tool calling works, images accepted"),
                               (refused, "!", "refused an image part")):
        with ScriptedProviderServer([*PROBE_OK, answer]) as server:
            project = project_with_config(tmp_path / mark.encode().hex(), server.base_url)
            config = json.loads((project / "spotpatch.config.json").read_text())
            config["providers"][0]["models"][0]["vision"] = True
            (project / "spotpatch.config.json").write_text(json.dumps(config))
            res = cli("doctor", "--project", str(project), env={KEY_ENV: canary})
            assert len(server.requests) == 3  # the third carried the image part
            assert server.requests[2]["messages"][-1]["content"][1]["type"] == "image_url"
        line = next(li for li in res.stdout.splitlines() if "probe (m1)" in li)
        assert line.startswith(mark) and says in line, res.stdout
        assert res.returncode == 0, res.stdout  # a refused image is a warning, not a failure

"""The console script as a user runs it (issue 2, items 1–2 of "what a user can do")."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from spotpatch_agent.demo.runner import make_demo_project
from spotpatch_agent.demo.script import demo_turns
from spotpatch_agent.demo.typecheck import COMPLETE, DEMO_NODE_PACKAGES, OFFLINE_ENV, cache_key
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.conftest import git
from tests.support.cli import cli


def test_demo_exits_0_offline_and_says_no_model_is_involved() -> None:
    res = cli("demo")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "NO MODEL IS INVOLVED" in res.stdout
    for step in ("status: awaiting-review", "diff --git a/src/components/ProductCard.tsx", "status: applied",
                 "${price.toFixed(2)}", "status: reverted", "Restored byte for byte"):
        assert step in res.stdout, step


def test_run_without_provider_prints_the_prompt_and_exits_3(tmp_path: Path) -> None:
    project = make_demo_project(tmp_path / "app")
    res = cli("run", "--project", str(project), "--target", "src/components/ProductCard.tsx:12:7",
              "--instruction", "Make it primary")
    assert res.returncode == 3, res.stderr
    assert "## Target 1" in res.stdout and "Make it primary" in res.stdout
    assert "src/components/ProductCard.tsx:12:7" in res.stdout
    assert "apiKeyEnv" in res.stderr


def test_run_saves_the_diff_for_review_and_apply_writes_exactly_it(tmp_path: Path) -> None:
    project = make_demo_project(tmp_path / "app")
    turns = demo_turns()
    with ScriptedProviderServer(turns) as server:
        cfg = tmp_path / "spotpatch.config.json"
        cfg.write_text(json.dumps({"providers": [{
            "id": "s", "displayName": "S", "baseUrl": server.base_url, "apiKeyEnv": "SP_RUN_KEY",
            "models": [{"id": "m", "model": "scripted-model", "displayName": "M"}]}]}))
        res = cli("run", "--project", str(project), "--config", str(cfg),
                  "--target", "src/components/ProductCard.tsx:12:7", "--instruction", "Make the Save button primary",
                  "--target", "src/components/ProductCard.tsx:11:7", "--instruction", "Two decimals",
                  env={"SP_RUN_KEY": "sk-run-key-123456"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "btn btn-primary" not in (project / "src/components/ProductCard.tsx").read_text()  # nothing applied
    job_id, sha = re.search(r"spotpatch-agent apply --project \S+ (job_[0-9a-f]{16}) --sha256 ([0-9a-f]{64})",
                            res.stdout).groups()
    assert f"Review it, then apply exactly this diff: spotpatch-agent apply --project {project} {job_id}" in res.stdout
    applied = cli("apply", "--project", str(project), job_id, "--sha256", sha)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert f"Applied {job_id}: src/components/ProductCard.tsx (diff sha256 {sha})." in applied.stdout
    assert "btn btn-primary" in (project / "src/components/ProductCard.tsx").read_text()
    assert git(project, "diff", "--cached") == ""
    assert "sk-run-key-123456" not in res.stdout + res.stderr + applied.stdout + applied.stderr


# ---------------------------------------------------------------- the demo's typecheck check (issue 8)


@pytest.fixture(autouse=True)
def _demo_never_calls_the_registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Every demo in this module is offline (tests never reach a registry) with a private, empty cache."""
    monkeypatch.setenv(OFFLINE_ENV, "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def seed_fake_typescript(cache: Path, tsc_script: str) -> None:
    """A complete demo cache entry whose ``tsc`` is ``tsc_script`` (Node), instead of the registry's TypeScript."""
    modules = cache / "spotpatch" / "demo-node_modules" / cache_key() / "node_modules"
    tsc = modules / "typescript" / "bin" / "tsc"
    tsc.parent.mkdir(parents=True)
    tsc.write_text("#!/usr/bin/env node\n" + tsc_script)
    tsc.chmod(0o755)
    (modules / "typescript" / "package.json").write_text('{"name": "typescript", "version": "0.0.0-fake"}')
    (modules / ".bin").mkdir()
    (modules / ".bin" / "tsc").symlink_to("../typescript/bin/tsc")
    (modules.parent / COMPLETE).write_text("\n".join(DEMO_NODE_PACKAGES))


needs_npm = pytest.mark.skipif(shutil.which("npm") is None or shutil.which("node") is None, reason="needs node and npm")

FAKE_TSC_PASS = "console.log('fake tsc ' + process.argv.slice(2).join(' ') + ': 0 errors in ' + process.cwd());\n"
FAKE_TSC_FAIL_AFTER_CHANGE = (
    "const text = require('fs').readFileSync('src/components/ProductCard.tsx', 'utf8');\n"
    "if (text.includes('btn-primary')) {\n"
    "  console.log('\\x1b[31m' + process.cwd() +\n"
    "    '/src/components/ProductCard.tsx(12,1): error TS9999: fake\\x1b[0m');\n"
    "  process.exit(2);\n"
    "}\n"
)


def test_demo_offline_without_typescript_skips_the_check_and_still_runs() -> None:
    res = cli("demo")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"typecheck check skipped: {OFFLINE_ENV}=1 and TypeScript is not cached yet" in res.stdout
    assert "--- checks" not in res.stdout and "Restored byte for byte" in res.stdout


@needs_npm
def test_demo_runs_the_typecheck_check_and_shows_name_status_duration_and_output(
        _demo_never_calls_the_registry: Path) -> None:
    seed_fake_typescript(_demo_never_calls_the_registry, FAKE_TSC_PASS)
    res = cli("demo")
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert "typecheck check: npm run --silent typecheck" in out and "passes on the unchanged app" in out
    assert "turn 4: run_check → ok" in out and "check typecheck: passed" in out
    section = out.split("--- checks (the job's final results) ---", 1)[1]
    assert re.search(r"Type check \[typecheck, required\]: PASSED in \d+ ms \(confined, no network\)\n"
                     r"    \| fake tsc --noEmit: 0 errors in \.\n", section), section
    assert "Checks run confined (bubblewrap)" in out and "check typecheck: passed" in out
    assert "/tmp" not in section and "Restored byte for byte" in out


@needs_npm
def test_demo_shows_a_failing_typecheck_with_its_output_and_fails(_demo_never_calls_the_registry: Path) -> None:
    seed_fake_typescript(_demo_never_calls_the_registry, FAKE_TSC_FAIL_AFTER_CHANGE)
    res = cli("demo")
    assert res.returncode == 1, res.stdout + res.stderr
    section = res.stdout.split("--- checks (the job's final results) ---", 1)[1]
    assert re.search(r"Type check \[typecheck, required\]: FAILED in \d+ ms \(confined, no network\)\n"
                     r"    \| src/components/ProductCard.tsx\(12,1\): error TS9999: fake\n", section), section
    assert "\x1b" not in res.stdout and "status: applied" not in res.stdout and "Demo FAILED" in res.stdout


def test_checks_suggest_on_the_demo_app_proposes_its_typecheck_script(tmp_path: Path) -> None:
    project = make_demo_project(tmp_path / "app")
    res = cli("checks", "suggest", "--root", str(project))
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == {"checks": [{"id": "typecheck", "name": "Type check", "command": "npm",
                                                  "args": ["run", "--silent", "typecheck"], "required": True}]}
    assert "Skipped script 'dev'" in res.stderr and "Skipped script 'build'" in res.stderr
    assert git(project, "status", "--porcelain") == ""


# ---------------------------------------------------------------- checks without a sandbox (issue 14)


def _run_with_check(tmp_path: Path, **config: object) -> subprocess.CompletedProcess[str]:
    import sys

    project = make_demo_project(tmp_path / "app")
    check = {"id": "unit", "name": "Unit", "command": sys.executable, "args": ["-c", "print('unit ok')"]}
    with ScriptedProviderServer(demo_turns(check_id="unit")) as server:
        cfg = tmp_path / "spotpatch.config.json"
        cfg.write_text(json.dumps({"providers": [{
            "id": "s", "displayName": "S", "baseUrl": server.base_url, "apiKeyEnv": "SP_RUN_KEY",
            "models": [{"id": "m", "model": "scripted-model", "displayName": "M"}]}], "checks": [check], **config}))
        return cli("run", "--project", str(project), "--config", str(cfg),
                   "--target", "src/components/ProductCard.tsx:12:7", "--instruction", "Make the Save button primary",
                   "--target", "src/components/ProductCard.tsx:11:7", "--instruction", "Two decimals",
                   env={"SP_RUN_KEY": "sk-run-key-123456", "SPOTPATCH_SIMULATE_NO_SANDBOX": "1"})


def test_run_warns_prominently_when_checks_run_unconfined(tmp_path: Path) -> None:
    res = _run_with_check(tmp_path, sandbox="warn")
    assert res.returncode == 0, res.stdout + res.stderr
    for stream in (res.stdout, res.stderr):
        assert "WARNING: checks will run UNCONFINED" in stream and 'sandbox: "warn"' in stream
    assert re.search(r"check unit: passed, \d+ ms — RAN UNCONFINED", res.stdout), res.stdout


def test_run_with_sandbox_required_and_none_available_fails_with_the_reason_and_the_fix(tmp_path: Path) -> None:
    res = _run_with_check(tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "NOTE: checks cannot run here" in res.stderr
    assert re.search(r"Job failed: CHECK_FAILED: Checks cannot run: they must run confined \(sandbox: \"required\"\)",
                     res.stdout), res.stdout
    assert '"sandbox": "warn"' in res.stdout and "check unit:" not in res.stdout


@needs_npm
def test_demo_without_a_sandbox_says_so_and_runs_its_scripted_check_unconfined(
        _demo_never_calls_the_registry: Path) -> None:
    seed_fake_typescript(_demo_never_calls_the_registry, FAKE_TSC_PASS)
    res = cli("demo", env={"SPOTPATCH_SIMULATE_NO_SANDBOX": "1"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "WARNING: checks cannot be confined on this machine" in res.stdout
    assert 'runs its typecheck check UNCONFINED (sandbox: "warn")' in res.stdout
    assert re.search(r"Type check \[typecheck, required\]: PASSED in \d+ ms — RAN UNCONFINED", res.stdout), res.stdout

"""Breaker regressions for the checks and the apply modes (issue 8: "gates that cannot be talked around").

Each test names the hole it closes: a model that rewrites the file a check runs, a check configuration
that judges the code, a check whose writes reach the diff, a cancel racing the automatic Apply, a check
that reads the engine's environment through ``/proc``, a relative ``PATH`` entry resolved in the worktree,
and terminal controls that survive the output cleaning."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from spotpatch_agent.checks.runner import check_env, clean_output, run_check_process
from spotpatch_agent.engine import gates
from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.protocol.models import (
    CheckConfig,
    FileStat,
    JobCreateParams,
    JobIdParams,
    Limits,
    TrustedConfig,
)
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.conftest import git, make_repo
from tests.engine._gates_support import (
    APP,
    DONE,
    FILES,
    KEY_ENV,
    TARGET,
    call,
    counting_check,
    edit,
    py_check,
    run_check,
    run_one_job,
    runs,
)

AUTO = {"modes": {"auto": True}, "request": {"applyMode": "auto"}}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-canary-" + secrets.token_hex(12))


def _fact(*paths: str, checks: list[CheckConfig] | None = None) -> gates.GateFacts:
    return gates.GateFacts(capability_proven=True, checks=checks or [],
                           files=[FileStat(path=p, added=1, removed=0, status="modified") for p in paths], results=[])


# ---------------------------------------------------------------- the model rewrites what a check runs


@pytest.mark.anyio
async def test_auto_does_not_apply_when_the_model_rewrites_the_check_script(tmp_path: Path) -> None:
    """Repro: the trusted check is ``./scripts/check.sh`` (tracked, executable, ``exit 1``). The model edits
    it to ``exit 0`` with replace_text (allowed: a plain text file, its mode kept); the host then runs the
    model's script as the "required check", it passes, and auto applied "every gate passed"."""
    root = make_repo(tmp_path / "repo", FILES | {"scripts/check.sh": "#!/bin/sh\nexit 1\n"})
    os.chmod(root / "scripts/check.sh", 0o755)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "check script")
    turns = [edit("w"), edit("w2", "exit 1", "exit 0", "scripts/check.sh"), DONE]
    result = await run_one_job(root, turns, checks=[{"id": "c", "name": "C", "command": "./scripts/check.sh"}],
                               **AUTO)
    assert result.snap is not None and result.snap.status == "awaiting-review", result.statuses
    assert "files the checks run" in (result.snap.message or "") and "scripts/check.sh" in result.snap.message
    assert (root / "scripts/check.sh").read_text() == "#!/bin/sh\nexit 1\n"
    assert (root / "src/App.tsx").read_text() == APP


def test_check_input_paths_cover_command_and_args() -> None:
    checks = [CheckConfig(id="a", name="A", command="node", args=["scripts/verify.mjs", "--config=./lint.json"],
                          required=False),
              CheckConfig(id="b", name="B", command="./bin/Check", required=False)]
    inputs = gates.check_input_paths(checks)
    assert {"scripts/verify.mjs", "lint.json", "bin/check"} <= inputs
    assert gates.auto_apply_blockers(_fact("scripts/verify.mjs", checks=checks))
    assert gates.auto_apply_blockers(_fact("Bin/check", checks=checks))
    assert gates.auto_apply_blockers(_fact("src/App.tsx", checks=checks)) == []  # ordinary code still applies


@pytest.mark.parametrize("path", ["eslint.config.js", "web/.eslintrc.json", "vitest.config.mts", "jest.config.ts",
                                  ".prettierrc", "tests/conftest.py", "pkg/pytest.ini", "biome.json"])
def test_check_configuration_blocks_auto(path: str) -> None:
    """Repro: the model disables the lint rule / excludes the failing test in the runner's config; the
    check "passes" and auto applied. A change to a linter/formatter/test-runner config falls back to review."""
    [reason] = gates.auto_apply_blockers(_fact(path))
    assert "configured by" in reason and path in reason


@pytest.mark.parametrize("path", ["sub/package.json", "./package.json", "packages/a/PACKAGE.JSON", "vite.config.mts",
                                  "web/tsconfig.app.json", "deno.json"])
def test_dependency_and_config_files_in_subdirectories_block_auto(path: str) -> None:
    assert gates.auto_apply_blockers(_fact(path))


# ---------------------------------------------------------------- a model-run check that writes


@pytest.mark.anyio
async def test_auto_does_not_apply_files_a_model_run_check_wrote(tmp_path: Path) -> None:
    """Repro: the model calls run_check; the check writes src/gen.ts (idempotently). The write lands in the
    diff (by design: a reviewed side effect), the final re-run changes nothing, and auto applied a file no
    file tool wrote. Review keeps it; auto falls back to review."""
    root = make_repo(tmp_path / "repo", FILES)
    check = py_check("gen", "open('src/gen.ts', 'w').write('export const x = 1;\\n')")
    result = await run_one_job(root, [edit("w"), run_check("c", "gen"), DONE], checks=[check], **AUTO)
    assert result.snap is not None and result.snap.status == "awaiting-review", result.statuses
    assert "a check run during the job changed files" in (result.snap.message or "")
    assert "src/gen.ts" in [f.path for f in result.diff.files]
    assert not (root / "src/gen.ts").exists() and (root / "src/App.tsx").read_text() == APP


@pytest.mark.anyio
async def test_run_check_then_write_in_the_same_turn_is_stale(tmp_path: Path) -> None:
    """run_check (passes) and replace_text in one turn: the check ran first (event order), so its pass is
    stale; the host runs it again on the final tree, where it fails."""
    root = make_repo(tmp_path / "repo", FILES)
    counter = tmp_path / "n"
    both = {"toolCalls": [call("c", "run_check", {"checkId": "v"}),
                          call("w2", "replace_text", {"path": "src/App.tsx", "oldText": ">Start<",
                                                      "newText": ">FORBIDDEN<"})]}
    result = await run_one_job(root, [edit("w"), both, DONE],
                               checks=[counting_check("v", counter, fail_if="FORBIDDEN")], **AUTO)
    assert result.snap is not None and result.snap.status == "failed" and result.snap.error.code == "CHECK_FAILED"
    assert runs(counter) == 2 and (root / "src/App.tsx").read_text() == APP


@pytest.mark.anyio
async def test_trusted_auto_run_check_is_an_unknown_tool_never_executed(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    counter = tmp_path / "n"
    result = await run_one_job(root, [edit("w"), run_check("c", "v"), DONE], checks=[counting_check("v", counter)],
                               modes={"trustedAuto": True},
                               request={"applyMode": "trusted-auto", "trustedFastModeConsent": True})
    assert runs(counter) == 0
    assert result.snap is not None and result.snap.status == "applied"
    [finished] = [e for e in result.events if e["kind"] == "activity" and e.get("tool") == "run_check"
                  and e.get("phase") == "finished"]
    assert finished["ok"] is False and finished["errorCode"] == "TOOL_ARGUMENTS_INVALID"


# ---------------------------------------------------------------- job/cancel racing the automatic Apply


@pytest.mark.anyio
async def test_cancel_while_auto_apply_waits_for_the_write_lock_is_not_applied(tmp_path: Path) -> None:
    """Repro: every gate held; the automatic Apply waits for the write lock (another job's Apply/Revert).
    job/cancel arrives then: it answered without error, and the change was applied once the lock was free."""
    root = make_repo(tmp_path / "repo", FILES)
    events: list[dict] = []
    with ScriptedProviderServer([edit("w"), DONE]) as server:
        config = TrustedConfig.model_validate({"providers": [{
            "id": "p", "displayName": "P", "baseUrl": server.base_url, "apiKeyEnv": KEY_ENV,
            "models": [{"id": "m", "model": "scripted-model", "displayName": "M"}]}],
            "checks": [py_check("ok", "print('ok')")], "modes": {"auto": True}})
        service = EngineService(send_event=events.append)
        async with service.running():
            await service.configure(root, config)
            lock = service._lock()
            await lock.acquire()  # stands for another job's Apply in progress
            snap = await service.job_create(JobCreateParams.model_validate(
                {"annotation": TARGET, "modelProfileId": "m", "applyMode": "auto"}))
            with anyio.fail_after(30):
                while lock.statistics().tasks_waiting == 0:
                    await anyio.sleep(0.02)
            ids = JobIdParams(job_id=snap.job_id)
            async with anyio.create_task_group() as tg:
                tg.start_soon(service.job_cancel, ids)
                job = service._jobs[snap.job_id]
                with anyio.fail_after(5):
                    while not job.cancel_scope.cancel_called:
                        await anyio.sleep(0.01)
                lock.release()
            await service.wait_job(snap.job_id)
            final = await service.job_get(ids)
    assert final.status == "cancelled", [e.get("status") for e in events if e["kind"] == "status"]
    assert (root / "src/App.tsx").read_text() == APP and git(root, "status", "--porcelain") == ""


# ---------------------------------------------------------------- the check process and its output


_READ_PARENT_ENV = ("import os\ntry:\n    d = open('/proc/%d/environ' % os.getppid(), 'rb').read()\n"
                    "except OSError as e:\n    print('denied', e.errno)\nelse:\n"
                    "    print('LEAK' if b'SPOTPATCH_BREAKER_KEY' in d else 'absent')\n")
_ENGINE = f"""
import anyio, ctypes, sys
from pathlib import Path
from spotpatch_agent.checks.runner import run_check_process
from spotpatch_agent.protocol.models import CheckConfig, Limits
async def main():
    check = CheckConfig(id='c', name='c', command=sys.executable, args=['-c', {_READ_PARENT_ENV!r}])
    run = await run_check_process(check, Path(sys.argv[1]), Limits())
    print(run.output.strip())
    print('dumpable', ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))
anyio.run(main)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl are Linux")
def test_a_check_cannot_read_the_provider_key_from_the_engine_proc_environ(tmp_path: Path) -> None:
    """Repro: check_env keeps the key out of the check's environment, but the check (project code the model
    may have written) read it from /proc/<engine pid>/environ, its parent's. The engine now makes itself
    non-dumpable before its first check, which closes those entries to same-user processes (root with
    CAP_SYS_PTRACE still can: then only the prctl is asserted)."""
    env = dict(os.environ, SPOTPATCH_BREAKER_KEY="sk-breaker-" + secrets.token_hex(8))
    out = subprocess.run([sys.executable, "-c", _ENGINE, str(tmp_path)], env=env, capture_output=True, text=True,
                         timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    assert "dumpable 0" in out.stdout
    if os.geteuid() != 0:
        assert "LEAK" not in out.stdout and "denied" in out.stdout, out.stdout


def test_check_env_drops_relative_and_empty_path_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", os.pathsep.join(["", ".", "node_modules/.bin", "/usr/bin", "bin", "/bin", ""]))
    assert check_env()["PATH"] == os.pathsep.join(["/usr/bin", "/bin"])


@pytest.mark.anyio
@pytest.mark.skipif(os.name != "posix", reason="POSIX exec bits")
async def test_a_bare_command_never_resolves_to_a_worktree_file(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Repro: PATH with an empty entry (``:/usr/bin``, a common slip) made a bare command ``mycheck``
    resolve to ``<worktree>/mycheck`` — a file the model may write."""
    fake = tmp_path / "spotpatch-breaker-check"
    fake.write_text("#!/bin/sh\necho FROM-WORKTREE\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep + os.environ.get("PATH", "/usr/bin"))
    run = await run_check_process(CheckConfig(id="c", name="C", command="spotpatch-breaker-check"), tmp_path, Limits())
    assert not run.started and "FROM-WORKTREE" not in run.output


def test_output_loses_c1_controls_and_bidi_overrides() -> None:
    raw = "a\u009b31mred\u009d0;title\u0007 \u202eevil\u2066x\u2069 \x1b]8;;https://e.x\x1b\\link\x1b]8;;\x1b\\"
    text, _ = clean_output(raw.encode(), max_bytes=1000, truncated=False)
    assert text == "a31mred0;title evilx link", json.dumps(text)


# ---------------------------------------------------------------- files that change how git and tools treat the project


@pytest.mark.parametrize("path", [".gitattributes", "src/.gitattributes", ".gitignore", "web/.GitIgnore",
                                  ".gitmodules"])
def test_git_attributes_ignore_and_modules_block_auto(path: str) -> None:
    """Repro: the model adds ``* filter=x`` / ``diff=x`` to a ``.gitattributes`` (or un-ignores files) and auto
    applied it: git then runs a user-configured driver on those files, or starts tracking what was ignored."""
    assert gates.is_tooling_config(path)
    [reason] = gates.auto_apply_blockers(_fact(path))
    assert "git, hook, CI or environment configuration" in reason and path in reason


@pytest.mark.parametrize("path", [".husky/pre-commit", "web/.husky/_/husky.sh", ".githooks/pre-push",
                                  ".pre-commit-config.yaml", "lefthook.yml"])
def test_git_hooks_block_auto(path: str) -> None:
    """Repro: the model writes a hook script that runs on the user's next ``git commit``; auto applied it."""
    [reason] = gates.auto_apply_blockers(_fact(path))
    assert "hook" in reason and path in reason


@pytest.mark.parametrize("path", [".github/workflows/ci.yml", ".github/dependabot.yml", "pkg/.github/actions/x.yml",
                                  ".gitlab-ci.yml", ".circleci/config.yml"])
def test_ci_configuration_blocks_auto(path: str) -> None:
    """Repro: the model edits a workflow that runs with the repository's CI secrets; auto applied it."""
    [reason] = gates.auto_apply_blockers(_fact(path))
    assert "CI" in reason and path in reason


@pytest.mark.parametrize("path", [".envrc", "web/.envrc", ".env-local", ".env_test"])
def test_unprotected_env_files_block_auto(path: str) -> None:
    """``.env`` and ``.env.*`` are protected (never writable); other ``.env*`` names are not, and ``.envrc``
    is shell code direnv runs on ``cd``: auto falls back to review."""
    from spotpatch_agent.policy.paths import is_protected

    assert not is_protected(path, for_write=True)
    [reason] = gates.auto_apply_blockers(_fact(path))
    assert "environment configuration" in reason and path in reason


@pytest.mark.parametrize("path", [".env", ".env.local", "web/.env.production", ".npmrc", "sub/.npmrc"])
def test_protected_env_and_npmrc_are_protected_and_block_auto(path: str) -> None:
    """These cannot be written at all (changeset validation rejects them); the gate blocks them too."""
    from spotpatch_agent.policy.paths import is_protected

    assert is_protected(path, for_write=True)
    assert gates.auto_apply_blockers(_fact(path))


@pytest.mark.parametrize("path", [".npmrc", ".yarnrc", ".yarnrc.yml", "web/.yarnrc.yaml", ".pnpmfile.cjs",
                                  "sub/.pnpmfile.mjs", "bunfig.toml"])
def test_package_manager_configuration_blocks_auto(path: str) -> None:
    """Package-manager config (registry, install hooks) is a dependency change for the gate."""
    assert gates.is_dependency_file(path)
    reasons = gates.auto_apply_blockers(_fact(path))
    assert any("dependency files" in r and path in r for r in reasons)


@pytest.mark.parametrize("path", ["tsconfig.json", "tsconfig.build.json", "tsconfig-app.json", "web/tsconfig.node.json",
                                  "packages/a/TSCONFIG_base.JSON", "jsconfig.json"])
def test_every_tsconfig_name_blocks_auto(path: str) -> None:
    """A type-check is configured by tsconfig*.json (``"strict": false``, ``"exclude"``): every name starting
    with ``tsconfig`` and ending ``.json``, any directory, falls back to review."""
    assert gates.is_dev_server_config(path)
    [reason] = gates.auto_apply_blockers(_fact(path))
    assert path in reason


@pytest.mark.parametrize("path", ["src/App.tsx", "src/git.ts", "src/docs/github.md", "src/environment.ts",
                                  "src/tsconfig.ts", "src/husky/notes.md"])
def test_ordinary_files_near_tooling_names_still_apply(path: str) -> None:
    """(Under ``src/``: since issue 25 a file outside the source directories goes to review anyway.)"""
    assert not gates.is_tooling_config(path) and not gates.is_dependency_file(path)
    assert gates.auto_apply_blockers(_fact(path)) == []

"""Issue 17, start-up and shutdown: nothing proportional to the repository before ``initialize``'s reply or on
the shutdown path, and the behaviour is the same as before.

- ``initialize`` answers while the health check (``git status`` and a walk of the tree) is still running; a
  ``job/create`` waits for it, and a blocked or dirty repository is refused exactly as before;
- closing the warm pool (the engine's shutdown) moves its worktree aside in one rename and deletes only the
  small registration; the files go in the background of the next start (``empty_trash``), which also finishes
  a deletion an exit cut short; nothing else is deleted (never through a symlink, never a user's directory);
- the sweep moves an orphan aside the same way (its cost no longer grows with the checkout);
- ``initialize``'s imports leave out what it does not need, and the protocol models are built on first use.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

import spotpatch_agent.engine.service as service_module
import spotpatch_agent.worktree.removal as removal
from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import InitializeParams, JobCreateParams, TrustedConfig
from spotpatch_agent.worktree.create import create_worktree
from spotpatch_agent.worktree.marker import MARKER_NAME
from spotpatch_agent.worktree.placement import Worktree
from spotpatch_agent.worktree.pool import WorktreePool
from spotpatch_agent.worktree.removal import TRASH_PREFIX, empty_trash
from spotpatch_agent.worktree.sweep import sweep_orphans
from tests.worktree._util import run, temp_base, worktree_list

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
FILES = {".gitignore": "node_modules/\n", "a.txt": "alpha\n", "src/app.js": "export const n = 1;\n"}
KEY_ENV = "SPOTPATCH_TEST_SCALE_KEY"


def _config() -> TrustedConfig:
    return TrustedConfig.model_validate({"providers": [{
        "id": "p", "displayName": "P", "baseUrl": "http://127.0.0.1:9/v1", "apiKeyEnv": KEY_ENV,
        "models": [{"id": "m", "model": "scripted-model", "displayName": "M"}]}], "checks": [], "limits": {}})


def _init_params(root: Path) -> InitializeParams:
    return InitializeParams.model_validate({"protocolVersion": "0.1", "clientInfo": {"name": "pytest"},
                                            "projectRoot": str(root), "config": _config().dump()})


def _create_params() -> JobCreateParams:
    return JobCreateParams.model_validate({"annotation": {"annotationId": "a", "pageUrl": "/", "targets": [
        {"index": 1, "instruction": "x", "element": {"tagName": "h1", "text": "x", "attributes": {}}}]},
        "modelProfileId": "m"})


def _registrations(root: Path) -> list[Path]:
    return [p for p in worktree_list(root) if p.resolve() != root.resolve()]


async def test_initialize_answers_before_the_health_check_and_job_create_does_not_wait_for_it(
        repo_factory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The health check runs after the reply: held here, initialize still answers; a job/create sent meanwhile
    waits only for the pool's opening, not for it (issue 17: the first job's start), and its own health check
    gives the same refusal as before (the repository is dirty: CONSENT_REQUIRED)."""
    root = repo_factory(FILES)
    (root / "a.txt").write_text("changed\n")
    monkeypatch.setenv(KEY_ENV, "sk-test")
    monkeypatch.setenv("SPOTPATCH_WORKTREE_POOL", "1")
    release, started = anyio.Event(), anyio.Event()
    real_health = service_module.repo_health
    calls: list[tuple[str, bool]] = []  # ("health", whether the start-up check was released by then)

    async def held_health(path, limits):  # the start-up health check waits until released
        calls.append(("health", release.is_set()))
        if len(calls) == 1:
            started.set()
            await release.wait()
        return await real_health(path, limits)

    monkeypatch.setattr(service_module, "repo_health", held_health)
    service = EngineService(send_event=lambda event: None)
    async with service.running():
        with anyio.fail_after(30):
            result = await service.initialize(_init_params(root))
        assert result.capabilities.ai_enabled and calls in ([], [("health", False)])  # answered; health not done
        await started.wait()
        outcome: list[BaseException] = []

        async def create() -> None:
            try:
                await service.job_create(_create_params())
            except SpotPatchError as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(create)
            with anyio.fail_after(30):  # answered while the start-up health check is still held
                while not outcome:
                    await anyio.sleep(0.02)
            assert calls == [("health", False), ("health", False)]  # job/create's own check did not wait for it
            release.set()
        [exc] = outcome
        assert exc.code == ErrorCode.CONSENT_REQUIRED and "staged 0, unstaged 1, untracked 0" in exc.message
        health = await service.health()
        assert health.state == "consent-required"
        with anyio.fail_after(60):  # the pool's warm worktree is ready (a warm in flight at the stop is removed)
            while service._pool is None or not service._pool.idle_paths:
                await anyio.sleep(0.02)
    # The dirty repository is healthy: its pool was opened; at the stop its warm worktree was parked for the
    # next start (issue 17), which a sweep without keep_parked removes.
    [parked] = _registrations(root)
    [admin] = (root / ".git" / "worktrees").iterdir()
    marker = json.loads((admin / MARKER_NAME).read_text())
    assert marker["idle"] is True and marker["head"] == run(root, "rev-parse", "HEAD").strip()
    assert await sweep_orphans(root) == 1 and _registrations(root) == [] and not parked.exists()


async def test_a_blocked_repository_is_refused_as_before_and_gets_no_warm_worktree(
        repo_factory, monkeypatch: pytest.MonkeyPatch) -> None:
    root = repo_factory(FILES)
    (root / ".git" / "index.lock").write_text("")
    monkeypatch.setenv(KEY_ENV, "sk-test")
    monkeypatch.setenv("SPOTPATCH_WORKTREE_POOL", "1")
    service = EngineService(send_event=lambda event: None)
    async with service.running():
        await service.initialize(_init_params(root))
        with pytest.raises(SpotPatchError) as caught:
            await service.job_create(_create_params())
        assert caught.value.code == ErrorCode.REPO_BLOCKED
        assert caught.value.message.startswith("The repository cannot host a job now: index-locked (.git/index.lock")
        assert (await service.health()).reasons == ["index-locked"]
        assert service._pool is None and _registrations(root) == []  # blocked: no warm worktree was made
    assert (root / ".git" / "index.lock").exists()  # never deleted


async def test_closing_the_pool_moves_its_worktree_aside_and_the_next_start_deletes_it(
        repo_factory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Shutdown cost independent of the checkout: the pooled worktree's files are not deleted by ``aclose``
    (one rename; only its registration, a few small files, is deleted), and the next start empties the trash."""
    root = repo_factory(FILES)
    deleted: list[Path] = []
    real_rmtree = removal.rmtree
    monkeypatch.setattr(removal, "rmtree", lambda path: (deleted.append(Path(path)), real_rmtree(path)))
    async with anyio.create_task_group() as tg:
        pool = WorktreePool(root, task_group=tg, mode="on")
        await pool.warm()
        [idle] = pool.idle_paths
        admin = Path((idle / ".git").read_text().split(":", 1)[1].strip())
        await pool.aclose()
    assert not idle.exists() and _registrations(root) == [] and not admin.exists()
    assert deleted == [admin]  # the registration only: the checkout itself was renamed, not deleted
    [trash] = list(temp_base().iterdir())
    assert trash.name.startswith(TRASH_PREFIX) and (trash / "a.txt").read_text() == "alpha\n"
    assert not list(temp_base().glob("*.owner"))
    # The next start: the sweep leaves the trash alone (no registration names it), empty_trash deletes it.
    assert await sweep_orphans(root, defer_deletes=True) == 0 and trash.exists()
    assert await empty_trash(root) == 1
    assert not temp_base().exists()


async def test_a_job_worktree_released_after_close_is_moved_aside(repo_factory) -> None:
    """A job cancelled by the engine's stop hands its worktree back after the pool closed: moved aside too."""
    root = repo_factory(FILES)
    async with anyio.create_task_group() as tg:
        pool = WorktreePool(root, task_group=tg, mode="on")
        wt = await create_worktree(root, "job-1")
        await pool.aclose()
        await pool.release(wt)
    assert not wt.path.exists() and _registrations(root) == []
    assert [p.name[: len(TRASH_PREFIX)] for p in temp_base().iterdir()] == [TRASH_PREFIX]
    await empty_trash(root)
    assert not temp_base().exists()


async def test_the_sweep_moves_an_orphan_aside_and_deletes_it_unless_deferred(repo_factory) -> None:
    root = repo_factory(FILES)
    wt = await create_worktree(root, "job-orphan")
    marker = wt.admin_dir / MARKER_NAME  # type: ignore[operator]
    marker.write_text(marker.read_text().replace(f'"pid": {os.getpid()}', '"pid": 999999999'))
    assert await sweep_orphans(root, defer_deletes=True) == 1
    assert not wt.path.exists() and _registrations(root) == []
    [trash] = list(temp_base().iterdir())
    assert trash.name.startswith(TRASH_PREFIX)
    await empty_trash(root)
    assert not temp_base().exists()
    # Without defer_deletes (every other caller) the sweep deletes the files itself, as before.
    wt = await create_worktree(root, "job-orphan-2")
    marker = wt.admin_dir / MARKER_NAME  # type: ignore[operator]
    marker.write_text(marker.read_text().replace(f'"pid": {os.getpid()}', '"pid": 999999999'))
    assert await sweep_orphans(root) == 1
    assert not temp_base().exists() and _registrations(root) == []


async def test_empty_trash_deletes_only_our_trash_names_never_through_a_symlink(repo_factory, tmp_path: Path) -> None:
    root = repo_factory(FILES)
    base = temp_base()
    base.mkdir()
    outside = tmp_path / "users-dir"
    outside.mkdir()
    (outside / "keep.txt").write_text("the user's\n")
    os.symlink(outside, base / (TRASH_PREFIX + "0" * 16))  # a symlink named like our trash
    (base / "trash-not-ours").mkdir()                      # not our name pattern
    (base / (TRASH_PREFIX + "1" * 16)).mkdir()
    (base / (TRASH_PREFIX + "1" * 16) / "f").write_text("x")
    assert await empty_trash(root) == 1
    assert (outside / "keep.txt").read_text() == "the user's\n"
    assert sorted(p.name for p in base.iterdir()) == sorted([TRASH_PREFIX + "0" * 16, "trash-not-ours"])


async def test_drop_refuses_a_directory_that_is_not_one_of_ours(repo_factory, tmp_path: Path) -> None:
    root = repo_factory(FILES)
    users = tmp_path / "users-wt"
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(users), "HEAD"], cwd=root, check=True)
    assert not await removal.drop_worktree(root, Worktree(path=users, head_oid="", baseline_oid="", job_id="x"))
    assert (users / "a.txt").exists() and len(_registrations(root)) == 1


@pytest.mark.parametrize("module", ["spotpatch_agent.worktree.pool", "spotpatch_agent.worktree.snapshot",
                                    "spotpatch_agent.engine.prompt", "spotpatch_agent.engine.locations"])
def test_serving_imports_only_what_initialize_needs(module: str) -> None:
    code = ("import sys, spotpatch_agent.cli, spotpatch_agent.engine.service, spotpatch_agent.rpc.server; "
            f"sys.exit({module!r} in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO, check=False).returncode == 0, module


def test_protocol_models_are_built_on_first_use() -> None:
    code = ("import sys; from spotpatch_agent.protocol import models as m; "
            "assert not m.JobSnapshot.__pydantic_complete__ and not m.StatusEvent.__pydantic_complete__; "
            "r = m.InitializeResult.model_validate({'protocolVersion': '0.1', 'serverInfo': {'name': 'n', "
            "'version': '1'}, 'capabilities': {'aiEnabled': False, 'applyModes': ['review'], 'tools': []}}); "
            "assert m.InitializeResult.__pydantic_complete__; "
            "assert r.dump()['serverInfo'] == {'name': 'n', 'version': '1'}; "
            "e = m.JOB_EVENT_ADAPTER.validate_python({'jobId': 'j', 'seq': 1, 'at': 't', 'kind': 'status', "
            "'status': 'running'}); assert type(e).__name__ == 'StatusEvent'")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, check=False, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr

"""Loose ends after issues 6-8: the blocked message of ``job/create`` (relative ``.git/index.lock``), the
trusted-auto consent covering local changes (docs/design.md §10) and the trusted-auto fast-path guidance in the
agent's task."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from spotpatch_agent.engine.prompt import TRUSTED_AUTO_GUIDANCE
from tests.conftest import git
from tests.engine._gates_support import APP, DONE, KEY_ENV, OLD, edit, new_repo, run_one_job, template_repo

TRUSTED = {"applyMode": "trusted-auto", "trustedFastModeConsent": True}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return template_repo(tmp_path_factory.mktemp("fixups"))


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-canary-" + secrets.token_hex(12))


def _task(result) -> str:
    """The first request's user message (the agent task), whatever the wire shape."""
    return json.dumps(result.server.requests[0])


@pytest.mark.anyio
async def test_job_create_names_the_index_lock_relatively_when_blocked(template: Path, tmp_path: Path) -> None:
    root = new_repo(template, tmp_path / "repo")
    (root / ".git" / "index.lock").write_bytes(b"")
    result = await run_one_job(root, [edit("w"), DONE])
    assert result.refused is not None and result.refused.code == "REPO_BLOCKED"
    message = result.refused.message
    assert ".git/index.lock exists" in message and "remove it by hand" in message
    assert str(root) not in message and str(root.resolve()) not in message
    assert (root / ".git" / "index.lock").exists()  # named, never deleted


@pytest.mark.anyio
async def test_trusted_auto_consent_covers_local_changes_without_local_changes_consent(
    template: Path, tmp_path: Path,
) -> None:
    root = new_repo(template, tmp_path / "repo")
    mine = OLD + "export const mine = 1;\n"
    (root / "src/old.ts").write_text(mine)  # unstaged
    (root / "notes.txt").write_text("untracked\n")
    status_before = git(root, "status", "--porcelain")

    refused = await run_one_job(root, [edit("w"), DONE], modes={"trustedAuto": True})  # review, no consent
    assert refused.refused is not None and refused.refused.code == "CONSENT_REQUIRED"

    result = await run_one_job(root, [edit("w"), DONE], modes={"trustedAuto": True}, request=TRUSTED)
    assert result.refused is None and result.snap is not None
    assert result.snap.status == "applied", result.events
    assert result.diff is not None and [f.path for f in result.diff.files] == ["src/App.tsx"]  # only the increment
    assert (root / "src/App.tsx").read_text() == APP.replace(">Go<", ">Start<")
    assert (root / "src/old.ts").read_text() == mine and (root / "notes.txt").read_text() == "untracked\n"
    assert git(root, "status", "--porcelain").replace(" M src/App.tsx\n", "") == status_before


@pytest.mark.anyio
async def test_trusted_auto_task_prefers_one_read_and_one_replace_and_review_does_not(
    template: Path, tmp_path: Path,
) -> None:
    fast = await run_one_job(new_repo(template, tmp_path / "fast"), [edit("w"), DONE],
                             modes={"trustedAuto": True}, request=TRUSTED)
    assert fast.snap is not None and fast.snap.status == "applied"
    assert json.dumps(TRUSTED_AUTO_GUIDANCE)[1:-1] in _task(fast)
    assert "one read_file" in TRUSTED_AUTO_GUIDANCE and "one replace_text" in TRUSTED_AUTO_GUIDANCE

    review = await run_one_job(new_repo(template, tmp_path / "review"), [edit("w"), DONE],
                               modes={"trustedAuto": True})
    assert review.snap is not None and review.snap.status == "awaiting-review"
    assert "trusted-auto" not in _task(review) and "one replace_text" not in _task(review)

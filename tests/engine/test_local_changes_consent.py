"""include-local-changes through the real engine over stdio (docs/design.md §8, issue 6): ``localChangesConsent: true``
on a dirty tree runs the job on a baseline holding the user's changes; the diff is only the agent's increment;
Apply and Revert leave the pre-existing staged, unstaged and untracked content (and the index) intact."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from spotpatch_agent.demo.runner import TOUCHED, make_demo_project
from spotpatch_agent.demo.script import EXPECTED_AFTER, demo_turns
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.conftest import git
from tests.support.annotations import demo_annotation
from tests.support.serve import config_for, start_engine, worktree_count

STAGED = "src/styles.css"
UNTRACKED = "notes/é local notes.txt"
#: The user's unstaged edit to the file the agent touches, on a line the agent does not change.
USER_LINE = ("      <h2>{name}</h2>\n", "      <h2 data-user=\"local\">{name}</h2>\n")


@pytest.fixture
def dirty_project(tmp_path: Path) -> Path:
    project = make_demo_project(tmp_path / "demo-app")
    css = project / STAGED
    css.write_text(css.read_text("utf-8") + "\n.user-staged { color: red; }\n", "utf-8")
    git(project, "add", STAGED)
    card = project / TOUCHED
    card.write_text(card.read_text("utf-8").replace(*USER_LINE), "utf-8")
    (project / "notes").mkdir()
    (project / UNTRACKED).write_bytes(b"untracked \xe2\x9c\x93 bytes\r\n")
    return project


def user_state(project: Path) -> dict[str, object]:
    index = project / ".git" / "index"
    return {
        "index": index.read_bytes(),
        "index_mtime": index.stat().st_mtime_ns,
        "cached": git(project, "diff", "--cached", "--binary"),
        "head": git(project, "rev-parse", "HEAD"),
        "staged_file": (project / STAGED).read_bytes(),
        "untracked": (project / UNTRACKED).read_bytes(),
    }


def test_consent_job_diff_is_only_the_agent_increment_and_apply_revert_keep_local_changes(dirty_project: Path) -> None:
    project = dirty_project
    canary = "sk-canary-" + secrets.token_hex(16)
    local_card = (project / TOUCHED).read_text("utf-8")
    with ScriptedProviderServer(demo_turns()) as server:
        eng = start_engine(canary)
        try:
            eng.initialize(project, config_for(server))
            assert eng.call("health/get", {})["state"] == "consent-required"
            refused = eng.request("job/create", {"annotation": demo_annotation(), "modelProfileId": "m1"})
            assert refused["error"]["data"]["code"] == "CONSENT_REQUIRED"
            assert "localChangesConsent: true" in refused["error"]["message"]
            # issue 20: the message names the paths and the real ways to include them, never an absolute path
            assert (f"local-changes ({UNTRACKED}, {TOUCHED}, {STAGED}): commit or stash them"
                    in refused["error"]["message"])
            assert "spotpatch-agent run --include-local-changes" in refused["error"]["message"]
            assert str(project) not in refused["error"]["message"]
            health = eng.call("health/get", {})
            assert health["details"] == [{"reason": "local-changes", "paths": [UNTRACKED, TOUCHED, STAGED],
                                          "morePaths": 0, "fix": health["details"][0]["fix"]}]
            before = user_state(project)

            snap = eng.call("job/create", {"annotation": demo_annotation(), "modelProfileId": "m1",
                                           "localChangesConsent": True})
            job_id = snap["jobId"]
            final = eng.wait_status(job_id, {"awaiting-review", "failed", "cancelled"}, timeout=60)
            assert final["status"] == "awaiting-review", eng.events(job_id)
            assert user_state(project) == before  # creating and running the job wrote nothing of the user's

            diff = eng.call("job/diff", {"jobId": job_id})
            assert diff["files"] == [{"path": TOUCHED, "added": 2, "removed": 2, "status": "modified"}]
            text = diff["diff"]
            assert " " + USER_LINE[1] in text  # the user's line is context of the agent's hunk, not a change
            assert "-" + USER_LINE[0] not in text and "+" + USER_LINE[1] not in text
            assert "styles.css" not in text and "local notes" not in text

            assert eng.call("job/apply", {"jobId": job_id})["status"] == "applied"
            expected = EXPECTED_AFTER[TOUCHED].replace(*USER_LINE)
            assert (project / TOUCHED).read_text("utf-8") == expected  # agent change on top of the user's edit
            assert user_state(project) == before  # index bytes and mtime, staged diff, untracked bytes

            assert eng.call("job/revert", {"jobId": job_id})["status"] == "reverted"
            assert (project / TOUCHED).read_text("utf-8") == local_card  # back to the user's local version
            assert user_state(project) == before
            assert worktree_count(project) == 1
            assert eng.close() == 0
        finally:
            eng.stop()
    assert canary not in eng.all_output()
    assert str(project) not in eng.all_output()


def test_repo_blocked_names_the_untracked_virtualenv_and_the_fix(tmp_path: Path) -> None:
    import subprocess
    import sys

    project = make_demo_project(tmp_path / "demo-app")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--symlinks", str(project / ".venv")],
                   check=True, capture_output=True, timeout=120)
    canary = "sk-canary-" + secrets.token_hex(16)
    with ScriptedProviderServer([]) as server:
        eng = start_engine(canary)
        try:
            eng.initialize(project, config_for(server))
            refused = eng.request("job/create", {"annotation": demo_annotation(), "modelProfileId": "m1",
                                                 "localChangesConsent": True})
        finally:
            eng.stop()
    assert refused["error"]["data"]["code"] == "REPO_BLOCKED"
    message = refused["error"]["message"]
    assert ("untracked-symlink (.venv/): `.venv/` is an untracked folder with symlinks (a Python virtualenv): "
            "add it to .gitignore.") in message
    assert str(tmp_path) not in message and "DESIGN.md" not in message

"""The terminal applies only the diff the user reviewed (issue 25, MEDIUM): ``run`` saves the reviewed changeset,
``spotpatch-agent apply JOB_ID`` writes exactly it through the engine's verified Apply, ``revert`` restores byte
for byte; ``run --apply`` (a fresh run applied unreviewed) is refused. Each test fails on the old code, which
had no ``apply``/``revert`` command and applied a new model run on ``run --apply``."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from spotpatch_agent.demo.runner import TOUCHED, make_demo_project
from spotpatch_agent.demo.script import demo_turns
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from spotpatch_agent.worktree.journal import FAULT_ENV
from tests.conftest import git
from tests.e2e._support import KEY, TARGET, config
from tests.engine_client import engine_command
from tests.support.cli import cli

REVIEWS = Path(".git/spotpatch/reviews")


def run_to_review(tmp_path: Path) -> tuple[Path, str, str]:
    """A demo project and one ``run`` of the demo job: ``(project, job id, diff sha256)``; nothing applied."""
    project = make_demo_project(tmp_path / "app")
    with ScriptedProviderServer(demo_turns()) as server:
        res = cli("run", "--project", str(project), "--config", str(config(tmp_path, server)), *TARGET,
                  env={"SP_RUN_HEALTH_KEY": KEY})
    assert res.returncode == 0, res.stdout + res.stderr
    found = re.search(r"apply --project \S+ (job_[0-9a-f]{16}) --sha256 ([0-9a-f]{64})", res.stdout)
    assert found, res.stdout
    assert git(project, "status", "--porcelain") == ""
    return project, found.group(1), found.group(2)


def test_run_apply_revert_writes_exactly_the_reviewed_bytes_and_restores_them(tmp_path: Path) -> None:
    project, job_id, sha = run_to_review(tmp_path)
    record = json.loads((project / REVIEWS / f"{job_id}.json").read_text())
    assert record["state"] == "review" and record["diffSha256"] == sha and record["paths"] == [TOUCHED]
    assert oct((project / REVIEWS / f"{job_id}.json").stat().st_mode & 0o777) == "0o600"
    original = (project / TOUCHED).read_bytes()
    res = cli("apply", "--project", str(project), job_id, "--sha256", sha)
    assert res.returncode == 0, res.stdout + res.stderr
    assert hashlib.sha256((project / TOUCHED).read_bytes()).hexdigest() == record["resultHashes"][TOUCHED]
    again = cli("apply", "--project", str(project), job_id)
    assert again.returncode == 1 and f"{job_id} is already applied" in again.stderr
    res = cli("revert", "--project", str(project / "src"), job_id)  # a folder inside the repository will do
    assert res.returncode == 0, res.stdout + res.stderr
    assert (project / TOUCHED).read_bytes() == original and git(project, "status", "--porcelain") == ""


def test_apply_refuses_when_a_target_file_changed_since_the_review(tmp_path: Path) -> None:
    project, job_id, sha = run_to_review(tmp_path)
    path = project / TOUCHED
    path.write_bytes(path.read_bytes() + b"// my edit after the review\n")
    mine = path.read_bytes()
    res = cli("apply", "--project", str(project), job_id, "--sha256", sha, "--json")
    assert res.returncode == 1
    report = json.loads(res.stdout)
    assert report["outcome"] == "refused" and report["error"]["code"] == "APPLY_CONFLICT"
    assert f"these files changed since the job started: {TOUCHED}" in report["error"]["message"]
    assert path.read_bytes() == mine


def test_revert_refuses_when_a_file_changed_after_apply(tmp_path: Path) -> None:
    project, job_id, sha = run_to_review(tmp_path)
    assert cli("apply", "--project", str(project), job_id).returncode == 0
    path = project / TOUCHED
    path.write_bytes(path.read_bytes() + b"// mine\n")
    mine = path.read_bytes()
    res = cli("revert", "--project", str(project), job_id)
    assert res.returncode == 1 and "REVERT_CONFLICT" in res.stderr and TOUCHED in res.stderr
    assert path.read_bytes() == mine


def test_another_diff_than_the_reviewed_one_is_refused(tmp_path: Path) -> None:
    project, job_id, sha = run_to_review(tmp_path)
    original = (project / TOUCHED).read_bytes()
    wrong = cli("apply", "--project", str(project), job_id, "--sha256", "0" * 64)
    assert wrong.returncode == 1 and "this is not the diff you reviewed" in wrong.stderr
    file = project / REVIEWS / f"{job_id}.json"
    record = json.loads(file.read_text())
    record["diff"] = record["diff"].replace("btn-primary", "btn-evil")  # edited after the review
    file.write_text(json.dumps(record))
    tampered = cli("apply", "--project", str(project), job_id)
    assert tampered.returncode == 1 and "CHANGESET_REJECTED" in tampered.stderr
    assert "its hash does not match its content" in tampered.stderr
    # a consistent diff hash, but the record's own hash is stale
    record["diffSha256"] = hashlib.sha256(record["diff"].encode("utf-8", "surrogateescape")).hexdigest()
    file.write_text(json.dumps(record))
    assert cli("apply", "--project", str(project), job_id).returncode == 1
    assert (project / TOUCHED).read_bytes() == original


def test_a_symlinked_review_record_or_directory_is_refused_never_followed(tmp_path: Path) -> None:
    project, job_id, _ = run_to_review(tmp_path)
    reviews = project / REVIEWS
    outside = tmp_path / "outside"
    outside.mkdir()
    (reviews / f"{job_id}.json").rename(outside / f"{job_id}.json")
    (reviews / f"{job_id}.json").symlink_to(outside / f"{job_id}.json")
    res = cli("apply", "--project", str(project), job_id)
    assert res.returncode == 1 and "it is a symlink" in res.stderr, res.stderr
    (reviews / f"{job_id}.json").unlink()
    reviews.rmdir()
    reviews.symlink_to(outside)
    res = cli("apply", "--project", str(project), job_id)
    assert res.returncode == 1 and ".git/spotpatch/reviews is a symlink or not a directory" in res.stderr
    assert git(project, "status", "--porcelain") == "" and str(tmp_path) not in res.stderr


@pytest.mark.parametrize("json_flag", [False, True])
def test_run_apply_is_refused_before_any_job(tmp_path: Path, json_flag: bool) -> None:
    project = make_demo_project(tmp_path / "app")
    with ScriptedProviderServer(demo_turns()) as server:
        res = cli("run", "--project", str(project), "--config", str(config(tmp_path, server)), *TARGET, "--apply",
                  *(["--json"] if json_flag else []), env={"SP_RUN_HEALTH_KEY": KEY})
        assert server.requests == []  # no model run at all
    assert res.returncode == 2, res.stdout + res.stderr
    assert "--apply is refused" in res.stderr and "spotpatch-agent apply" in res.stderr
    if json_flag:
        assert json.loads(res.stdout)["outcome"] == "usage-error"
    assert git(project, "status", "--porcelain") == ""


def test_apply_usage_errors_exit_2(tmp_path: Path) -> None:
    assert cli("apply", "--project", str(tmp_path), "job_0123456789abcdef").returncode == 2  # not a repository
    project = make_demo_project(tmp_path / "app")
    assert cli("apply", "--project", str(project), "../../etc/passwd").returncode == 2
    assert cli("apply", "--project", str(project), "job_0123456789abcdef", "--sha256", "xyz").returncode == 2
    missing = cli("apply", "--project", str(project), "job_0123456789abcdef")
    assert missing.returncode == 1 and "no saved review for job_0123456789abcdef" in missing.stderr


def test_a_killed_terminal_apply_is_repaired_by_the_next_and_applied_whole(tmp_path: Path) -> None:
    """``apply`` writes through the crash journal: SIGKILLed once its file is exchanged (the temp file not yet
    unlinked), the next ``apply`` rolls the half-written one back, then applies the reviewed bytes."""
    project, job_id, sha = run_to_review(tmp_path)
    record = json.loads((project / REVIEWS / f"{job_id}.json").read_text())
    proc = subprocess.Popen([*engine_command()[:-1], "apply", "--project", str(project), job_id],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env={**os.environ, FAULT_ENV: "apply:file-1:exchanged"})
    try:
        assert proc.stderr is not None
        deadline, seen = time.monotonic() + 30, b""
        while b"SPOTPATCH-TEST-PAUSED" not in seen:
            assert time.monotonic() < deadline and proc.poll() is None, seen
            seen += os.read(proc.stderr.fileno(), 4096)
    finally:
        proc.kill()
        proc.wait()
    assert [p.name for p in (project / ".git/spotpatch/journal").iterdir()] == [f"{job_id}.journal"]
    res = cli("apply", "--project", str(project), job_id, "--sha256", sha)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"Repaired a half-written apply of {job_id} left by a crash: rolled-back" in res.stderr
    assert hashlib.sha256((project / TOUCHED).read_bytes()).hexdigest() == record["resultHashes"][TOUCHED]
    assert list((project / ".git/spotpatch/journal").iterdir()) == []
    assert not [p for p in (project / "src/components").iterdir() if p.name.startswith(".spotpatch")]  # no temp

"""``spotpatch-agent run`` with local changes and blocked trees (issue 20): the page's health display in the
terminal (reasons, paths, fixes), ``--include-local-changes`` as the consent, and ``--json`` for scripts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from spotpatch_agent.demo.runner import TOUCHED, make_demo_project
from spotpatch_agent.demo.script import demo_turns
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.conftest import git
from tests.e2e._support import KEY, TARGET, config
from tests.support.cli import cli


def dirty(project: Path) -> None:
    css = project / "src/styles.css"
    css.write_text(css.read_text() + "\n.mine { color: red; }\n")


def test_local_changes_without_the_flag_show_paths_and_the_real_flag(tmp_path: Path) -> None:
    project = make_demo_project(tmp_path / "app")
    dirty(project)
    res = cli("run", "--project", str(project), "--config", str(config(tmp_path)), *TARGET,
              env={"SP_RUN_HEALTH_KEY": KEY})
    assert res.returncode == 1, res.stdout + res.stderr
    err = res.stderr
    assert "Repository: local changes (0 staged, 1 unstaged, 0 untracked):" in err
    assert "  - local-changes: src/styles.css\n    fix: commit or stash them" in err
    assert "run again with --include-local-changes" in err
    assert "DESIGN.md" not in res.stdout + err and str(tmp_path) not in err
    assert "status:" not in res.stdout  # no job was created


def test_include_local_changes_runs_the_job_from_them_and_json_reports_it(tmp_path: Path) -> None:
    project = make_demo_project(tmp_path / "app")
    dirty(project)
    mine = (project / "src/styles.css").read_bytes()
    with ScriptedProviderServer(demo_turns()) as server:
        res = cli("run", "--project", str(project), "--config", str(config(tmp_path, server)), *TARGET,
                  "--include-local-changes", "--json", env={"SP_RUN_HEALTH_KEY": KEY})
    assert res.returncode == 0, res.stdout + res.stderr
    [line] = res.stdout.splitlines()  # stdout is the one JSON object; progress went to stderr
    report = json.loads(line)
    assert report["exitCode"] == 0 and report["outcome"] == "awaiting-review"
    assert report["health"]["state"] == "consent-required"
    assert report["health"]["details"][0]["paths"] == ["src/styles.css"]
    assert report["job"]["status"] == "awaiting-review"
    assert [f["path"] for f in report["diff"]["files"]] == [TOUCHED] and "btn-primary" in report["diff"]["diff"]
    assert report["error"] is None and report["prompt"] is None
    review = report["review"]
    assert review["jobId"] == report["job"]["jobId"] and len(review["diffSha256"]) == 64
    assert "Including your local changes" in res.stderr and "status: awaiting-review" in res.stderr
    applied = cli("apply", "--project", str(project), review["jobId"], "--sha256", review["diffSha256"], "--json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert json.loads(applied.stdout) == {"exitCode": 0, "outcome": "applied", "jobId": review["jobId"],
                                          "diffSha256": review["diffSha256"], "files": [TOUCHED], "error": None}
    assert (project / "src/styles.css").read_bytes() == mine  # the user's change is still there
    assert "btn btn-primary" in (project / TOUCHED).read_text()
    assert KEY not in res.stdout + res.stderr


def test_untracked_virtualenv_blocks_with_its_name_and_the_gitignore_fix(tmp_path: Path) -> None:
    project = make_demo_project(tmp_path / "app")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--symlinks", str(project / ".venv")],
                   check=True, capture_output=True, timeout=120)
    res = cli("run", "--project", str(project), "--config", str(config(tmp_path)), *TARGET, "--json",
              "--include-local-changes", env={"SP_RUN_HEALTH_KEY": KEY})
    assert res.returncode == 1, res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert report["outcome"] == "repo-blocked" and report["job"] is None
    assert report["health"]["reasons"] == ["untracked-symlink"]
    assert report["health"]["details"][0]["paths"] == [".venv/"]
    assert ("  - untracked-symlink: .venv/\n    fix: `.venv/` is an untracked folder with symlinks "
            "(a Python virtualenv): add it to .gitignore.") in res.stderr
    assert "spotpatch-agent doctor" in res.stderr and str(tmp_path) not in res.stdout + res.stderr
    assert git(project, "status", "--porcelain").strip() == "?? .venv/"


def test_json_without_provider_holds_the_prompt_and_exit_3(tmp_path: Path) -> None:
    project = make_demo_project(tmp_path / "app")
    res = cli("run", "--project", str(project), *TARGET, "--json")
    assert res.returncode == 3, res.stderr
    report = json.loads(res.stdout)
    assert report["exitCode"] == 3 and report["outcome"] == "no-provider"
    assert "## Target 1" in report["prompt"] and report["job"] is None and report["health"] is None


def test_json_reports_a_usage_error(tmp_path: Path) -> None:
    project = make_demo_project(tmp_path / "app")
    res = cli("run", "--project", str(project), "--target", "x.tsx:1", "--json")
    assert res.returncode == 2
    assert json.loads(res.stdout) == {"exitCode": 2, "outcome": "usage-error", "health": None, "job": None,
                                      "diff": None, "error": None, "prompt": None, "suggestion": None,
                                      "review": None}
    assert "one --instruction per --target" in res.stderr

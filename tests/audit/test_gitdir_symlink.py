"""Issue 25, acceptance 2 (the audit-symlink case): ``.git/spotpatch/audit`` planted as a symlink to a
directory outside is never followed — a job with ``audit.persist`` writes nothing there (the ledger write
fails open: ``auditWriteFailed``, a logged reason naming ``<git dir>/spotpatch/audit``), ``spotpatch-agent
audit`` reads nothing through it, and ``spotpatch-agent doctor`` reports it as a failed item with the fix."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.audit._support import read, replace, run_audited_job, target
from tests.conftest import make_repo
from tests.support.annotations import annotation

CODE = "import sys; from spotpatch_agent.cli import main; sys.exit(main(sys.argv[1:]))"
DONE = {"text": "Done.", "finishReason": "stop"}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CODE, *args], capture_output=True, text=True, timeout=120)


def listing(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"src/App.tsx": "export const App = () => <b>Go</b>;\n",
                                         ".gitignore": "node_modules\n"})


@pytest.mark.anyio
async def test_a_symlinked_audit_dir_is_never_written_and_doctor_flags_it(root: Path, tmp_path: Path, monkeypatch,
                                                                         caplog) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "job_00000000000000c1.jsonl").write_text('{"seq":1}\n')  # what `audit` must not show
    (root / ".git" / "spotpatch").mkdir()
    os.symlink(outside, root / ".git" / "spotpatch" / "audit")
    turns = [{"toolCalls": [read("r1", "src/App.tsx")]},
             {"toolCalls": [replace("w1", "src/App.tsx", ">Go<", ">Start<")]}, DONE]
    with caplog.at_level(logging.WARNING, logger="spotpatch"):
        ran = await run_audited_job(root, turns, monkeypatch, annotation(target(1, "src/App.tsx")),
                                    audit={"persist": True, "keep": 1})
    assert ran.status == "awaiting-review"  # the job goes on (the ledger is fail-open)
    assert ran.audit["summary"]["auditWriteFailed"] is True
    assert listing(outside) == ["job_00000000000000c1.jsonl"]  # nothing written, nothing pruned
    assert "<git dir>/spotpatch/audit is a symlink" in caplog.text and str(tmp_path) not in caplog.text

    listed = cli("audit", "--json", "--project", str(root))
    assert json.loads(listed.stdout)["ledgers"] == []
    assert "spotpatch/audit is a symlink" in listed.stderr
    shown = cli("audit", "job_00000000000000c1", "--project", str(root))
    assert shown.returncode == 1 and '"seq"' not in shown.stdout

    doctor = cli("doctor", "--json", "--no-probe", "--project", str(root))
    items = {i["id"]: i for i in json.loads(doctor.stdout)["items"]}
    assert doctor.returncode == 1
    assert items["gitdir-files"]["status"] == "fail" and items["gitdir-files"]["lines"] == ["<git dir>/spotpatch/audit"]
    assert "remove it" in items["gitdir-files"]["fix"] and str(tmp_path) not in doctor.stdout


def test_doctor_says_nothing_of_a_healthy_git_dir(root: Path) -> None:
    (root / ".git" / "spotpatch" / "audit").mkdir(parents=True)
    items = {i["id"] for i in json.loads(cli("doctor", "--json", "--no-probe", "--project", str(root)).stdout)["items"]}
    assert "gitdir-files" not in items and "project" in items

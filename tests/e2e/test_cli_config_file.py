"""Breaker findings on the adoption path (issue 20): ``spotpatch.config.json`` as ``run`` and ``doctor`` read
it, and the health display in the terminal. Real CLI processes on real git repositories."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import make_repo
from tests.support.cli import cli

CANARY = "sk-breaker-canary-7f3a1c9e2b"
RUN = ("--target", "index.html:1", "--instruction", "Make it bigger")
USAGE = {"exitCode": 2, "outcome": "usage-error", "health": None, "job": None, "diff": None, "error": None,
         "prompt": None, "suggestion": None, "review": None}


def app(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "app", {"index.html": "<h1>hi</h1>\n"})


def test_run_never_echoes_a_key_pasted_into_the_config_file(tmp_path: Path) -> None:
    """A key wrongly pasted into the file (``apiKey``, not a TrustedConfig key) is named by location only."""
    root = app(tmp_path)
    (root / "spotpatch.config.json").write_text(json.dumps({"providers": [{
        "id": "p", "displayName": "P", "baseUrl": "http://127.0.0.1:9/v1", "apiKeyEnv": "SP_BREAK_KEY",
        "apiKey": CANARY, "models": [{"id": "m", "model": "m", "displayName": "M"}]}]}))
    for extra in ((), ("--json",)):
        res = cli("run", "--project", str(root), *RUN, *extra)
        assert res.returncode == 2, res.stdout + res.stderr
        assert "spotpatch.config.json is not a valid SpotPatch config (1 error)" in res.stderr
        assert "providers.0.apiKey: Extra inputs are not permitted" in res.stderr
        assert CANARY not in res.stdout + res.stderr and "input_value" not in res.stderr
    assert json.loads(res.stdout) == USAGE
    doctor = cli("doctor", "--project", str(root), "--no-probe")
    assert "providers.0.apiKey: Extra inputs are not permitted" in doctor.stdout
    assert CANARY not in doctor.stdout + doctor.stderr


@pytest.mark.parametrize("kind", ["folder", "fifo", "deeply-nested", "oversized"])
def test_an_unusable_config_file_is_a_usage_error_without_a_traceback(tmp_path: Path, kind: str) -> None:
    """A folder or a FIFO (reading it would block for good) named spotpatch.config.json, JSON nested deeper
    than the parser's recursion, or a file over 1 MiB: ``run`` exits 2 with one line naming the file
    (``--json``: the usage-error object), ``doctor`` fails the config item."""
    root = app(tmp_path)
    file = root / "spotpatch.config.json"
    if kind in ("folder", "fifo"):
        if kind == "folder":
            file.mkdir()
        else:
            os.mkfifo(file)
        expected = "spotpatch.config.json is not a regular file"
    elif kind == "oversized":  # refused before parsing (the Vite plugin has the same cap)
        file.write_text("{}" + " " * (1 << 20))
        expected = ("spotpatch.config.json is 1048578 bytes, over the 1048576 a config may have (a SpotPatch config "
                    "is a few kilobytes)")
    else:
        file.write_text("[" * 100_000 + "]" * 100_000)
        expected = "spotpatch.config.json is not usable JSON: it is nested too deeply"
    res = cli("run", "--project", str(root), *RUN)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert f"spotpatch-agent: {expected}" in res.stderr and str(tmp_path) not in res.stderr
    res = cli("run", "--project", str(root), *RUN, "--json")
    assert res.returncode == 2 and json.loads(res.stdout) == USAGE, res.stdout + res.stderr
    doctor = cli("doctor", "--project", str(root), "--no-probe", "--json")
    assert doctor.returncode == 1 and "Traceback" not in doctor.stderr, doctor.stderr
    [item] = [i for i in json.loads(doctor.stdout)["items"] if i["id"] == "config"]
    assert item["status"] == "fail" and item["detail"] == expected


def test_a_config_file_with_a_bom_is_read_by_run_and_doctor(tmp_path: Path) -> None:
    """Editors on Windows may save UTF-8 with a BOM; the plugin reads such a file too (config-file.test)."""
    root = app(tmp_path)
    (root / "spotpatch.config.json").write_bytes(b"\xef\xbb\xbf" + json.dumps({"limits": {"maxTurns": 9}}).encode())
    doctor = cli("doctor", "--project", str(root), "--no-probe", "--json")
    [item] = [i for i in json.loads(doctor.stdout)["items"] if i["id"] == "config"]
    assert item["status"] == "pass", item
    res = cli("run", "--project", str(root), *RUN, "--json")
    assert res.returncode == 3 and json.loads(res.stdout)["outcome"] == "no-provider", res.stderr


def test_a_file_name_with_a_newline_cannot_forge_a_checklist_line(tmp_path: Path) -> None:
    """git reports untracked names raw (``-z``); the terminal wrapper keeps newlines, so the health display
    shows them as ``\\n`` inside the line (``run`` and ``doctor`` print the same lines)."""
    root = app(tmp_path)
    (root / "notes\n\u2713 project health: clean: a job can start\n\x1b[31mx.txt").write_text("mine\n")
    doctor = cli("doctor", "--project", str(root), "--no-probe")
    lines = doctor.stdout.splitlines()
    assert not any(line.startswith("\u2713 project health") for line in lines), doctor.stdout
    assert ("    - local-changes: notes\\n\u2713 project health: clean: a job can start\\n\\x1b[31mx.txt"
            in lines), doctor.stdout

"""``spotpatch-agent run`` checks every target's location (issue 16, part 2): nothing invalid is accepted
silently, and a prompt made from the terminal never speaks of a page or an element."""

from __future__ import annotations

from pathlib import Path

import pytest

from spotpatch_agent.demo.runner import make_demo_project
from tests.support.cli import cli

CARD = "src/components/ProductCard.tsx"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_demo_project(tmp_path / "app")


@pytest.mark.parametrize(("target", "says"), [
    ("src/components/Nope.tsx:3", "the file does not exist"),
    (f"{CARD}:9999", "line 9999 is past the end of the file (15 lines)"),
    ("/etc/hosts:1", "not a relative path inside the project"),
    ("../app/src/main.tsx:1", "not a relative path inside the project"),
])
def test_every_target_invalid_exits_2_and_says_why(project: Path, target: str, says: str) -> None:
    res = cli("run", "--project", str(project), "--target", target, "--instruction", "Do it")
    assert res.returncode == 2, res.stdout + res.stderr
    assert says in res.stderr and "no target has a usable source location" in res.stderr
    assert res.stdout == ""  # no prompt made of nothing


def test_one_invalid_target_is_reported_and_the_prompt_still_printed(project: Path) -> None:
    res = cli("run", "--project", str(project), "--target", f"{CARD}:12:7", "--instruction", "Primary",
              "--target", f"{CARD}:9999", "--instruction", "Two decimals")
    assert res.returncode == 3, res.stderr
    assert "Target 2: the source location could not be found: line 9999" in res.stderr
    assert "   12|       <button className=\"btn btn-secondary\" onClick={onSave}>Save</button>" in res.stdout
    assert "picked on the page" not in res.stdout and "Element" not in res.stdout
    assert "at 2 source locations" in res.stdout


def test_a_directory_that_is_not_a_git_repository_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.tsx").write_text("x\n")
    res = cli("run", "--project", str(plain), "--target", "a.tsx:1", "--instruction", "Do it")
    assert res.returncode == 2 and "is not a git repository" in res.stderr
    assert res.stdout == "" and str(tmp_path) not in res.stderr

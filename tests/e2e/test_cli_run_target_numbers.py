"""Breaker (issue 16): ``spotpatch-agent run --target`` with hostile numbers is a usage error (exit 2), never
a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from spotpatch_agent.demo.runner import make_demo_project
from spotpatch_agent.run_cli import build_annotation
from tests.support.cli import cli


@pytest.mark.parametrize("target", ["src/a.tsx:" + "9" * 5000, "src/a.tsx:1:" + "1" * 5000, "src/a.tsx:\u0661\u0662"])
def test_absurd_numbers_are_a_usage_error(target: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_annotation([target], ["Do it"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--target must be FILE:LINE[:COL]" in err and len(err) < 400


def test_a_file_name_with_a_colon_and_digits_still_parses() -> None:
    source = build_annotation(["src/a:1.tsx:12:3"], ["Do it"]).targets[0].source
    assert source is not None and (source.file, source.line, source.column) == ("src/a:1.tsx", 12, 3)


def test_run_with_a_5000_digit_line_exits_2_without_a_traceback(tmp_path: Path) -> None:
    project = make_demo_project(tmp_path / "app")
    res = cli("run", "--project", str(project), "--target", "src/App.tsx:" + "9" * 5000, "--instruction", "Do it")
    assert res.returncode == 2, res.stderr[-500:]
    assert "Traceback" not in res.stderr and "--target must be FILE:LINE[:COL]" in res.stderr
    assert res.stdout == ""

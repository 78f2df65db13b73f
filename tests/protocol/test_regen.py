"""One command regenerates every generated artifact of the wire contract (issue 30): ``python -m
spotpatch_agent.protocol.regen``; ``--check`` finds a stale one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from spotpatch_agent.protocol import regen


def test_the_committed_artifacts_are_what_regen_writes() -> None:
    assert regen.main(["--check"]) == 0


def test_check_names_a_stale_artifact_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    for rel in ("protocol", "docs"):
        shutil.copytree(regen.REPO / rel, tmp_path / rel)
    (tmp_path / "node-shim").mkdir()
    stale = tmp_path / "protocol" / "spotpatch.config.schema.json"
    stale.write_text("{}\n", "utf-8")
    monkeypatch.setattr(regen, "REPO", tmp_path)
    assert regen.main(["--check"]) == 1
    assert "protocol/spotpatch.config.schema.json is stale" in capsys.readouterr().err
    assert stale.read_text("utf-8") == "{}\n"
    assert regen.main(["--bogus"]) == 2

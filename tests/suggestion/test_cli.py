"""``spotpatch-agent run --suggest`` as a user runs it (issue 19): a job whose model answers in text fails
with MODEL_TOOL_CALL_UNSUPPORTED, and with the lane on the terminal shows the labelled draft, its citation
check and diff check; the project is byte-identical afterwards and the key never printed. Without
``--suggest`` only a hint is printed and no second request is made."""

from __future__ import annotations

import json
from pathlib import Path

from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.suggestion._support import GOOD, PROSE, repo, tree_picture
from tests.support.cli import cli

KEY = "sk-canary-cli-suggest-0123456789"


def run(tmp_path: Path, *extra: str, enabled: bool = True) -> tuple[object, ScriptedProviderServer, Path, dict]:
    root = repo(tmp_path)
    with ScriptedProviderServer([PROSE, GOOD]) as server:
        cfg = tmp_path / "spotpatch.config.json"
        cfg.write_text(json.dumps({"providers": [{
            "id": "s", "displayName": "Local S", "baseUrl": server.base_url, "apiKeyEnv": "SP_SUGGEST_KEY",
            "models": [{"id": "m", "model": "tiny-model", "displayName": "M"}]}],
            "suggestions": {"enabled": enabled}}))
        before = tree_picture(root, with_git_dir=False)  # the whole run, job included
        res = cli("run", "--project", str(root), "--config", str(cfg), "--target", "src/App.tsx:12",
                  "--instruction", "Make the button say Start", *extra, env={"SP_SUGGEST_KEY": KEY})
        assert tree_picture(root, with_git_dir=False) == before
    return res, server, root, before


def test_run_suggest_prints_the_labelled_draft_and_changes_nothing(tmp_path: Path) -> None:
    res, server, root, _ = run(tmp_path, "--suggest")
    assert res.returncode == 1, res.stdout + res.stderr  # the job failed; the draft does not change that
    out = res.stdout
    assert "MODEL_TOOL_CALL_UNSUPPORTED" in out
    assert "=== SUGGESTION (draft) from Local S / tiny-model ===" in out
    assert "it changed nothing" in out and "Outcome: complete (breaker: none)" in out
    assert "Excerpts offered: src/App.tsx:6-20" in out
    assert "Citations: 2 verified, 0 unverified" in out
    assert "Diff: applies cleanly to the excerpts (never applied)" in out
    assert "    Where: src/App.tsx:12" in out
    assert len(server.requests) == 2
    assert KEY not in out + res.stderr and str(root) not in out + res.stderr


def test_run_without_suggest_only_hints_and_asks_once(tmp_path: Path) -> None:
    res, server, _, _ = run(tmp_path)
    assert res.returncode == 1 and "Re-run with --suggest" in res.stdout and "SUGGESTION" not in res.stdout
    assert len(server.requests) == 1


def test_run_suggest_with_the_lane_off_says_so(tmp_path: Path) -> None:
    res, server, _, _ = run(tmp_path, "--suggest", enabled=False)
    assert res.returncode == 1 and "The suggestion lane is off" in res.stdout
    assert len(server.requests) == 1

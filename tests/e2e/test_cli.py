"""The console script as a user runs it (issue 2, items 1–2 of "what a user can do")."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from spotpatch_agent.demo.runner import make_demo_project
from spotpatch_agent.demo.script import demo_turns
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.conftest import git
from tests.engine_client import engine_command


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    command = engine_command()[:-1] + list(args)
    base = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    return subprocess.run(command, capture_output=True, text=True, env={**base, **(env or {})},
                          stdin=subprocess.DEVNULL, timeout=timeout)


def test_demo_exits_0_offline_and_says_no_model_is_involved() -> None:
    res = cli("demo")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "NO MODEL IS INVOLVED" in res.stdout
    for step in ("status: awaiting-review", "diff --git a/src/components/ProductCard.tsx", "status: applied",
                 "${price.toFixed(2)}", "status: reverted", "Restored byte for byte"):
        assert step in res.stdout, step


def test_run_without_provider_prints_the_prompt_and_exits_3(tmp_path: Path) -> None:
    project = make_demo_project(tmp_path / "app")
    res = cli("run", "--project", str(project), "--target", "src/components/ProductCard.tsx:12:7",
              "--instruction", "Make it primary")
    assert res.returncode == 3, res.stderr
    assert "## Target 1" in res.stdout and "Make it primary" in res.stdout
    assert "src/components/ProductCard.tsx:12:7" in res.stdout
    assert "apiKeyEnv" in res.stderr


def test_run_with_config_produces_diff_and_applies(tmp_path: Path) -> None:
    project = make_demo_project(tmp_path / "app")
    turns = demo_turns()
    with ScriptedProviderServer(turns) as server:
        cfg = tmp_path / "spotpatch.config.json"
        cfg.write_text(json.dumps({"providers": [{
            "id": "s", "displayName": "S", "baseUrl": server.base_url, "apiKeyEnv": "SP_RUN_KEY",
            "models": [{"id": "m", "model": "scripted-model", "displayName": "M"}]}]}))
        res = cli("run", "--project", str(project), "--config", str(cfg),
                  "--target", "src/components/ProductCard.tsx:12:7", "--instruction", "Make the Save button primary",
                  "--target", "src/components/ProductCard.tsx:11:7", "--instruction", "Two decimals",
                  "--apply", env={"SP_RUN_KEY": "sk-run-key-123456"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Applied: status applied." in res.stdout
    assert "btn btn-primary" in (project / "src/components/ProductCard.tsx").read_text()
    assert git(project, "diff", "--cached") == ""
    assert "sk-run-key-123456" not in res.stdout + res.stderr

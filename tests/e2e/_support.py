"""Helpers shared by the end-to-end tests: a paused engine, the ``run`` command's config and target."""

from __future__ import annotations

import json
import time
from pathlib import Path

from spotpatch_agent.demo.runner import TOUCHED
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.engine_client import EngineProcess


def wait_paused(eng: EngineProcess, point: str, timeout: float = 20) -> None:
    marker = f"SPOTPATCH-TEST-PAUSED {point}".encode()
    deadline = time.monotonic() + timeout
    while marker not in eng.stderr_bytes:
        assert eng.proc.poll() is None, eng.stderr_bytes.decode(errors="replace")[-2000:]
        assert time.monotonic() < deadline, f"never paused at {point}"
        time.sleep(0.01)


KEY = "sk-run-health-canary-5a1e9c"
TARGET = ("--target", f"{TOUCHED}:12:7", "--instruction", "Make the Save button primary",
          "--target", f"{TOUCHED}:11:7", "--instruction", "Two decimals")


def config(tmp_path: Path, server: ScriptedProviderServer | None = None) -> Path:
    cfg = tmp_path / "spotpatch.config.json"
    cfg.write_text(json.dumps({"providers": [{
        "id": "s", "displayName": "S", "baseUrl": server.base_url if server else "http://127.0.0.1:9/v1",
        "apiKeyEnv": "SP_RUN_HEALTH_KEY", "models": [{"id": "m", "model": "scripted-model", "displayName": "M"}]}]}))
    return cfg

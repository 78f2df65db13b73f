"""protocol/spotpatch.config.schema.json is what ``spotpatch-agent schema --config`` prints, is generated from
``TrustedConfig``, and agrees with it: ``"$schema"`` is accepted (and ignored), unknown keys are refused by both
(issue 20, docs/configuration.md)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from spotpatch_agent.protocol.config_schema import render_config_schema
from spotpatch_agent.protocol.models import InitializeParams, TrustedConfig
from tests.engine_client import engine_command
from tests.protocol._schema import ROOT

CONFIG_SCHEMA = ROOT / "protocol" / "spotpatch.config.schema.json"
REGENERATE = ".venv/bin/spotpatch-agent schema --config > protocol/spotpatch.config.schema.json"

GOOD = {
    "$schema": "./node_modules/vite-plugin-spotpatch/spotpatch.config.schema.json",
    "providers": [{"id": "openai", "displayName": "OpenAI", "api": "chat", "baseUrl": "https://api.openai.com/v1",
                   "apiKeyEnv": "OPENAI_API_KEY",
                   "models": [{"id": "gpt-4o-mini", "model": "gpt-4o-mini", "displayName": "GPT-4o mini"}]}],
    "checks": [{"id": "typecheck", "name": "Type check", "command": "npm", "args": ["run", "typecheck"]}],
    "limits": {"maxTurns": 12},
    "modes": {"auto": True},
}


def test_committed_config_schema_equals_the_console_script_output() -> None:
    res = subprocess.run(engine_command()[:-1] + ["schema", "--config"], capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    assert res.stdout == CONFIG_SCHEMA.read_text("utf-8"), f"stale: regenerate with\n    {REGENERATE}"
    assert res.stdout == render_config_schema()


def test_config_schema_is_valid_and_agrees_with_the_model() -> None:
    schema = json.loads(CONFIG_SCHEMA.read_text("utf-8"))
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    assert list(validator.iter_errors(GOOD)) == []
    assert TrustedConfig.model_validate(GOOD).providers[0].id == "openai"
    wire_keys = {f.alias or name for name, f in TrustedConfig.model_fields.items()}
    assert set(schema["properties"]) == wire_keys
    assert {"$schema", "providers", "checks", "limits", "modes", "sandbox"} <= wire_keys
    assert schema["additionalProperties"] is False
    for bad in ({**GOOD, "provider": []}, {**GOOD, "$schema": 3}, {**GOOD, "limits": {"maxTurns": 0}},
                {"providers": [{**GOOD["providers"][0], "apiKey": "sk-x"}]}):
        assert list(validator.iter_errors(bad)), bad
        with pytest.raises(ValidationError):
            TrustedConfig.model_validate(bad)


def test_dollar_schema_is_accepted_and_ignored_in_initialize_too() -> None:
    params = InitializeParams.model_validate({"protocolVersion": "1", "projectRoot": "/p",
                                              "config": {"$schema": "https://example.invalid/s.json"}})
    plain = InitializeParams.model_validate({"protocolVersion": "1", "projectRoot": "/p", "config": {}})
    assert params.config.providers == plain.config.providers and params.config.limits == plain.config.limits


def test_run_reads_a_config_file_with_its_schema_line(tmp_path: Path) -> None:
    from spotpatch_agent.run_cli import load_config

    (tmp_path / "spotpatch.config.json").write_text(json.dumps(GOOD))
    assert [m.id for p in load_config(tmp_path, None).providers for m in p.models] == ["gpt-4o-mini"]

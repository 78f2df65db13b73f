"""Every trusted-config example of docs/configuration.md validates against ``TrustedConfig`` (so the docs
cannot rot), and the Providers section shows the profiles issue 7 acceptance 6 asks for."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from spotpatch_agent.protocol.models import TrustedConfig

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
_BLOCK = re.compile(r"^```json[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)


def json_blocks() -> list[str]:
    return _BLOCK.findall(DOC.read_text("utf-8"))


def config_examples() -> list[dict]:
    """The ```json blocks holding a JSON object with a trusted-config key (``providers``, ``limits``, …)."""
    found = []
    for block in json_blocks():
        value = json.loads(block)  # every json block must at least be JSON
        if isinstance(value, dict) and value.keys() & set(TrustedConfig.model_fields):
            found.append(value)
    return found


def test_the_doc_has_config_examples() -> None:
    assert len(config_examples()) >= 5


@pytest.mark.parametrize("example", config_examples(), ids=lambda e: e.get("providers", [{}])[0].get("id", "config"))
def test_every_config_example_validates_against_trusted_config(example: dict) -> None:
    TrustedConfig.model_validate(example)


def test_providers_section_shows_openai_azure_openrouter_ollama_and_a_relay() -> None:
    profiles = [p for example in config_examples() for p in example.get("providers", [])]
    by_host = {urlsplit(p["baseUrl"]).hostname: p for p in profiles}
    openai_apis = {p["api"] for p in profiles if urlsplit(p["baseUrl"]).hostname == "api.openai.com"}
    assert openai_apis == {"chat", "responses"}
    azure = next(p for host, p in by_host.items() if host.endswith(".openai.azure.com"))
    assert azure["baseUrl"].endswith("/openai/v1")
    assert "openrouter.ai" in by_host and by_host["openrouter.ai"]["baseUrl"] == "https://openrouter.ai/api/v1"
    assert by_host["127.0.0.1"]["baseUrl"] == "http://127.0.0.1:11434/v1"
    assert any(host.endswith(".example.internal") for host in by_host)  # the generic relay

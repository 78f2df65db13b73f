"""``spotpatch-agent demo --api chat|responses`` (issue 16): both adapters, offline and against an
OpenAI-compatible server given by ``OPENAI_BASE_URL`` (here a local scripted one standing in for
``llama-server``), with the model profile's output cap from ``SPOTPATCH_MAX_OUTPUT_TOKENS``."""

from __future__ import annotations

import pytest

from spotpatch_agent.demo.script import demo_turns
from spotpatch_agent.demo.typecheck import OFFLINE_ENV
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.support.cli import cli


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv(OFFLINE_ENV, "1")  # never the registry: the typecheck check is skipped
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_demo_offline_over_the_responses_api() -> None:
    res = cli("demo", "--api", "responses")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "NO MODEL IS INVOLVED" in res.stdout and "Responses API (--api responses)" in res.stdout
    assert "Restored byte for byte" in res.stdout


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_demo_against_an_openai_compatible_server_sends_that_api_with_the_cap(api: str) -> None:
    with ScriptedProviderServer(demo_turns(), models=("local-model",)) as server:
        res = cli("demo", "--api", api, env={"OPENAI_API_KEY": "local", "OPENAI_BASE_URL": server.base_url,
                                             "SPOTPATCH_MODEL": "local-model", "SPOTPATCH_MAX_OUTPUT_TOKENS": "777"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "using model 'local-model' at 127.0.0.1" in res.stdout and f"--api {api}" in res.stdout
    field = "max_output_tokens" if api == "responses" else "max_completion_tokens"
    assert server.requests and all(("input" in body) == (api == "responses") for body in server.requests)
    assert {body[field] for body in server.requests} == {777}


def test_demo_rejects_a_cap_that_is_not_a_number() -> None:
    res = cli("demo", env={"SPOTPATCH_MAX_OUTPUT_TOKENS": "lots"})
    assert res.returncode == 2 and "SPOTPATCH_MAX_OUTPUT_TOKENS must be a whole number" in res.stderr


def test_demo_edit_format_anchors_offers_edit_lines_to_the_model() -> None:
    """``--edit-format anchors`` (issue 27, how the real-model demo is measured per format): the model is
    offered ``edit_lines`` instead of ``replace_text``, and the excerpt is anchored. The scripted turns edit
    with ``replace_text``, so this job fails, explicitly."""
    with ScriptedProviderServer(demo_turns(), models=("local-model",)) as server:
        res = cli("demo", "--edit-format", "anchors", env={
            "OPENAI_API_KEY": "local", "OPENAI_BASE_URL": server.base_url, "SPOTPATCH_MODEL": "local-model"})
    assert "edit format anchors" in res.stdout
    first = server.requests[0]
    names = {t["function"]["name"] for t in first["tools"]}
    assert "edit_lines" in names and "replace_text" not in names
    user = next(m["content"] for m in first["messages"] if m["role"] == "user")
    assert "   12#" in user  # the excerpt carries anchors
    assert res.returncode == 1 and "Demo FAILED" in res.stdout


def test_demo_edit_format_needs_a_model() -> None:
    res = cli("demo", "--edit-format", "anchors", env={"OPENAI_API_KEY": ""})
    assert res.returncode == 2 and "--edit-format needs a model" in res.stderr

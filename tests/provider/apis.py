"""Both wire formats side by side for the provider tests: adapter factory and format-neutral readers of
the request bodies the scripted server received."""

from __future__ import annotations

import json
from typing import Any

from spotpatch_agent.provider.chat import ChatCompletionsAdapter
from spotpatch_agent.provider.responses import ResponsesAdapter
from spotpatch_agent.provider.scripted import ScriptedProviderServer

from .conftest import CANARY_KEY

APIS = ("chat", "responses")
ADAPTERS = {"chat": ChatCompletionsAdapter, "responses": ResponsesAdapter}


def make_adapter(api: str, server: ScriptedProviderServer, **options: Any) -> ChatCompletionsAdapter | ResponsesAdapter:
    """The ``api`` adapter pointed at ``server`` with the canary key and short timeouts (overridable)."""
    settings = {"api_key": CANARY_KEY, "timeout": 5, "idle_timeout": 5, **options}
    return ADAPTERS[api](base_url=server.base_url, **settings)


def api_of(body: dict[str, Any]) -> str:
    """Which endpoint a received body was meant for."""
    return "responses" if "input" in body else "chat"


def tool_results(body: dict[str, Any]) -> list[tuple[str, str]]:
    """``(call id, output)`` of every tool result in a request body, in order."""
    if api_of(body) == "chat":
        return [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"]
    return [(i["call_id"], i["output"]) for i in body["input"] if i.get("type") == "function_call_output"]


def echoed_calls(body: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """``(call id, name, parsed arguments)`` of every earlier tool call sent back in a request body."""
    if api_of(body) == "chat":
        return [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                for m in body["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    return [(i["call_id"], i["name"], json.loads(i["arguments"])) for i in body["input"]
            if i.get("type") == "function_call"]

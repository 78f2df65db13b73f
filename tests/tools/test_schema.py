"""The schemas handed to the model are strict (docs/design.md §6; OpenAI strict mode)."""

from __future__ import annotations

from typing import Any

import pytest

from spotpatch_agent.provider.base import ToolSpec
from spotpatch_agent.tools import TOOL_SPECS, tool_specs

EXPECTED = {
    "list_files": {"glob": False, "maxResults": False},
    "search_text": {"query": False, "glob": True, "maxResults": False},
    "read_file": {"path": False, "startLine": True, "endLine": True},
    "replace_text": {"path": False, "oldText": False, "newText": False},
}
# Keywords OpenAI strict mode accepts in these flat schemas.
ALLOWED_KEYS = {"type", "description", "properties", "required", "additionalProperties", "minimum"}


def _walk(schema: Any, where: str) -> None:
    assert isinstance(schema, dict), where
    assert not {"default", "title", "$ref", "$defs", "anyOf", "oneOf", "allOf"} & schema.keys(), where
    assert set(schema) <= ALLOWED_KEYS, (where, set(schema) - ALLOWED_KEYS)
    if schema.get("type") == "object":
        assert schema["additionalProperties"] is False, where
        assert schema["required"] == list(schema["properties"]), where
        for name, prop in schema["properties"].items():
            _walk(prop, f"{where}.{name}")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_schema_is_strict(name: str) -> None:
    spec = TOOL_SPECS[name]
    assert isinstance(spec, ToolSpec) and spec.name == name and spec.description
    schema = spec.parameters
    assert schema["type"] == "object"
    _walk(schema, name)
    assert list(schema["properties"]) == list(EXPECTED[name])
    for prop, nullable in EXPECTED[name].items():
        kind = schema["properties"][prop]["type"]
        assert (isinstance(kind, list) and "null" in kind) is nullable, prop
        assert schema["properties"][prop]["description"]


def test_tool_specs_keeps_order_and_rejects_unknown() -> None:
    assert [s.name for s in tool_specs(["read_file", "list_files"])] == ["read_file", "list_files"]
    with pytest.raises(KeyError):
        tool_specs(["rm_rf"])

"""Helpers for the protocol tests: the committed schema, a validator per definition, README examples."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from tests.engine_client import engine_command

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = ROOT / "protocol" / "spotpatch.schema.json"
README_PATH = ROOT / "protocol" / "README.md"
DOC_PATH = ROOT / "docs" / "protocol.md"
REGENERATE = ".venv/bin/spotpatch-agent schema > protocol/spotpatch.schema.json"


def load_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text("utf-8"))


def validator(schema: dict[str, Any], part: dict[str, Any]) -> Draft202012Validator:
    """A validator for ``part`` (``{"$ref": "#/$defs/X"}`` or an inline schema) with the schema's ``$defs``."""
    return Draft202012Validator({"$schema": schema["$schema"], "$defs": schema["$defs"], **part})


def errors_of(schema: dict[str, Any], part: dict[str, Any], instance: Any) -> list[str]:
    """Every validation error of ``instance`` against ``part``, as ``path: message`` lines."""
    found = validator(schema, part).iter_errors(instance)
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in found]


@dataclass(frozen=True)
class Example:
    method: str
    label: str  # request | response | notification | error
    message: dict[str, Any]
    line: int


_HEADING = re.compile(r"^###\s+`([^`]+)`\s*$")
_FENCE = re.compile(r"^```json\s+(request|response|notification|error)\s*$")


def readme_examples(text: str) -> list[Example]:
    """Every labelled ```` ```json <label> ```` block of protocol/README.md, with the method of its heading."""
    examples: list[Example] = []
    method: str | None = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        heading = _HEADING.match(lines[i])
        if heading:
            method = heading.group(1)
        fence = _FENCE.match(lines[i])
        if fence:
            end = lines.index("```", i + 1)
            assert method is not None, f"README line {i + 1}: an example before any method heading"
            body = "\n".join(lines[i + 1:end])
            try:
                message = json.loads(body)
            except json.JSONDecodeError as exc:
                raise AssertionError(f"README line {i + 1} ({method} {fence.group(1)}): not JSON: {exc}") from None
            examples.append(Example(method, fence.group(1), message, i + 1))
            i = end
        i += 1
    return examples


def run_cli(*args: str) -> str:
    res = subprocess.run(engine_command()[:-1] + list(args), capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    return res.stdout

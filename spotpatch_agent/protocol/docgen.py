"""The generated "Method reference" of docs/protocol.md, rendered from the catalog and the JSON Schema.

``spotpatch-agent schema --markdown`` prints it; ``python -m spotpatch_agent.protocol.docgen docs/protocol.md``
rewrites the text between :data:`BEGIN` and :data:`END` in place. A test fails when the committed section
differs from :func:`render_method_reference`.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from spotpatch_agent.protocol.catalog import CATALOG, MethodSpec
from spotpatch_agent.protocol.schema import build_schema

BEGIN = "<!-- BEGIN GENERATED: methods -->"
END = "<!-- END GENERATED: methods -->"
_ARROW = {"client-to-engine": "client → engine", "engine-to-client": "engine → client"}


def render_method_reference() -> str:
    """The section between the markers (markers excluded), ending in a newline."""
    schema = build_schema()
    defs: dict[str, Any] = schema["$defs"]
    seen: dict[str, str] = {}
    out = ["", "_Generated from the method catalog and the JSON Schema; do not edit by hand. Regenerate with",
           "`.venv/bin/python -m spotpatch_agent.protocol.regen` (with every other generated file)",
           "(`spotpatch-agent schema --markdown` prints it). `?` marks a field that may be absent.",
           "Types name `$defs` of `protocol/spotpatch.schema.json`._", ""]
    for spec in CATALOG:
        entry = schema["x-methods"][spec.method]
        out += _method(spec, entry, defs, seen)
    return "\n".join(out) + "\n"


def _method(spec: MethodSpec, entry: dict[str, Any], defs: dict[str, Any], seen: dict[str, str]) -> list[str]:
    lines = [f"### `{spec.method}`", "", f"{_ARROW[spec.direction]} {spec.kind}"
             + ("" if spec.emitted else " (declared; not emitted by this engine version)") + f". {spec.summary}", ""]
    lines += _part("Params", entry["params"], defs, seen, spec.method, none="none (no `params` member).")
    if spec.kind == "request":
        lines += _part("Result", entry["result"], defs, seen, spec.method, none="")
        errors = ", ".join(f"`{code}`" for code in entry["errors"]) or "none"
        lines += [f"Application errors (`-32000` `data.code`): {errors}.", ""]
    return lines


def _part(label: str, ref: dict[str, Any] | None, defs: dict[str, Any], seen: dict[str, str], method: str, *,
          none: str) -> list[str]:
    """One params or result block; a shape already tabled for an earlier method is named, not repeated."""
    if ref is None:
        return [f"{label}: {none}", ""]
    if "$ref" not in ref:
        return [f"{label}: `{_type(ref)}`.", ""]
    name = _name(ref)
    target = defs[name]
    if "oneOf" in target:
        kinds = [_name(member) for member in target["oneOf"]]
        lines = [(f"{label} `{name}`: one of {', '.join(f'`{k}`' for k in kinds)}, tagged by "
                  f"`{target['discriminator']['propertyName']}`."), ""]
        for kind in kinds:
            lines += [f"- `{kind}`: {_fields_inline(defs[kind])}"]
        return lines + [""]
    props = target.get("properties", {})
    if not props:
        return [f"{label} `{name}`: `{{}}` (no members; `params` may be omitted).", ""]
    about = f" {_prose(target['description'])}" if "description" in target else ""
    if name in seen:
        return [f"{label} `{name}`: as in `{seen[name]}`.", ""]
    seen[name] = method
    lines = [f"{label} `{name}`:{about}", "", "| field | type | notes |", "|---|---|---|"]
    required = set(target.get("required", ()))
    for field, schema in props.items():
        mark = "" if field in required else "?"
        cell = _type(schema).replace("|", "\\|")  # GFM splits cells on | even inside code spans
        lines.append(f"| `{field}{mark}` | `{cell}` | {_notes(schema)} |")
    return lines + [""]


def _fields_inline(target: dict[str, Any]) -> str:
    required = set(target.get("required", ()))
    parts = []
    for field, schema in target.get("properties", {}).items():
        if field in ("jobId", "seq", "at"):
            continue
        parts.append(f"`{field}{'' if field in required else '?'}: {_type(schema)}`")
    return ", ".join(parts)


def _name(ref: dict[str, Any]) -> str:
    target: str = ref["$ref"]
    return target.rsplit("/", 1)[1]


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return _name(schema)
    if "const" in schema:
        return json.dumps(schema["const"])
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    if "anyOf" in schema:
        return " | ".join(_type(s) for s in schema["anyOf"])
    kind = schema.get("type")
    if kind == "array":
        return _type(schema.get("items", {})) + "[]"
    if kind == "object":
        extra = schema.get("additionalProperties")
        return f"{{string: {_type(extra)}}}" if isinstance(extra, dict) else "object"
    return kind or "any"


def _notes(schema: dict[str, Any]) -> str:
    notes = []
    for low, high, unit in (("minLength", "maxLength", " chars"), ("minimum", "maximum", ""),
                            ("minItems", "maxItems", " items")):
        lo, hi = schema.get(low), schema.get(high)
        if lo is not None and hi is not None:
            notes.append(f"{lo}..{hi}{unit}")
        elif lo is not None:
            notes.append(f"≥ {lo}{unit}")
        elif hi is not None:
            notes.append(f"≤ {hi}{unit}")
    if "pattern" in schema:
        notes.append(f"pattern `{schema['pattern']}`")
    if "default" in schema:
        notes.append(f"default `{json.dumps(schema['default'])}`")
    if "description" in schema:
        notes.append(_prose(schema["description"]))
    return "; ".join(notes).replace("|", "\\|")


def _prose(text: str) -> str:
    """A docstring as one Markdown line: RST ````x```` becomes ```x```."""
    return re.sub(r"``([^`]+)``", r"`\1`", text).replace("\n", " ")


def splice(document: str, section: str | None = None) -> str:
    """``document`` with the text between :data:`BEGIN` and :data:`END` replaced by ``section`` (default:
    :func:`render_method_reference`). Raises ``ValueError`` when the markers are missing or out of order."""
    start, end = document.find(BEGIN), document.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the document needs the markers {BEGIN!r} and {END!r}, in that order")
    body = render_method_reference() if section is None else section
    return document[: start + len(BEGIN)] + "\n" + body + document[end:]


def main(argv: list[str]) -> int:
    """``python -m spotpatch_agent.protocol.docgen FILE``: rewrite FILE's generated section in place."""
    if len(argv) != 1:
        sys.stderr.write("usage: python -m spotpatch_agent.protocol.docgen docs/protocol.md\n")
        return 2
    path = Path(argv[0])
    path.write_text(splice(path.read_text("utf-8")), "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""The protocol's JSON Schema (draft 2020-12), generated from the models and the method catalog.

``spotpatch-agent schema`` prints :func:`render_schema`; ``protocol/spotpatch.schema.json`` is that output,
committed, and a test fails when the two differ (docs/design.md §3). Layout::

    $schema, title, description, x-protocolVersion
    $defs         one definition per model (params in validation mode, results and engine messages in
                  serialization mode), the ErrorCode / ToolErrorCode enums, the JobEventNotification union
    x-methods     per method: direction, kind, params / result ({"$ref": …}, {"type": "null"} or null),
                  errors, summary (+ emitted: false for declared-only messages)
    x-errors      JSON-RPC codes, the application code -32000 with its data def, retryable per code
    x-limits      per limit: default and hard cap (docs/design.md §4)
    x-framing     maxFrameBytes

``x-*`` keywords are annotations a validator ignores; validate a message part against its def, e.g.
``{"$ref": "spotpatch.schema.json#/$defs/JobCreateParams"}``.

Engine output never holds ``null`` (``WireModel.dump`` drops it), so in serialization mode a nullable field
is optional and non-null, every other field is required, and no unknown property is allowed.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue, models_json_schema
from pydantic_core import core_schema

from spotpatch_agent import PROTOCOL_VERSION
from spotpatch_agent.protocol.catalog import CATALOG, CLIENT, MethodSpec
from spotpatch_agent.protocol.errors import APPLICATION_ERROR, RETRYABLE, ToolErrorCode
from spotpatch_agent.protocol.jobs import ErrorInfo
from spotpatch_agent.protocol.limits import LIMITS, MAX_FRAME_BYTES

DIALECT = "https://json-schema.org/draft/2020-12/schema"
REF = "#/$defs/{model}"

RPC_ERRORS = {
    "-32700": "Parse error: bad framing or a body that is not UTF-8 JSON (id null)",
    "-32600": "Invalid Request",
    "-32601": "Method not found",
    "-32602": "Invalid params (the params model rejected them)",
    "-32603": "Internal error",
    "-32002": "Server not initialized",
    "-32800": "Request cancelled",
    str(APPLICATION_ERROR): "Application error: data is ErrorInfo {code, message, retryable}",
}


def _unwrap_default(schema: core_schema.CoreSchema) -> core_schema.CoreSchema:
    return schema["schema"] if schema["type"] == "default" else schema


class WireSchemaGenerator(GenerateJsonSchema):
    """Pydantic's generator, with engine output described exactly as ``WireModel.dump`` writes it."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False  # "Jobid"-style titles only make code generators invent type names

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        # Output models hold no list/dict of optionals, so every nullable here is a field dump() drops.
        if self.mode == "serialization":
            return self.generate_inner(schema["schema"])
        return super().nullable_schema(schema)

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        if self.mode == "serialization":
            return self.generate_inner(schema["schema"])  # a default is no promise about engine output
        return super().default_schema(schema)

    def field_is_required(
        self, field: core_schema.ModelField | core_schema.DataclassField | core_schema.TypedDictField, total: bool
    ) -> bool:
        if self.mode == "serialization":
            kind: str = _unwrap_default(field["schema"])["type"]
            return kind != "nullable"
        return super().field_is_required(field, total)

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        json_schema = super().model_schema(schema)
        if self.mode == "serialization":
            target = self.get_schema_from_definitions(json_schema["$ref"]) if "$ref" in json_schema else json_schema
            if target is not None and target.get("type") == "object":
                target["additionalProperties"] = False
        return json_schema


def _mode(spec: MethodSpec) -> JsonSchemaMode:
    return "validation" if spec.direction == CLIENT else "serialization"


def build_schema() -> dict[str, Any]:
    """The whole protocol schema as a dict (see the module docstring for its layout)."""
    inputs: dict[tuple[type[BaseModel], JsonSchemaMode], None] = {}
    for spec in CATALOG:
        if isinstance(spec.params, type) and issubclass(spec.params, BaseModel):
            inputs[(spec.params, _mode(spec))] = None
        if spec.result is not None:
            inputs[(spec.result, "serialization")] = None
    inputs[(ErrorInfo, "serialization")] = None
    _, top = models_json_schema(list(inputs), by_alias=True, ref_template=REF, schema_generator=WireSchemaGenerator)
    defs: dict[str, Any] = top["$defs"]
    clashes = sorted(name for name in defs if name.endswith(("-Input", "-Output")))
    if clashes:
        raise RuntimeError(f"a model is used both as params and as result with different shapes: {clashes}")
    defs["ErrorCode"]["x-retryable"] = {code.value: RETRYABLE[code] for code in RETRYABLE}
    defs["ErrorCode"]["description"] = "Application error codes (data.code of a -32000 error, ErrorInfo.code)."
    defs.setdefault(
        "ToolErrorCode", {"enum": [c.value for c in ToolErrorCode], "type": "string", "title": "ToolErrorCode"}
    )
    defs["ToolErrorCode"]["description"] = "Tool-level codes the model sees (activity events); never RPC errors."

    methods: dict[str, Any] = {}
    for spec in CATALOG:
        entry: dict[str, Any] = {
            "direction": spec.direction,
            "kind": spec.kind,
            "params": _ref(spec.params, defs),
            "result": None if spec.kind == "notification" else _ref(spec.result, defs) or {"type": "null"},
            "errors": [code.value for code in spec.errors],
            "summary": spec.summary,
        }
        if not spec.emitted:
            entry["emitted"] = False
        methods[spec.method] = entry

    return {
        "$schema": DIALECT,
        "title": f"SpotPatch engine protocol {PROTOCOL_VERSION}",
        "description": "Stdio JSON-RPC 2.0 between SpotPatch clients and the engine (docs/design.md §3-§4). "
                       "Generated by `spotpatch-agent schema`; do not edit by hand.",
        "x-protocolVersion": PROTOCOL_VERSION,
        "$defs": defs,
        "x-methods": methods,
        "x-errors": {
            "rpc": RPC_ERRORS,
            "application": {"code": APPLICATION_ERROR, "data": {"$ref": REF.format(model="ErrorInfo")}},
            "retryable": {code.value: RETRYABLE[code] for code in RETRYABLE},
            "toolCodes": [c.value for c in ToolErrorCode],
        },
        "x-limits": {name: {"default": default, "cap": cap} for name, (default, cap) in LIMITS.items()},
        "x-framing": {"maxFrameBytes": MAX_FRAME_BYTES},
    }


def _ref(model: Any, defs: dict[str, Any]) -> dict[str, str] | None:
    if model is None:
        return None
    name = getattr(model, "__name__", None)
    if name not in defs:
        raise RuntimeError(f"{name} has no definition in the schema")
    return {"$ref": REF.format(model=name)}


def render_schema() -> str:
    """:func:`build_schema` as deterministic JSON text: sorted keys, two-space indent, trailing newline."""
    return json.dumps(build_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"

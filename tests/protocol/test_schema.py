"""protocol/spotpatch.schema.json is exactly what ``spotpatch-agent schema`` prints, and is a sound draft
2020-12 schema holding every model, every method, the error codes and the limits (docs/design.md §3–§4)."""

from __future__ import annotations

import json
import subprocess
import sys

from jsonschema import Draft202012Validator

from spotpatch_agent.protocol.catalog import CATALOG
from spotpatch_agent.protocol.errors import APPLICATION_ERROR, RETRYABLE, ErrorCode, ToolErrorCode
from spotpatch_agent.protocol.limits import LIMITS, MAX_FRAME_BYTES
from spotpatch_agent.protocol.schema import render_schema
from tests.protocol._schema import REGENERATE, SCHEMA_PATH, load_schema, run_cli, validator


def test_committed_schema_equals_the_console_script_output() -> None:
    printed = json.loads(run_cli("schema"))
    committed = json.loads(SCHEMA_PATH.read_text("utf-8"))
    assert printed == committed, (
        f"protocol/spotpatch.schema.json is stale: the models or the catalog changed. Regenerate it with\n"
        f"    {REGENERATE}\nand commit the result."
    )


def test_output_is_deterministic_sorted_json() -> None:
    text = render_schema()
    assert text == render_schema()
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert SCHEMA_PATH.read_text("utf-8") == text, f"byte drift (same JSON, different text): run {REGENERATE}"


def test_schema_is_valid_draft_2020_12() -> None:
    schema = load_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)
    for name in schema["$defs"]:
        Draft202012Validator.check_schema({"$defs": schema["$defs"], "$ref": f"#/$defs/{name}"})
    assert not [name for name in schema["$defs"] if name.endswith(("-Input", "-Output"))]


def test_every_method_has_its_entry_and_its_refs_resolve() -> None:
    schema = load_schema()
    methods = schema["x-methods"]
    assert sorted(methods) == sorted(spec.method for spec in CATALOG)
    for spec in CATALOG:
        entry = methods[spec.method]
        assert entry["direction"] == spec.direction and entry["kind"] == spec.kind
        assert entry["errors"] == [code.value for code in spec.errors]
        for key in ("params", "result"):
            part = entry[key]
            if part is None:
                continue
            if "$ref" in part:
                assert part["$ref"].removeprefix("#/$defs/") in schema["$defs"], (spec.method, key)
            validator(schema, part)  # compiles
        if spec.kind == "notification":
            assert entry["result"] is None
        else:
            assert entry["result"] is not None
    assert methods["shutdown"]["result"] == {"type": "null"}
    assert methods["exit"]["params"] is None
    assert methods["$/logTrace"]["emitted"] is False


def test_error_codes_limits_and_framing_are_in_the_schema() -> None:
    schema = load_schema()
    defs = schema["$defs"]
    assert defs["ErrorCode"]["enum"] == [code.value for code in ErrorCode]
    assert defs["ErrorCode"]["x-retryable"] == {code.value: flag for code, flag in RETRYABLE.items()}
    assert defs["ToolErrorCode"]["enum"] == [code.value for code in ToolErrorCode]
    assert schema["x-errors"]["application"] == {"code": APPLICATION_ERROR, "data": {"$ref": "#/$defs/ErrorInfo"}}
    assert schema["x-errors"]["retryable"] == defs["ErrorCode"]["x-retryable"]
    assert schema["x-limits"] == {name: {"default": d, "cap": c} for name, (d, c) in LIMITS.items()}
    assert schema["x-framing"] == {"maxFrameBytes": MAX_FRAME_BYTES}
    limits = defs["Limits"]["properties"]
    for name, (default, cap) in LIMITS.items():
        assert (limits[name]["default"], limits[name]["minimum"], limits[name]["maximum"]) == (default, 1, cap)


def test_job_event_is_a_union_tagged_by_kind() -> None:
    schema = load_schema()
    union = schema["$defs"]["JobEventNotification"]
    assert union["discriminator"]["propertyName"] == "kind"
    kinds = {schema["$defs"][ref["$ref"].removeprefix("#/$defs/")]["properties"]["kind"]["const"]
             for ref in union["oneOf"]}
    assert kinds == {"status", "activity", "message", "check", "diff", "error"}
    items = schema["$defs"]["JobEventsResult"]["properties"]["events"]["items"]
    assert items == {"$ref": "#/$defs/JobEventNotification"}


def test_audit_record_is_a_union_tagged_by_type() -> None:
    schema = load_schema()
    assert schema["$defs"]["JobAuditResult"]["properties"]["records"]["items"] == {"$ref": "#/$defs/AuditRecord"}
    union = schema["$defs"]["AuditRecord"]
    assert union["discriminator"]["propertyName"] == "type"
    kinds = set()
    for ref in union["oneOf"]:
        kind = schema["$defs"][ref["$ref"].removeprefix("#/$defs/")]["properties"]["type"]
        kinds.update([kind["const"]] if "const" in kind else kind["enum"])
    assert kinds == {"job_start", "tool_call", "check", "limit", "truncated", "apply", "revert", "suggestion",
                     "job_end"}


def test_engine_output_is_described_strictly_and_params_reject_unknown_keys() -> None:
    schema = load_schema()
    snapshot = {"jobId": "job_1", "status": "running", "annotationId": "a", "modelProfileId": "m",
                "applyMode": "review", "createdAt": "t", "updatedAt": "t", "turns": 0, "toolCalls": 0,
                "lastSeq": 1, "files": []}
    ref = {"$ref": "#/$defs/JobSnapshot"}
    assert validator(schema, ref).is_valid(snapshot)
    assert not validator(schema, ref).is_valid({**snapshot, "message": None})  # the engine never sends null
    assert not validator(schema, ref).is_valid({**snapshot, "surprise": 1})
    assert not validator(schema, ref).is_valid({k: v for k, v in snapshot.items() if k != "turns"})
    params = {"$ref": "#/$defs/JobIdParams"}
    assert validator(schema, params).is_valid({"jobId": "job_1"})
    assert not validator(schema, params).is_valid({"jobId": "job_1", "extra": True})


def test_schema_command_is_fast_and_imports_no_engine_code() -> None:
    code = ("import io, sys, contextlib\n"
            "from spotpatch_agent.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main(['schema']) == 0 and main(['schema', '--markdown']) == 0\n"
            "heavy = sorted(m for m in ('httpx', 'httpcore', 'anyio', 'pylsp_jsonrpc', 'spotpatch_agent.engine',\n"
            "                         'spotpatch_agent.rpc', 'spotpatch_agent.worktree') if m in sys.modules)\n"
            "print(heavy)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"

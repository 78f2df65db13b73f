"""The eval's table and JSON document (docs/eval.md "The table", "JSON").

:func:`eval_document` is the ``--json`` file: ``{"schema": "spotpatch-eval", "version": 1, "settings",
"summary", "results"}``; :data:`EVAL_JSON_SCHEMA` is its JSON Schema (draft 2020-12), checked by the tests.
:func:`format_table` prints one line per task run and a totals line, then the pass rate and the failures
with their diagnosis and reason.
"""

from __future__ import annotations

from collections import Counter
from typing import Any
from urllib.parse import urlsplit

from spotpatch_agent.eval.runner import EvalSettings

SCHEMA_NAME = "spotpatch-eval"
SCHEMA_VERSION = 1
DIAGNOSES = ("pass", "model", "provider", "engine", "timeout")

_INT_OR_NULL = {"type": ["integer", "null"], "minimum": 0}
_RESULT = {
    "type": "object",
    "required": ["task", "app", "kind", "run", "passed", "diagnosis", "status", "errorCode", "message", "reasons",
                 "typecheck", "changedFiles", "turns", "toolCalls", "failedCalls", "requests", "tokensIn",
                 "tokensOut", "wallMs", "modelMs", "engineMs", "timedOut"],
    "properties": {
        "task": {"type": "string", "pattern": "^[a-z]+/[a-z0-9-]+$"},
        "app": {"enum": ["react", "vue", "svelte"]},
        "kind": {"type": "string"},
        "run": {"type": "integer", "minimum": 1},
        "passed": {"type": "boolean"},
        "diagnosis": {"enum": list(DIAGNOSES)},
        "status": {"type": "string"},
        "errorCode": {"type": ["string", "null"]},
        "message": {"type": ["string", "null"]},
        "reasons": {"type": "array", "items": {"type": "string"}},
        "typecheck": {"type": "string"},
        "changedFiles": {"type": "array", "items": {"type": "string"}},
        "turns": {"type": "integer", "minimum": 0},
        "toolCalls": {"type": "integer", "minimum": 0},
        "failedCalls": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}},
        "requests": {"type": "integer", "minimum": 0},
        "tokensIn": _INT_OR_NULL,
        "tokensOut": _INT_OR_NULL,
        "wallMs": {"type": "integer", "minimum": 0},
        "modelMs": {"type": "integer", "minimum": 0},
        "engineMs": {"type": "integer", "minimum": 0},
        "timedOut": {"type": "boolean"},
        "keptAt": {"type": "string"},
    },
    "additionalProperties": False,
}
_TOTALS = {
    "type": "object",
    "required": ["runs", "passed", "passRate", "diagnoses", "turns", "toolCalls", "failedCalls", "tokensIn",
                 "tokensOut", "wallMs", "modelMs", "engineMs", "typecheck"],
    "properties": {
        "runs": {"type": "integer", "minimum": 0},
        "passed": {"type": "integer", "minimum": 0},
        "passRate": {"type": "number", "minimum": 0, "maximum": 1},
        "diagnoses": {"type": "object", "additionalProperties": {"type": "integer"}},
        "turns": {"type": "integer"}, "toolCalls": {"type": "integer"},
        "failedCalls": {"type": "object", "additionalProperties": {"type": "integer"}},
        "tokensIn": {"type": "integer"}, "tokensOut": {"type": "integer"},
        "wallMs": {"type": "integer"}, "modelMs": {"type": "integer"}, "engineMs": {"type": "integer"},
        "typecheck": {"type": "object", "additionalProperties": {"type": "integer"}},
    },
    "additionalProperties": False,
}
EVAL_JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "spotpatch-agent eval --json",
    "type": "object",
    "required": ["schema", "version", "complete", "settings", "summary", "results"],
    "properties": {
        "schema": {"const": SCHEMA_NAME},
        "version": {"const": SCHEMA_VERSION},
        "complete": {"type": "boolean"},
        "settings": {
            "type": "object",
            "required": ["host", "model", "api", "editFormat", "runs", "tasks", "timeoutSec", "typecheck"],
            "properties": {
                "host": {"type": "string"}, "model": {"type": "string"}, "api": {"enum": ["chat", "responses"]},
                "editFormat": {"type": "string"}, "runs": {"type": "integer", "minimum": 1},
                "tasks": {"type": "array", "items": {"type": "string"}},
                "timeoutSec": {"type": "number"}, "typecheck": {"type": "boolean"},
            },
            "additionalProperties": False,
        },
        "summary": {
            "type": "object",
            "required": ["total", "byApp", "byKind"],
            "properties": {
                "total": _TOTALS,
                "byApp": {"type": "object", "additionalProperties": _TOTALS},
                "byKind": {"type": "object", "additionalProperties": _TOTALS},
            },
            "additionalProperties": False,
        },
        "results": {"type": "array", "items": _RESULT},
    },
    "additionalProperties": False,
}


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Sums over ``rows`` (token sums count only the turns whose provider reported usage)."""
    failed: Counter[str] = Counter()
    for row in rows:
        failed.update(row["failedCalls"])
    passed = sum(1 for r in rows if r["passed"])
    return {
        "runs": len(rows), "passed": passed, "passRate": round(passed / len(rows), 4) if rows else 0.0,
        "diagnoses": dict(Counter(r["diagnosis"] for r in rows)),
        "turns": sum(r["turns"] for r in rows), "toolCalls": sum(r["toolCalls"] for r in rows),
        "failedCalls": dict(sorted(failed.items())),
        "tokensIn": sum(r["tokensIn"] or 0 for r in rows), "tokensOut": sum(r["tokensOut"] or 0 for r in rows),
        "wallMs": sum(r["wallMs"] for r in rows), "modelMs": sum(r["modelMs"] for r in rows),
        "engineMs": sum(r["engineMs"] for r in rows),
        "typecheck": dict(Counter(r["typecheck"].split(":", 1)[0] for r in rows)),
    }


def host_of(base_url: str) -> str:
    """The base URL's host and port only: never a path, a query or credentials (docs/eval.md)."""
    parts = urlsplit(base_url)
    host = parts.hostname or "?"
    return f"{host}:{parts.port}" if parts.port else host


def eval_document(settings: EvalSettings, task_ids: list[str], rows: list[dict[str, Any]], *,
                  complete: bool = True) -> dict[str, Any]:
    """The ``--json`` document (:data:`EVAL_JSON_SCHEMA`); ``complete`` is false when the run was interrupted
    and ``results`` holds only the runs that finished."""
    def grouped(key: str) -> dict[str, Any]:
        return {value: totals([r for r in rows if r[key] == value]) for value in dict.fromkeys(r[key] for r in rows)}

    return {
        "schema": SCHEMA_NAME, "version": SCHEMA_VERSION, "complete": complete,
        "settings": {"host": host_of(settings.base_url), "model": settings.model, "api": settings.api,
                     "editFormat": settings.edit_format, "runs": settings.runs, "tasks": task_ids,
                     "timeoutSec": settings.timeout, "typecheck": settings.typecheck},
        "summary": {"total": totals(rows), "byApp": grouped("app"), "byKind": grouped("kind")},
        "results": rows,
    }


def _tokens(value: int | None) -> str:
    return "-" if value is None else str(value)


def _failed(failed: dict[str, int]) -> str:
    return ",".join(f"{code}×{n}" for code, n in sorted(failed.items())) or "-"


HEADER = ("task", "run", "result", "typecheck", "turns", "calls", "failed calls", "tok in", "tok out", "wall s",
          "engine s", "model s")


def _line(cells: tuple[str, ...], widths: list[int]) -> str:
    return "  ".join(c.ljust(w) if i in (0, 2, 3, 6) else c.rjust(w)
                     for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()


def format_table(document: dict[str, Any]) -> str:
    """The table printed after the run (docs/eval.md "The table"): one row per task run, a totals row, the
    pass rate, then each failure with its diagnosis, error code and reasons."""
    rows = document["results"]
    body: list[tuple[str, ...]] = []
    for r in rows:
        result = "pass" if r["passed"] else f"FAIL {r['diagnosis']}"
        body.append((r["task"], str(r["run"]), result, r["typecheck"].split(":", 1)[0], str(r["turns"]),
                     str(r["toolCalls"]), _failed(r["failedCalls"]), _tokens(r["tokensIn"]), _tokens(r["tokensOut"]),
                     f"{r['wallMs'] / 1000:.1f}", f"{r['engineMs'] / 1000:.1f}", f"{r['modelMs'] / 1000:.1f}"))
    t = document["summary"]["total"]
    total = ("total", str(t["runs"]), f"{t['passed']} pass", "", str(t["turns"]), str(t["toolCalls"]),
             _failed(t["failedCalls"]), str(t["tokensIn"]), str(t["tokensOut"]), f"{t['wallMs'] / 1000:.1f}",
             f"{t['engineMs'] / 1000:.1f}", f"{t['modelMs'] / 1000:.1f}")
    widths = [max(len(row[i]) for row in (HEADER, *body, total)) for i in range(len(HEADER))]
    rule = "-" * (sum(widths) + 2 * (len(widths) - 1))
    s = document["settings"]
    head = f"spotpatch-agent eval: model {s['model']!r} at {s['host']} ({s['api']}, edit format {s['editFormat']})"
    if not document["complete"]:
        head += f" — INTERRUPTED: {len(rows)} of {len(s['tasks']) * s['runs']} runs finished"
    lines = [head,
             _line(HEADER, widths), rule, *(_line(row, widths) for row in body), rule, _line(total, widths), ""]
    diag = ", ".join(f"{d} {t['diagnoses'][d]}" for d in DIAGNOSES if t["diagnoses"].get(d))
    lines.append(f"pass rate: {t['passed']}/{t['runs']} ({t['passRate'] * 100:.1f}%)" + (f" — {diag}" if diag else ""))
    for key, label in (("byApp", "by app"), ("byKind", "by kind")):
        parts = [f"{name} {g['passed']}/{g['runs']}" for name, g in document["summary"][key].items()]
        lines.append(f"{label}: " + ", ".join(parts))
    unavailable = sorted({r["typecheck"] for r in rows if r["typecheck"].startswith("unavailable")})
    for why in unavailable:
        lines.append(f"typecheck {why}")
    failures = [r for r in rows if not r["passed"]]
    if failures:
        lines.append("")
        lines.append("failures:")
    for r in failures:
        why = "; ".join(r["reasons"]) or (r["message"] or "")
        code = f" {r['errorCode']}" if r["errorCode"] else ""
        lines.append(f"  {r['task']} (run {r['run']}): {r['diagnosis']}{code} — {' '.join(why.split())[:400]}")
    return "\n".join(lines) + "\n"

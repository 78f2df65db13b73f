"""The ledger's summary as a pure function of its records (docs/design.md §13; the ``job_end`` record).

:func:`derive_summary` reads only records, never the job: the ``job_end`` record of a ledger is
``derive_summary(records before it, outcome=…, error_code=…, audit_write_failed=…)`` plus its own
``type``/``seq``/``recordedAtMs``, and anyone holding the records (the JSONL file, ``job/audit``) can
recompute it. ``outcome`` (the job's status when its run ended), ``errorCode`` and ``auditWriteFailed``
are facts of the end, not of the records, so they are arguments.

Records after ``job_end`` (a later ``apply``/``revert`` by the user, a ``suggestion`` run) only add to
``applies`` and ``suggestions``: every other field of the live summary (``job/audit``) equals ``job_end``'s.

Per target (``targets``), for its offered source path and line (``job_start``):

- ``read``: a successful ``read_file`` of that path (a tool declared ``audit_served``);
- ``lineCovered``: the range one of those reads served includes the offered line;
- ``readBeforeFirstWrite``: such a read has a smaller ``seq`` than the first successful write (true when
  it was read and nothing was written);
- ``contentSha256Match``: the SHA-256 of the bytes the *first* read served equals the hash offered at job
  start (absent when either hash is missing); a later read may differ because the agent wrote;
- ``lines``: the range the first read served (for "read lines 1–40").
"""

from __future__ import annotations

from typing import Any

from spotpatch_agent.audit.records import SERVING_TOOLS, WRITE_TOOLS

#: Record types that come after ``job_end`` and only add to ``applies`` / ``suggestions``.
AFTER_END_TYPES = frozenset({"apply", "revert", "suggestion"})


def _first_path(record: dict[str, Any]) -> str | None:
    if "path" in record:
        return record["path"]
    for entry in record.get("paths", ()):
        if "path" in entry:
            return entry["path"]
    return None


def _target_summary(target: dict[str, Any], reads: list[dict[str, Any]], first_write_seq: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {"index": target["index"]}
    for key in ("path", "pathRejected", "line"):
        if key in target:
            out[key] = target[key]
    path = target.get("path")
    mine = [r for r in reads if path is not None and r.get("path") == path]
    out["read"] = bool(mine)
    line = target.get("line")
    out["lineCovered"] = line is not None and any(
        "servedLines" in r and r["servedLines"]["start"] <= line <= r["servedLines"]["end"] for r in mine)
    out["readBeforeFirstWrite"] = bool(mine) and (first_write_seq is None or mine[0]["seq"] < first_write_seq)
    if mine:
        first = mine[0]
        if "servedLines" in first:
            out["lines"] = dict(first["servedLines"])
        if "sha256" in target and "contentSha256" in first:
            out["contentSha256Match"] = first["contentSha256"] == target["sha256"]
    return out


def derive_summary(
    records: list[dict[str, Any]], *, outcome: str, error_code: str | None = None, audit_write_failed: bool = False,
) -> dict[str, Any]:
    """The summary of ``records`` (``job_end`` records among them are skipped). Pure: same records, same
    summary. Shape: ``AuditSummary`` in protocol/models.py."""
    start: dict[str, Any] | None = None
    reads: list[dict[str, Any]] = []
    first_write: dict[str, Any] | None = None
    tool_counts: dict[str, int] = {}
    failed: dict[str, int] = {}
    limits: list[str] = []
    checks: list[dict[str, Any]] = []
    applies: list[dict[str, Any]] = []
    suggestions: list[dict[str, Any]] = []
    truncated = False
    dropped = 0
    for record in records:
        kind = record.get("type")
        if kind == "job_start" and start is None:
            start = record
        elif kind == "tool_call":
            tool = record["tool"]
            tool_counts[tool] = tool_counts.get(tool, 0) + 1
            if not record["ok"]:
                code = record.get("errorCode", "UNKNOWN")
                failed[code] = failed.get(code, 0) + 1
            elif tool in SERVING_TOOLS and "path" in record:
                reads.append(record)
            elif tool in WRITE_TOOLS and first_write is None:
                first_write = {"seq": record["seq"], "tool": tool}
                path = _first_path(record)
                if path is not None:
                    first_write["path"] = path
        elif kind == "check":
            checks.append({k: record[k] for k in ("checkId", "status", "durationMs", "exitCode") if k in record})
        elif kind == "limit":
            if record["limit"] not in limits:
                limits.append(record["limit"])
        elif kind == "truncated":
            truncated = True
            dropped = record["dropped"]
            for tool, n in record.get("droppedTools", {}).items():
                tool_counts[tool] = tool_counts.get(tool, 0) + n
            for code, n in record.get("droppedFailed", {}).items():
                failed[code] = failed.get(code, 0) + n
        elif kind in ("apply", "revert"):
            applies.append({k: record[k] for k in ("type", "status", "fileCount", "conflictPaths", "errorCode")
                            if k in record})
        elif kind == "suggestion":
            suggestions.append({k: record[k] for k in ("outcome", "breaker", "verified", "unverified") if k in record})
    write_seq = first_write["seq"] if first_write is not None else None
    targets = [_target_summary(t, reads, write_seq) for t in (start or {}).get("targets", ())]
    summary: dict[str, Any] = {
        "outcome": outcome, "targets": targets, "toolCounts": tool_counts,
        "failedCalls": failed, "limitsHit": limits, "checks": checks, "applies": applies,
        "suggestions": suggestions, "truncated": truncated, "droppedRecords": dropped,
        "auditWriteFailed": audit_write_failed,
    }
    if first_write is not None:
        summary["firstWrite"] = first_write
    if error_code is not None:
        summary["errorCode"] = error_code
    return summary

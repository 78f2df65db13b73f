"""``spotpatch-agent audit``: list a repository's persisted ledgers, show one as a table or as JSON.

Reads ``<git-common-dir>/spotpatch/audit/*.jsonl`` (sink.py) and nothing else; a torn last line is skipped
and counted. The summary shown is recomputed from the records (derive.py), with ``job_end``'s outcome.
What it prints comes from the records only (already redacted when they were written).
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import anyio

from spotpatch_agent.audit.derive import derive_summary
from spotpatch_agent.audit.sink import ledger_path, list_ledgers, read_ledger
from spotpatch_agent.worktree.gitdir_files import unsafe_entries

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2



def _say(text: str, *, file: TextIO) -> None:
    """One line to the CLI's stream (this command's own output; the engine's ``serve`` never runs it)."""
    file.write(f"{text}\n")

def summary_of(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary of a persisted ledger: derived from its records, ``job_end`` giving the end's facts
    (``outcome`` is ``incomplete`` when there is no ``job_end``: the engine stopped before the job ended)."""
    end = next((r for r in records if r.get("type") == "job_end"), None)
    if end is None:
        return derive_summary(records, outcome="incomplete")
    return derive_summary(records, outcome=str(end.get("outcome")), error_code=end.get("errorCode"),
                          audit_write_failed=bool(end.get("auditWriteFailed")))


def target_line(target: dict[str, Any]) -> str:
    """One line per target, as the overlay shows it: ``Target 2: read `src/Card.tsx` lines 1–40 before the
    first write``."""
    head = f"Target {target.get('index')}: "
    if target.get("pathRejected"):
        return head + "no usable source path was offered"
    path = target.get("path")
    if path is None:
        return head + "no source file was offered"
    if not target.get("read"):
        return head + f"did not read `{path}`"
    lines = target.get("lines")
    span = f" lines {lines['start']}–{lines['end']}" if isinstance(lines, dict) else ""
    when = "before the first write" if target.get("readBeforeFirstWrite") else "only after the first write"
    notes = []
    if target.get("line") is not None and not target.get("lineCovered"):
        notes.append(f"never the offered line {target['line']}")
    if target.get("contentSha256Match") is False:
        notes.append("the bytes differed from those offered")
    return head + f"read `{path}`{span} {when}" + (f" ({'; '.join(notes)})" if notes else "")


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"


def _record_row(r: dict[str, Any]) -> str:
    kind = str(r.get("type"))
    seq = str(r.get("seq", "?")).rjust(4)
    if kind == "tool_call":
        where = r.get("path") or ("(path rejected)" if r.get("pathRejected") else "")
        if not where and r.get("paths"):
            where = ", ".join(p.get("path", "(path rejected)") for p in r["paths"])
        served = r.get("servedLines")
        extra = []
        if isinstance(served, dict):
            extra.append(f"lines {served.get('start')}-{served.get('end')}")
        for key in ("glob", "query", "checkId"):
            if key in r:
                extra.append(f"{key}={json.dumps(r[key], ensure_ascii=False)}")
        status = "ok" if r.get("ok") else f"FAILED {r.get('errorCode', '')}".rstrip()
        return (f"{seq}  turn {r.get('turn')}  {str(r.get('tool')):<13} {where:<28} {' '.join(extra):<24} "
                f"{status} {r.get('durationMs')} ms").rstrip()
    if kind == "job_start":
        return f"{seq}  job_start  mode {r.get('mode')}, model profile {r.get('modelProfileId')}, " \
               f"{len(r.get('targets', []))} target(s), {len(r.get('contextFiles', []))} context file(s)"
    if kind == "check":
        return f"{seq}  check      {r.get('checkId')}: {r.get('status')} ({r.get('durationMs')} ms" + \
               (f", exit {r['exitCode']})" if "exitCode" in r else ")")
    if kind == "limit":
        return f"{seq}  limit      {r.get('limit')}"
    if kind == "truncated":
        return f"{seq}  truncated  {r.get('dropped')} later record(s) dropped"
    if kind in ("apply", "revert"):
        return f"{seq}  {kind:<10} {r.get('status')}, {r.get('fileCount')} file(s)" + \
               (f", {r['errorCode']}" if "errorCode" in r else "")
    if kind == "suggestion":
        return f"{seq}  suggestion {r.get('outcome')} (breaker {r.get('breaker')}; citations " \
               f"{r.get('verified')} verified, {r.get('unverified')} unverified)"
    if kind == "job_end":
        return f"{seq}  job_end    {r.get('outcome')}" + (f" ({r['errorCode']})" if "errorCode" in r else "")
    return f"{seq}  {kind}"


def render_table(job_id: str, records: list[dict[str, Any]], skipped: int) -> str:
    """The readable form of one ledger: the summary, one line per target, then one row per record."""
    s = summary_of(records)
    out = [f"Audit ledger {job_id}: outcome {s['outcome']}" + (f" ({s['errorCode']})" if "errorCode" in s else "")
           + f", {len(records)} record(s)"]
    for target in s["targets"]:
        out.append("  " + target_line(target))
    first = s.get("firstWrite")
    out.append("  First write: " + (f"record {first['seq']}, {first['tool']} {first.get('path', '')}".rstrip()
                                     if first else "none"))
    out.append(f"  Tool calls: {_counts(s['toolCounts'])}; failed: {_counts(s['failedCalls'])}")
    out.append(f"  Limits hit: {', '.join(s['limitsHit']) or 'none'}; checks: "
               + (", ".join(f"{c['checkId']} {c['status']}" for c in s["checks"]) or "none"))
    if s["truncated"]:
        out.append(f"  Truncated: {s['droppedRecords']} record(s) dropped past the bound")
    if s["auditWriteFailed"]:
        out.append("  The ledger could not be written completely (auditWriteFailed).")
    if skipped:
        out.append(f"  {skipped} unreadable line(s) skipped (a torn last line after a crash, or not a ledger record)")
    out.append("Records:")
    out.extend(_record_row(r) for r in records)
    return "\n".join(out)


def _printable(line: str) -> str:
    """``line`` without terminal escapes, control characters or bidi overrides: a ledger file may have been
    planted or edited by someone else, and the table goes to a terminal."""
    from spotpatch_agent.provider.http import strip_controls

    return strip_controls(line)


def _common_dir(project: Path) -> Path | None:
    from spotpatch_agent.worktree.repo import locate

    layout = anyio.run(locate, project.resolve())
    return None if layout is None else layout.common_dir


def audit_command(project: Path, job_id: str | None, *, as_json: bool, out: TextIO = sys.stdout) -> int:
    """``spotpatch-agent audit [JOB_ID] [--json] [--project DIR]``. Exit 0; 1 for an unknown or unreadable
    ledger; 2 when ``project`` is not in a git repository."""
    common = _common_dir(project) if project.is_dir() else None
    if common is None:
        _say("spotpatch-agent audit: --project is not inside a git repository", file=sys.stderr)
        return EXIT_USAGE
    refused = [e for e in unsafe_entries(common) if e in ("spotpatch", "spotpatch/audit")]
    if refused:  # a symlink there is never followed: say so rather than "no ledgers"
        _say(f"spotpatch-agent audit: <git dir>/{refused[0]} is a symlink or not a directory; it is not followed "
             "(remove it: `spotpatch-agent doctor`)", file=sys.stderr)
    if job_id is None:
        ledgers = list_ledgers(common)
        rows = []
        for ledger in ledgers:
            try:
                records, _ = read_ledger(ledger_path(common, ledger.job_id))  # type: ignore[arg-type]
            except OSError:
                records = []
            end = next((r for r in records if r.get("type") == "job_end"), {})
            rows.append({"jobId": ledger.job_id, "modifiedMs": ledger.modified_ms, "bytes": ledger.size,
                         "records": len(records), "outcome": end.get("outcome", "incomplete")})
        if as_json:
            _say(json.dumps({"ledgers": rows}, ensure_ascii=False, indent=2), file=out)
        elif not rows:
            _say("No persisted audit ledgers (trusted config audit.persist is off, or no job ran yet).", file=out)
        else:
            for row in rows:
                when = datetime.fromtimestamp(row["modifiedMs"] / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
                _say(_printable(f"{row['jobId']}  {when}  {row['outcome']:<16} {row['records']} record(s)"), file=out)
        return EXIT_OK
    path = ledger_path(common, job_id)
    if path is None or not path.is_file():
        _say("spotpatch-agent audit: no persisted ledger for that job id", file=sys.stderr)
        return EXIT_FAILED
    try:
        records, skipped = read_ledger(path)
    except OSError:
        _say("spotpatch-agent audit: the ledger could not be read", file=sys.stderr)
        return EXIT_FAILED
    if as_json:
        _say(json.dumps({"jobId": job_id, "summary": summary_of(records), "records": records,
                          "skippedLines": skipped}, ensure_ascii=False, indent=2), file=out)
    else:
        _say("\n".join(_printable(line) for line in render_table(job_id, records, skipped).split("\n")), file=out)
    return EXIT_OK

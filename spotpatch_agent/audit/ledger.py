"""One job's audit ledger: ordered, redacted, bounded, fail-open (docs/design.md §13).

:class:`JobLedger` is ``Job.ledger``. The engine records into it as the job runs: ``job_start`` before the
loop (engine/job.py), one ``tool_call`` per completed call (engine/loop.py), final ``check`` results and
``limit`` hits (engine/job.py), then :meth:`JobLedger.finish` appends ``job_end`` (the derived summary,
audit/derive.py) before the job's last status, and :meth:`JobLedger.flush` persists the ledger after it when
trusted config asks for it (``audit.persist``), so the disk is never on the job's path.
After ``job_end`` come ``apply`` / ``revert`` (engine/apply_revert.py) and ``suggestion``
(:meth:`JobLedger.record_suggestion`, the suggestion lane), each recorded in memory, then persisted by
:meth:`JobLedger.persist` (awaited right after, off the event loop: engine/writes.py, engine/suggest.py).

Bounds: :data:`MAX_RECORDS` records up to the end; the next one becomes a single ``truncated`` record that
keeps counting what is dropped (``dropped``, ``droppedTools``, ``droppedFailed``); ``job_end`` is always
kept. After ``job_end`` at most :data:`MAX_AFTER_END` more records are kept.

Fail-open: no method raises for a ledger problem; only :meth:`JobLedger.flush` waits on the disk, after the
job's last status and at most :data:`WRITE_TIMEOUT_SEC`; a failed or late write sets ``auditWriteFailed`` in
the summary (and in the in-memory ``job_end``). A record after ``job_end`` is appended with its own fsync
by :meth:`JobLedger.persist`, in a worker thread, also waiting at most :data:`WRITE_TIMEOUT_SEC`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from spotpatch_agent.audit import sink
from spotpatch_agent.audit.derive import derive_summary
from spotpatch_agent.audit.records import MAX_ID_CHARS, rel_path, scrub, sha256_text, tool_call_record

if TYPE_CHECKING:
    from spotpatch_agent.protocol.models import SpotAnnotation
    from spotpatch_agent.tools.context import WorktreeContext

log = logging.getLogger("spotpatch.audit")

#: Records kept up to ``job_end`` (the 257th becomes the ``truncated`` record).
MAX_RECORDS = 256
#: Records kept after ``job_end`` (applies, reverts, suggestion runs).
MAX_AFTER_END = 64
#: Context files listed in ``job_start``.
MAX_CONTEXT_FILES = 32
#: Longest wait for the job-end write, in seconds; later counts as failed (the job never waits longer).
WRITE_TIMEOUT_SEC = 5.0
#: Most excerpts listed in a ``suggestion`` record.
MAX_EXCERPTS = 32


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


async def _on_disk(write: Callable[..., bool], *args: Any) -> bool:
    """``write(*args)`` in a daemon thread of its own, waiting at most :data:`WRITE_TIMEOUT_SEC`; False when
    it failed or is still running then. The thread is a daemon so that one stuck on a dead disk never
    keeps the engine's process from exiting (a worker thread would be joined at exit, forever)."""
    outcome: list[bool] = []
    finished = threading.Event()

    def run() -> None:
        try:
            outcome.append(bool(write(*args)))
        except Exception:  # noqa: BLE001 - fail-open: reported as not written
            log.exception("audit ledger write failed")
        finally:
            finished.set()

    threading.Thread(target=run, name="spotpatch-audit-write", daemon=True).start()
    # The waiting worker returns by the bound whatever the disk does, so it never outlives it.
    await anyio.to_thread.run_sync(finished.wait, WRITE_TIMEOUT_SEC, abandon_on_cancel=True)
    return finished.is_set() and outcome == [True]


class JobLedger:
    """The ledger of job ``job_id``. ``persist_dir``: the repository's ledger directory when trusted config
    enables persistence (``audit.persist``), else None (memory only); ``keep``: files kept there."""

    def __init__(self, job_id: str, *, persist_dir: Path | None = None, keep: int = 100,
                 max_records: int = MAX_RECORDS) -> None:
        self.job_id = job_id
        self._records: list[dict[str, Any]] = []
        self._persist_dir = persist_dir
        self._keep = keep
        self._max = max_records
        self._truncated: dict[str, Any] | None = None
        self._end: dict[str, Any] | None = None
        self._after_end = 0
        self._write_failed = False
        self._seq = 0
        self._flushed = False  # flush() started: later records are appended one by one
        self._written_seq: int | None = None  # the last record on disk
        self._disk = threading.Lock()  # one append at a time, in seq order (worker threads)

    # ------------------------------------------------------------------ reading

    @property
    def records(self) -> list[dict[str, Any]]:
        """The records so far, in order (copies: callers cannot change the ledger)."""
        return [dict(r) for r in self._records]

    @property
    def ended(self) -> bool:
        return self._end is not None

    @property
    def write_failed(self) -> bool:
        return self._write_failed

    @property
    def path(self) -> Path | None:
        """The JSONL file when persistence is on (it exists once the job ended)."""
        return None if self._persist_dir is None else self._persist_dir / f"{self.job_id}.jsonl"

    def summary(self, *, status: str) -> dict[str, Any]:
        """The live summary: :func:`derive_summary` of every record. ``outcome`` is ``job_end``'s once the
        run ended, else ``status`` (the job's current status)."""
        end = self._end or {}
        return derive_summary(self._records, outcome=end.get("outcome", status), error_code=end.get("errorCode"),
                              audit_write_failed=self._write_failed)

    # ------------------------------------------------------------------ recording

    def _add(self, record: dict[str, Any]) -> None:
        try:
            if self._end is not None:
                if self._after_end >= MAX_AFTER_END:
                    return
                self._after_end += 1
            elif len(self._records) >= self._max:
                self._drop(record)
                return
            self._seq += 1
            self._records.append({"seq": self._seq, "recordedAtMs": _now_ms(), **record})
        except Exception:  # noqa: BLE001 - fail-open: a ledger bug never fails the job
            log.exception("audit record dropped")

    def _drop(self, record: dict[str, Any]) -> None:
        if self._truncated is None:
            self._seq += 1
            self._truncated = {"seq": self._seq, "recordedAtMs": _now_ms(), "type": "truncated", "dropped": 0,
                               "droppedTools": {}, "droppedFailed": {}}
            self._records.append(self._truncated)
        self._truncated["dropped"] += 1
        if record.get("type") == "tool_call":
            tools = self._truncated["droppedTools"]
            tools[record["tool"]] = tools.get(record["tool"], 0) + 1
            if not record["ok"]:
                failed = self._truncated["droppedFailed"]
                code = record.get("errorCode", "UNKNOWN")
                failed[code] = failed.get(code, 0) + 1

    def record_job_start(self, **fields: Any) -> None:
        """``job_start`` (fields from :func:`job_start_fields`); only the first one counts."""
        if not any(r["type"] == "job_start" for r in self._records):
            self._add({"type": "job_start", **fields})

    def has_start(self) -> bool:
        return any(r["type"] == "job_start" for r in self._records)

    def record_tool_call(self, *, turn: int, call_id: str, name: str, arguments_json: str, ok: bool,
                         code: str | None, retryable: bool, duration_ms: int, output: str,
                         content_sha256: str | None) -> None:
        """One completed tool call (engine/loop.py); see :func:`records.tool_call_record`."""
        try:
            record = tool_call_record(turn=turn, call_id=call_id, name=name, arguments_json=arguments_json, ok=ok,
                                      code=code, retryable=retryable, duration_ms=duration_ms, output=output,
                                      content_sha256=content_sha256)
        except Exception:  # noqa: BLE001 - fail-open
            log.exception("audit tool_call record dropped")
            return
        self._add(record)

    def record_check(self, *, check_id: str, status: str, duration_ms: int, exit_code: int | None) -> None:
        """One final check result (engine/job.py)."""
        record: dict[str, Any] = {"type": "check", "checkId": scrub(check_id, MAX_ID_CHARS), "status": status,
                                  "durationMs": duration_ms}
        if exit_code is not None:
            record["exitCode"] = exit_code
        self._add(record)

    def record_limit(self, *, limit: str) -> None:
        """A limit that stopped the job (``limit``: the limit's config name, or ``other``)."""
        self._add({"type": "limit", "limit": limit})

    def record_apply(self, kind: str, *, status: str, file_count: int, conflict_paths: Sequence[str] = (),
                     error_code: str | None = None) -> None:
        """``apply`` or ``revert`` (``kind``): the job's status after it, files touched, the conflicting
        paths (project-relative) and the error code when it did not happen."""
        record: dict[str, Any] = {"type": kind, "status": status, "fileCount": file_count}
        paths = [rel_path(p) for p in list(conflict_paths)[:20]]
        if paths:
            record["conflictPaths"] = paths
        if error_code is not None:
            record["errorCode"] = error_code
        self._add(record)

    def record_suggestion(self, *, excerpts: list[dict], breaker: str, verified: int, unverified: int,
                          outcome: str) -> None:
        """The suggestion lane's run (``job/suggest``, after ``job_end``): each excerpt offered as
        ``{path, startLine, endLine, sha256}`` (path normalised like every path; extra keys ignored),
        the breaker outcome, citation counts and the lane's outcome. Appended after ``job_end`` and
        persisted by :meth:`persist` (awaited by the caller); never raises. It only adds to the summary's
        ``suggestions``; ``job_end`` stays as it was."""
        try:
            shown: list[dict[str, Any]] = []
            for excerpt in list(excerpts)[:MAX_EXCERPTS]:
                entry = rel_path(excerpt.get("path"))
                for key in ("startLine", "endLine"):
                    value = excerpt.get(key)
                    if isinstance(value, int) and not isinstance(value, bool):
                        entry[key] = value
                digest = excerpt.get("sha256")
                if isinstance(digest, str) and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest):
                    entry["sha256"] = digest
                shown.append(entry)
            record = {"type": "suggestion", "excerpts": shown, "excerptsOmitted": max(0, len(excerpts) - MAX_EXCERPTS),
                      "breaker": scrub(str(breaker), MAX_ID_CHARS), "verified": int(verified),
                      "unverified": int(unverified), "outcome": scrub(str(outcome), MAX_ID_CHARS)}
        except Exception:  # noqa: BLE001 - fail-open
            log.exception("audit suggestion record dropped")
            return
        self._add(record)

    # ------------------------------------------------------------------ the end

    def finish(self, *, outcome: str, error_code: str | None = None) -> None:
        """Append ``job_end`` (once): the summary derived from the records so far (in memory, no I/O; the
        job's last status follows it, so ``job/audit`` then always has it). Never raises."""
        if self._end is not None:
            return
        try:
            end = {"type": "job_end", **derive_summary(list(self._records), outcome=outcome, error_code=error_code,
                                                       audit_write_failed=self._write_failed)}
            self._seq += 1
            self._end = {"seq": self._seq, "recordedAtMs": _now_ms(), **end}
            self._records.append(self._end)
        except Exception:  # noqa: BLE001 - fail-open
            log.exception("audit job_end failed")

    async def flush(self) -> None:
        """When persistence is on, write every record so far (append + fsync, then prune to ``keep``
        files) in a worker thread, waiting at most :data:`WRITE_TIMEOUT_SEC`; from then on each later
        record is appended as it comes. Called after the job's last status (the disk is never on the
        job's path). A failure or time-out sets ``auditWriteFailed`` (summary and ``job_end``). Never raises."""
        if self._persist_dir is None or self._flushed or self._end is None:
            return
        self._flushed = True
        try:
            batch = [dict(r) for r in self._records]
            written = await _on_disk(self._write_all, batch)
            if not written:
                self._mark_failed()
                return
            self._written_seq = batch[-1]["seq"]
            await self.persist()  # what came while the thread wrote (an auto Apply, …)
        except Exception:  # noqa: BLE001 - fail-open
            log.exception("audit ledger not written")
            self._mark_failed()

    def _mark_failed(self) -> None:
        self._write_failed = True
        if self._end is not None:
            self._end["auditWriteFailed"] = True

    def _write_all(self, records: list[dict[str, Any]]) -> bool:
        path = self.path
        assert path is not None and self._persist_dir is not None
        ok = sink.append(path, records)
        if ok:
            sink.prune(self._persist_dir, self._keep)
        return ok

    async def persist(self) -> None:
        """Append the records after the last one on disk (an ``apply``, ``revert`` or ``suggestion`` after
        the job's flush) in a worker thread, waiting at most :data:`WRITE_TIMEOUT_SEC`: a slow or stalled
        disk never blocks the engine's event loop. A failure or time-out sets ``auditWriteFailed``. No-op
        before the flush (which writes them itself) or when persistence is off. Never raises."""
        if self.path is None or not self._flushed or self._write_failed or self._written_seq is None:
            return
        try:
            done = await _on_disk(self._append_pending)
            if not done:
                self._write_failed = True
        except Exception:  # noqa: BLE001 - fail-open
            log.exception("audit ledger: later records not written")
            self._write_failed = True

    def _append_pending(self) -> bool:
        path = self.path
        assert path is not None
        with self._disk:
            written = self._written_seq or 0
            pending = [dict(r) for r in list(self._records) if r["seq"] > written]
            if not pending:
                return True
            if not sink.append(path, pending, create=False):  # a file retention removed stays removed
                return False
            self._written_seq = pending[-1]["seq"]
            return True


def job_start_fields(*, job_id: str, provider_id: str, model_profile_id: str, mode: str, limits: dict[str, int],
                     local_changes: bool, targets: list[dict[str, Any]], context_files: tuple = ()) -> dict[str, Any]:
    """The fields of ``job_start``: ids, mode, effective limits, whether local changes were included, the
    targets (:func:`offered_targets`) and the context files offered (path, SHA-256, kind)."""
    files = [{**rel_path(f.path), "sha256": f.sha256, "kind": scrub(f.kind, MAX_ID_CHARS)}
             for f in context_files[:MAX_CONTEXT_FILES]]
    return {"jobId": job_id, "providerId": provider_id, "modelProfileId": model_profile_id, "mode": mode,
            "limits": limits, "localChangesIncluded": local_changes, "targets": targets, "contextFiles": files,
            "contextFilesOmitted": max(0, len(context_files) - MAX_CONTEXT_FILES)}


def target_entries(annotation: SpotAnnotation, hashes: dict[str, dict[str, str]] | None, *,
                   images_sent: bool = False) -> list[dict[str, Any]]:
    """Per target: index, offered path (or ``pathRejected``) and line, the file's SHA-256 (or
    ``hashSkipped``: ``missing``, ``too-large``, ``not-started`` when the job ended before its worktree),
    instruction length and SHA-256 (never its text); with a picture, its SHA-256, byte size and
    ``imageSent`` (``images_sent``: the job's model received the pictures) — never the image itself.
    ``hashes``: path → ``{"sha256"}`` or ``{"hashSkipped"}``."""
    out: list[dict[str, Any]] = []
    for target in annotation.targets:
        entry: dict[str, Any] = {"index": target.index}
        if target.source is not None:
            entry.update(rel_path(target.source.file))
            entry["line"] = target.source.line
            if "path" in entry:
                entry.update((hashes or {}).get(entry["path"], {"hashSkipped": "not-started"}))
        entry["instructionChars"] = len(target.instruction)
        entry["instructionSha256"] = sha256_text(target.instruction)
        if target.image is not None:
            entry.update(imageSha256=target.image.sha256, imageBytes=target.image.byte_size, imageSent=images_sent)
        out.append(entry)
    return out


async def offered_hashes(ctx: WorktreeContext, annotation: SpotAnnotation) -> dict[str, dict[str, str]]:
    """SHA-256 of each target's offered file in the job's worktree at job start, read through the tools'
    reader (the path policy; cached, so the agent's later read costs nothing): ``{"sha256": hex}``, or
    ``{"hashSkipped": "too-large"}`` past ``editableFileMaxBytes``, else ``{"hashSkipped": "missing"}``
    (absent, or not a file the agent may read)."""
    paths = sorted({e["path"] for e in target_entries(annotation, {}) if "path" in e})
    files = await ctx.read_texts(paths) if paths else {}
    max_bytes = ctx.limits.get("editableFileMaxBytes")
    out: dict[str, dict[str, str]] = {}
    for path in paths:
        found = files.get(path)
        if found is not None:
            out[path] = {"sha256": hashlib.sha256(found.data).hexdigest()}
            continue
        try:
            st = os.lstat(ctx.root / path)
            big = stat.S_ISREG(st.st_mode) and st.st_size > max_bytes
        except OSError:
            big = False
        out[path] = {"hashSkipped": "too-large" if big else "missing"}
    return out

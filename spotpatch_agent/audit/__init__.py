"""The per-job audit ledger (docs/design.md §13): what the agent was offered, what it read, what it wrote first.

- :class:`JobLedger` (ledger.py) — one job's ordered, redacted, bounded, fail-open records (``Job.ledger``).
- :func:`derive_summary` (derive.py) — the ``job_end`` summary as a pure function of the records.
- records.py — the record builders and the argument whitelist; sink.py — JSONL under the git directory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spotpatch_agent.protocol.lazy import lazy_exports

if TYPE_CHECKING:
    from spotpatch_agent.audit.derive import derive_summary
    from spotpatch_agent.audit.ledger import MAX_RECORDS, JobLedger
    from spotpatch_agent.audit.sink import audit_dir, ledger_path, list_ledgers, read_ledger

__all__ = ["MAX_RECORDS", "JobLedger", "audit_dir", "derive_summary", "ledger_path", "list_ledgers", "read_ledger"]

# Loaded on first use (cold start, issue 17): ``initialize`` needs only ``sink.audit_dir``, a job the ledger.
_HOME = {"derive_summary": "derive", "MAX_RECORDS": "ledger", "JobLedger": "ledger", "audit_dir": "sink",
         "ledger_path": "sink", "list_ledgers": "sink", "read_ledger": "sink"}


__getattr__ = lazy_exports(__name__, globals(), _HOME)

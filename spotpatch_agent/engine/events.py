"""Per-job event log: ``seq`` starts at 1 and strictly increases per job (docs/design.md §3).

Events are kept in memory for the job's life (``job/events`` replays them) and sent as ``job/event``
notifications through ``send``. Every text field is redacted before it is stored.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from spotpatch_agent.policy.redact import REDACTOR, shorten_paths

if TYPE_CHECKING:
    from spotpatch_agent.errors import SpotPatchError
    from spotpatch_agent.protocol.jobs import ErrorInfo

MAX_MESSAGE_CHARS = 4000
MAX_ID_CHARS = 128


def error_info(error: SpotPatchError) -> ErrorInfo:
    """The wire form of an application error (``JobSnapshot.error``, the ``error`` event, a probe's error)."""
    from spotpatch_agent.protocol.jobs import ErrorInfo

    return ErrorInfo(code=error.code, message=error.message, retryable=error.retryable)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JobEventLog:
    """Assigns ``seq`` and emits. ``send(params_dict)`` must preserve call order (one writer queue)."""

    def __init__(self, job_id: str, send: Callable[[dict[str, Any]], None]) -> None:
        self.job_id = job_id
        self._send = send
        self._lock = threading.Lock()
        self.events: list[dict[str, Any]] = []

    @property
    def last_seq(self) -> int:
        return len(self.events)

    def emit(self, kind: str, **fields: Any) -> dict[str, Any]:
        from spotpatch_agent.protocol.events import JobEvent  # the event models load with a job (cold start)

        for key, value in fields.items():  # every string may carry model or provider text: redact and bound
            if isinstance(value, str):
                limit = MAX_ID_CHARS if key in ("tool", "tool_call_id", "check_id", "error_code") else MAX_MESSAGE_CHARS
                fields[key] = shorten_paths(REDACTOR(value))[:limit]
        with self._lock:
            seq = len(self.events) + 1
            event = JobEvent(job_id=self.job_id, seq=seq, at=now_iso(), kind=kind, **fields).dump()
            self.events.append(event)
            self._send(event)
        return event

    def after(self, after_seq: int) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events[max(0, after_seq):])

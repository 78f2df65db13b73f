"""Bench-only method ``$/spotpatch/benchEvents {count}`` (tests/bench/README.md).

``serve()`` registers it only when the environment variable ``SPOTPATCH_BENCH=1`` is set; otherwise the
method does not exist (``-32601``). It creates a synthetic :class:`JobEventLog` and emits ``count``
activity/status events through the real notification path (``JobEventLog.emit`` → ``send_event`` →
``RpcServer.notify`` → ``FrameWriter`` → pipe), then answers ``{jobId, count, lastSeq}``: the reply is
queued after the last event, so a client that has the reply has every event.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import anyio.lowlevel
from pydantic import BaseModel, ConfigDict, Field

from spotpatch_agent.engine.events import JobEventLog

METHOD = "$/spotpatch/benchEvents"
#: Every event stays in the synthetic log's memory until the request ends: bound the count.
MAX_COUNT = 200_000
#: Events emitted between two checkpoints (other requests and cancellation get a turn).
_BATCH = 256


class BenchEventsParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    count: int = Field(ge=0, le=MAX_COUNT)


def bench_handlers(send_event: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """The bench methods for ``RpcServer(handlers=…)``, emitting through ``send_event``."""

    async def bench_events(params: BenchEventsParams) -> dict[str, Any]:
        events = JobEventLog("job_bench" + secrets.token_hex(6), send_event)
        for i in range(params.count):
            if i % _BATCH == 0 and i:
                await anyio.lowlevel.checkpoint()
            if i % 50 == 0:
                events.emit("status", status="running", message=f"bench step {i // 50}")
            elif i % 2:
                events.emit("activity", phase="started", tool="read_file", tool_call_id=f"call_{i}", turn=1 + i // 50)
            else:
                events.emit("activity", phase="finished", tool="read_file", tool_call_id=f"call_{i - 1}",
                            turn=1 + i // 50, path="src/App.tsx", ok=True, duration_ms=1)
        return {"jobId": events.job_id, "count": params.count, "lastSeq": events.last_seq}

    return {METHOD: (BenchEventsParams, bench_events)}

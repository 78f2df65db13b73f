"""A client that stops reading stdout must not stall the engine (issue 3; docs/design.md §3 "job/event").

The client spawns ``serve`` on raw pipes (:class:`RawEngine`: no eager reader thread) and, once its job
is created, does not read stdout for several seconds while the job emits ~100 large events (~330 KB of
frames: 5× the 64 KiB pipe) and while the client keeps sending requests. Observable proof that the
engine kept working behind a full pipe (unread bytes wait in it and an engine thread sleeps in a pipe write,
``/proc/<pid>/task/*/wchan``):

- the job went on: the provider got every remaining model turn and the job's worktree was removed (the
  job ended) while the pipe stayed full;
- the event loop stayed responsive: a ``provider/probe`` sent while the pipe was full reached the
  (separate) probe provider within ``SERVED_WITHIN`` and completed its round trip;
- the engine kept reading stdin: > 64 KiB of requests were written without blocking the client.

When the client reads again it gets every event exactly once, ``seq`` 1..n in order, all status events,
the same list ``job/events`` replays, and exactly one reply per request. (This engine never coalesces
events; if it ever does, status events must still all arrive, which the status list checks.)
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from spotpatch_agent.demo.script import demo_turns
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.protocol_robustness._support import RawEngine
from tests.support.annotations import demo_annotation
from tests.support.serve import KEY_ENV, PROBE_TURNS, config_for, job_worktrees

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux pipes and /proc")

FILLER_TURNS = 30
NOT_READING_FOR = 3.0
#: Seconds within which a request sent behind the full pipe reaches its provider. Broken (the loop stuck in a
#: write to the full pipe), it never does while the client does not read. Measured 0.5 s on a 2-core machine
#: at a load average of 11, where the old 1 s limit had little room left.
SERVED_WITHIN = 3.0


def filler_turn(i: int) -> dict:
    """A turn with a ~11.7 KB message (3-byte UTF-8 characters) and one read-only call, different in each turn
    (an identical read in a later turn would be answered without running and, repeated, end the job)."""
    text = f"turn {i}: " + ("価格テキスト確認中" * 433)[:3890]
    return {"text": text, "textChunks": 2,
            "toolCalls": [{"id": f"read-{i}", "name": "list_files", "arguments": {"glob": "**", "maxResults": 1 + i}}]}


def wait_until(predicate, timeout: float, what: str) -> float:
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for: {what}")
        time.sleep(0.005)
    return time.monotonic() - started


def test_engine_keeps_working_while_the_client_does_not_read(project: Path, canary: str) -> None:
    turns = [filler_turn(i) for i in range(FILLER_TURNS)] + demo_turns()
    with (ScriptedProviderServer(turns, chunk_delay=0.003) as job_server,
          ScriptedProviderServer(PROBE_TURNS, models=("probe-model",)) as probe_server):
        config = config_for(job_server)
        config["providers"].append({"id": "prober", "displayName": "Prober", "api": "chat",
                                    "baseUrl": probe_server.base_url, "apiKeyEnv": KEY_ENV,
                                    "models": [{"id": "p1", "model": "probe-model", "displayName": "Probe"}]})
        config["limits"] = {"maxTurns": 64}
        eng = RawEngine(env={KEY_ENV: canary})
        try:
            eng.call("initialize", {"protocolVersion": "0.1", "processId": None, "clientInfo": {"name": "slow"},
                                    "projectRoot": str(project), "config": config})
            job_id = eng.call("job/create", {"annotation": demo_annotation(), "modelProfileId": "m1"})["jobId"]

            # ---- from here the client does not read stdout
            stopped_reading = time.monotonic()
            wait_until(eng.stdout_is_blocked, 15, "the engine's stdout pipe to fill up")
            turns_when_full = len(job_server.requests)
            assert turns_when_full < len(turns) - 10, "the pipe filled too late to prove anything"

            probe_id = eng.request("provider/probe", {"modelProfileId": "p1"})
            probe_latency = wait_until(lambda: len(probe_server.requests) >= 1, 10, "the probe to reach its provider")
            assert probe_latency < SERVED_WITHIN, (
                f"a request took {probe_latency:.2f} s to be served behind a full stdout")

            get_ids: list[str] = []

            def flood() -> None:  # > 64 KiB of requests: blocks forever if the engine stopped reading stdin
                for _ in range(800):
                    get_ids.append(eng.request("job/get", {"jobId": job_id}))

            sent_before = eng.bytes_sent
            writer = threading.Thread(target=flood, daemon=True)
            writer.start()
            writer.join(10)
            assert not writer.is_alive(), "writing requests blocked: the engine stopped reading stdin"
            assert eng.bytes_sent - sent_before > 64 * 1024

            wait_until(lambda: len(job_server.requests) == len(turns) and not job_worktrees(project),
                       30, "the job to run every turn and remove its worktree")
            job_done = time.monotonic() - stopped_reading
            wait_until(lambda: len(probe_server.requests) == 2, 5, "the probe's round trip")
            remaining = NOT_READING_FOR - (time.monotonic() - stopped_reading)
            if remaining > 0:
                time.sleep(remaining)  # the scenario: several seconds without reading
            assert eng.stdout_is_blocked(), "the engine's stdout is not blocked: the test created no backpressure"
            blocked_for = time.monotonic() - stopped_reading
            print(f"\npipe full after {turns_when_full} of {len(turns)} turns; probe served in "
                  f"{probe_latency * 1000:.0f} ms; job finished {job_done:.2f} s "
                  f"after the client stopped reading; not read for {blocked_for:.1f} s")

            # ---- the client reads again
            def have_everything() -> bool:
                statuses = [e.get("status") for e in eng.events(job_id) if e["kind"] == "status"]
                return ("awaiting-review" in statuses or "failed" in statuses) and all(
                    eng.replies(rid) for rid in [probe_id, *get_ids[-1:]])

            eng.read_until(have_everything, 30)
            events = eng.events(job_id)
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1)), (
                "an event was lost, repeated or reordered")
            assert [e["status"] for e in events if e["kind"] == "status"] == [
                "preparing", "running", "validating", "awaiting-review"]
            assert sum(1 for e in events if e["kind"] == "message") >= FILLER_TURNS
            assert len(events) > 3 * FILLER_TURNS
            for rid in [probe_id, *get_ids]:
                assert len(eng.replies(rid)) == 1, rid
            assert eng.replies(probe_id)[0]["result"]["ok"] is True
            seqs = [eng.replies(rid)[0]["result"]["lastSeq"] for rid in get_ids]
            assert seqs == sorted(seqs), "job/get replies came out of order"
            replay = eng.call("job/events", {"jobId": job_id, "afterSeq": 0})
            assert replay["events"] == events and replay["lastSeq"] == len(events)
            assert eng.faults == []
        finally:
            eng.stop()
    assert eng.proc.returncode == 0

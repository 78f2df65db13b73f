"""The engine's side of "Send to my agent" (docs/mcp.md): the jobs waiting for an agent and the ``agent/*`` requests
of the channel (handoff/channel.py).

A job created with ``agent: true`` runs like any job — worktree, the six tools, path policy, limits, changeset
validation, checks, review — with a :class:`~spotpatch_agent.provider.agent.AgentTurns` as its adapter: it waits
for an agent to take it (``agent/take``), then each ``agent/call`` is one turn and ``agent/submit`` the last.
One agent connection holds a job at a time: another gets ``JOB_CONFLICT``. A connection that closes releases its
jobs (they keep running, their worktree intact, for the same or another agent to take, or for the page to
cancel); nothing is lost. A job cancelled on the page answers the agent's next or waiting call with
``INVALID_STATE`` and why.

Light to import (the service imports it before ``initialize``'s reply): the engine's job and adapter modules
are imported where first needed.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from spotpatch_agent import __version__
from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.handoff import channel
from spotpatch_agent.protocol.errors import RETRYABLE, ErrorCode
from spotpatch_agent.rpc.framing import Frame, FrameDecoder, encode_frame

if TYPE_CHECKING:
    from spotpatch_agent.engine.job import Job
    from spotpatch_agent.engine.service import EngineService
    from spotpatch_agent.provider.agent import AgentTurns

log = logging.getLogger("spotpatch.handoff")

#: Longest ``agent/take`` waits for a job's worktree and first message, and ``agent/submit`` for its checks.
TAKE_WAIT_SEC = 60.0
SUBMIT_WAIT_SEC = 600.0
#: A job id this engine does not know: most often the dev server restarted (its jobs end with it).
_GONE = ("No such job in this engine session: if the dev server stopped or restarted, the job ended with it and "
         "nothing was applied; ask the user to send it again.")
#: Agent connections served at once (a client per MCP session; more is a flood, closed at once), and the pause
#: after a failed accept (out of file descriptors).
MAX_CONNECTIONS = 64
ACCEPT_BACKOFF_SEC = 0.5
#: Statuses in which a job still takes an agent's calls.
_OPEN = frozenset({"preparing", "running"})
_CLIENT_NAME = re.compile(r"[^A-Za-z0-9._ -]+")


def client_name(raw: object) -> str:
    """An MCP client's name as the ledger and the page show it: letters, digits, ``._ -``, at most 64."""
    name = _CLIENT_NAME.sub("", raw if isinstance(raw, str) else "").strip()[:64]
    return name or "agent"


@dataclass
class _Handoff:
    job: Job
    turns: AgentTurns
    holder: int | None  # the connection that took it


class AgentHub:
    """The engine's listener for agents, over ``service``'s jobs for agents (module docstring)."""

    def __init__(self, service: EngineService) -> None:
        self._service = service
        self._holders: dict[str, int] = {}  # job id → the connection that took it
        self._clients: dict[int, str] = {}  # connection id → the client's name (after agent/hello)
        self._conn_ids = itertools.count(1)
        self._open_connections = 0
        self._root: Path | None = None
        self._configured = anyio.Event()
        #: Why this engine offers no agent channel (None while it does, or before it tried).
        self.unavailable: str | None = None
        self.path: Path | None = None

    def attached(self) -> list[str]:
        """The names of the agents connected now (sorted, each once)."""
        return sorted(set(self._clients.values()))

    def info(self) -> dict[str, Any]:
        """``session/get``'s ``agents`` (protocol ``AgentChannelInfo``)."""
        listening = self.path is not None and self.unavailable is None
        return {"available": listening, "clients": self.attached() if listening else [],
                "reason": None if listening else (self.unavailable or "the agent channel is starting")}

    def _handoff(self, job_id: object) -> _Handoff | None:
        found = self._service.agent_jobs.get(job_id) if isinstance(job_id, str) else None
        return None if found is None else _Handoff(found[0], found[1], self._holders.get(found[0].job_id))

    def configure(self, root: Path) -> None:
        """The project is known: :meth:`serve` may listen (once)."""
        if self._root is None:
            self._root = root
            self._configured.set()

    async def serve(self) -> None:
        """Listen for agents once the project is configured, until cancelled. Never raises: an unavailable channel
        (or any failure of the listener) is logged and kept in :attr:`unavailable`; the engine serves the page and
        its jobs regardless (a failure here once ended the service's task group, and with it every job)."""
        try:
            await self._serve()
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # noqa: BLE001 - the agent channel is optional; the engine is not
            self.unavailable = "the agent channel stopped (see the engine log)"
            log.error("agent channel stopped", exc_info=exc)

    async def _serve(self) -> None:
        await self._configured.wait()
        assert self._root is not None
        if not channel.supported():
            self.unavailable = "agent channel not supported on this system yet"
            return
        try:
            # The service located the repository while configuring (one git call less at start-up).
            toplevel = self._service.toplevel
            if toplevel is None:
                raise channel.ChannelUnavailable("the project is not in a git repository (SpotPatch jobs need one).")
            self.path = channel.socket_path(Path(toplevel).resolve())
            listener = await channel.listen(self.path)
        except channel.ChannelUnavailable as exc:
            self.unavailable = str(exc)
            log.warning("no agent channel: %s", exc)
            return
        inode = os.lstat(self.path).st_ino
        try:
            async with listener, anyio.create_task_group() as tg:
                while True:
                    try:
                        stream = await listener.accept()
                    except (OSError, anyio.BrokenResourceError) as exc:
                        # Out of file descriptors (EMFILE) or another passing accept failure: wait, go on.
                        log.warning("agent channel: accept failed (%s); retrying", type(exc).__name__)
                        await anyio.sleep(ACCEPT_BACKOFF_SEC)
                        continue
                    if self._open_connections >= MAX_CONNECTIONS:
                        log.warning("agent channel: more than %d connections; closing a new one", MAX_CONNECTIONS)
                        await stream.aclose()
                        continue
                    tg.start_soon(self._connection, stream)
        finally:
            self.unavailable = self.unavailable or "the agent channel stopped"
            try:  # ours only: a later engine may have replaced a socket it found dead
                if os.lstat(self.path).st_ino == inode:
                    self.path.unlink()
            except OSError:
                pass

    # ------------------------------------------------------------------ one connection

    async def _connection(self, stream: anyio.abc.SocketStream) -> None:
        self._open_connections += 1
        try:
            await self._serve_connection(stream)
        except Exception:  # noqa: BLE001 - one connection's failure never reaches the listener
            log.exception("agent channel: a connection failed")
            with anyio.CancelScope(shield=True):
                await stream.aclose()
        finally:
            self._open_connections -= 1

    async def _serve_connection(self, stream: anyio.abc.SocketStream) -> None:
        try:
            uid = channel.peer_uid(stream)
        except OSError:
            uid = -1
        if uid is not None and uid != os.getuid():
            log.warning("agent channel: refused a connection from another user")
            await stream.aclose()
            return
        conn = next(self._conn_ids)
        decoder = FrameDecoder(max_body_bytes=channel.MAX_CHANNEL_FRAME)
        lock = anyio.Lock()

        async def reply(message: dict[str, Any]) -> None:
            async with lock:
                await stream.send(encode_frame(message))

        try:
            async with anyio.create_task_group() as tg:
                try:
                    async for chunk in stream:
                        for item in decoder.feed(chunk):
                            if isinstance(item, Frame) and isinstance(item.value, dict):
                                tg.start_soon(self._request, conn, item.value, reply)
                            else:
                                await reply({"jsonrpc": "2.0", "id": None,
                                             "error": {"code": -32700, "message": "Malformed frame."}})
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                    pass
                tg.cancel_scope.cancel()  # the agent is gone: its waiting requests end; the jobs go on
        finally:
            self._clients.pop(conn, None)
            for job_id, holder in list(self._holders.items()):
                if holder == conn:  # released: another agent may take it, or the page cancels it
                    del self._holders[job_id]
            with anyio.CancelScope(shield=True):
                await stream.aclose()

    async def _request(self, conn: int, message: dict[str, Any],
                       reply: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        rid = message.get("id")
        if not (rid is None or isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))):
            # JSON-RPC ids are strings or integers: refused, not run (its answer could not be matched to it).
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await reply({"jsonrpc": "2.0", "id": None,
                             "error": {"code": -32600, "message": "Invalid request: id must be a string or integer."}})
            return
        method, params = message.get("method"), message.get("params")
        handlers: dict[str, Callable[[int, dict[str, Any]], Awaitable[dict[str, Any]]]] = {
            "agent/hello": self._hello, "agent/pending": self._pending, "agent/take": self._take,
            "agent/call": self._call, "agent/submit": self._submit, "agent/status": self._status,
        }
        try:
            handler = handlers.get(method) if isinstance(method, str) else None
            if handler is None:
                raise SpotPatchError(ErrorCode.INVALID_REQUEST, "Unknown method.")
            if not isinstance(params, dict):
                raise SpotPatchError(ErrorCode.INVALID_REQUEST, "params must be an object.")
            if method != "agent/hello" and conn not in self._clients:
                raise SpotPatchError(ErrorCode.INVALID_REQUEST, "Say agent/hello first.")
            answer: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "result": await handler(conn, params)}
        except SpotPatchError as exc:
            answer = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": exc.message, "data": {
                "code": exc.code.value, "message": exc.message, "retryable": RETRYABLE.get(exc.code, False)}}}
        except Exception:  # noqa: BLE001 - an engine bug answers this request, the channel goes on
            log.exception("agent channel: %s failed", str(method)[:64])
            answer = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": "Internal error."}}
        try:
            await reply(answer)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass

    # ------------------------------------------------------------------ the requests

    async def _hello(self, conn: int, params: dict[str, Any]) -> dict[str, Any]:
        self._clients[conn] = client_name(params.get("client"))
        return {"engine": "spotpatch-agent", "version": __version__,
                "project": self._root.name if self._root is not None else None}

    def _open(self) -> list[_Handoff]:
        found = (self._handoff(job_id) for job_id in list(self._service.agent_jobs))
        return [h for h in found if h is not None and h.job.status in _OPEN and h.turns.ended is None]

    async def _pending(self, conn: int, params: dict[str, Any]) -> dict[str, Any]:
        return {"jobs": [{
            "jobId": h.job.job_id, "status": h.job.status, "createdAt": h.job.created_at,
            "takenBy": None if h.holder is None else ("you" if h.holder == conn else h.turns.client or "agent"),
            "targets": [_target(t) for t in h.job.params.annotation.targets],
        } for h in self._open()]}

    def _held(self, conn: int, params: dict[str, Any]) -> _Handoff:
        handoff = self._handoff(_job_id(params))
        if handoff is None:
            raise SpotPatchError(ErrorCode.JOB_NOT_FOUND, _GONE)
        if handoff.turns.ended is not None or handoff.job.status not in _OPEN:
            raise SpotPatchError(ErrorCode.INVALID_STATE, _ended_message(handoff))
        if handoff.holder != conn:
            raise SpotPatchError(ErrorCode.JOB_CONFLICT, "This job is not yours: take it first (spotpatch_pending)."
                                 if handoff.holder is None else "Another agent has taken this job.")
        return handoff

    async def _take(self, conn: int, params: dict[str, Any]) -> dict[str, Any]:
        job_id = _job_id(params, required=False)
        candidates = self._open()
        if isinstance(job_id, str):
            candidates = [h for h in candidates if h.job.job_id == job_id]
            if not candidates:
                known = self._handoff(job_id)
                raise (SpotPatchError(ErrorCode.INVALID_STATE, _ended_message(known)) if known is not None else
                       SpotPatchError(ErrorCode.JOB_NOT_FOUND, _GONE))
        free = [h for h in candidates if h.holder in (None, conn)]
        if not free:
            raise SpotPatchError(ErrorCode.JOB_CONFLICT if candidates else ErrorCode.JOB_NOT_FOUND,
                                 "Another agent has taken this job." if candidates else
                                 "Nothing is waiting: pick elements on the page and press Send to my agent.")
        handoff = free[0]
        job_id = handoff.job.job_id
        self._holders[job_id] = conn  # before any await: a second agent's take sees it taken
        try:
            with anyio.fail_after(TAKE_WAIT_SEC):
                await handoff.turns.wait_started()
            if handoff.turns.client is not None:  # taken over: the repeat guards start afresh for this agent
                handoff.job.stats.forget_calls()
            handoff.turns.take(self._clients.get(conn, "agent"))
        except BaseException as exc:
            if self._holders.get(job_id) == conn:
                del self._holders[job_id]
            if isinstance(exc, TimeoutError):
                raise SpotPatchError(ErrorCode.INVALID_STATE, f"The job is still starting (its isolated copy and "
                                     f"first message were not ready within {TAKE_WAIT_SEC:g} s); call "
                                     "spotpatch_pending again.") from None
            raise
        turns = handoff.turns
        if turns.ended is not None:
            raise SpotPatchError(ErrorCode.INVALID_STATE, _ended_message(handoff))
        task = turns.task or ""
        if handoff.job.stats.tool_calls:  # taken over: the first message's excerpts may be stale
            task = (f"NOTE: another agent worked on this job before you ({handoff.job.stats.tool_calls} tool "
                    "call(s)); the files may have changed since this message was written: read them again "
                    "before editing.\n\n" + task)
        return {"jobId": handoff.job.job_id, "task": task, "system": turns.system,
                "tools": [{"name": t.name, "description": t.description, "inputSchema": t.parameters}
                          for t in turns.tools]}

    async def _call(self, conn: int, params: dict[str, Any]) -> dict[str, Any]:
        from spotpatch_agent.provider.agent import AgentJobEnded

        handoff = self._held(conn, params)
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise SpotPatchError(ErrorCode.INVALID_REQUEST, "agent/call needs a tool name and an arguments object.")
        try:
            result = await handoff.turns.call_tool(name, json.dumps(arguments, ensure_ascii=False))
        except AgentJobEnded:
            raise SpotPatchError(ErrorCode.INVALID_STATE, _ended_message(handoff)) from None
        return {"output": result.output, "isError": result.failed}

    async def _submit(self, conn: int, params: dict[str, Any]) -> dict[str, Any]:
        from spotpatch_agent.context.quote import escape_bidi
        from spotpatch_agent.provider.agent import MAX_SUMMARY_CHARS, AgentJobEnded

        handoff = self._held(conn, params)
        summary = params.get("summary")
        if not isinstance(summary, str):
            raise SpotPatchError(ErrorCode.INVALID_REQUEST, "summary must be one string (a line per target in it).")
        if len(summary) > MAX_SUMMARY_CHARS:
            raise SpotPatchError(ErrorCode.INVALID_REQUEST, f"The summary is longer than {MAX_SUMMARY_CHARS} "
                                 "characters: say what changed per target in a line each.")
        try:
            # Shown on the page as the job's summary: bidi controls appear as <U+202E>…, never reorder the text.
            await handoff.turns.submit(escape_bidi(summary))
        except ValueError as exc:
            raise SpotPatchError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        except AgentJobEnded:
            raise SpotPatchError(ErrorCode.INVALID_STATE, _ended_message(handoff)) from None
        with anyio.move_on_after(SUBMIT_WAIT_SEC):  # validation and checks; past this, spotpatch_status tells
            await handoff.job.done.wait()
        return _status(handoff.job)

    async def _status(self, conn: int, params: dict[str, Any]) -> dict[str, Any]:
        handoff = self._handoff(_job_id(params))
        if handoff is None:
            raise SpotPatchError(ErrorCode.JOB_NOT_FOUND, _GONE)
        return _status(handoff.job)


def _job_id(params: dict[str, Any], *, required: bool = True) -> str | None:
    """``params.jobId``: a string, or (not ``required``) absent; anything else is refused, never taken as absent."""
    job_id = params.get("jobId")
    if job_id is None and not required:
        return None
    if not isinstance(job_id, str) or not 1 <= len(job_id) <= 64:
        raise SpotPatchError(ErrorCode.INVALID_REQUEST, "jobId must be a job id (a string).")
    return job_id


def _target(target: Any) -> dict[str, Any]:
    """A target as ``spotpatch_pending``'s data: what the page sent about it (the job's first message carries the
    same with the locations checked against the files). A location that is not a project path is left out."""
    from spotpatch_agent.policy.paths import PathDenied, normalize_rel_path

    def where(file: str, line: int) -> str | None:
        try:
            return f"{normalize_rel_path(file)}:{line}"
        except PathDenied:
            return None

    out: dict[str, Any] = {"index": target.index, "instruction": target.instruction,
                           "source": None if target.source is None else where(target.source.file, target.source.line)}
    if target.element is not None:
        out["element"] = {"tagName": target.element.tag_name, "text": target.element.text,
                          "attributes": dict(target.element.attributes)}
    chain = [{"component": site.component, "at": where(site.file, site.line)} for site in target.usage_chain]
    if chain:
        out["usageChain"] = chain
    if target.area is not None:
        out["area"] = True
    return out


#: What each status means for the agent, in one line (``spotpatch_status``).
_MEANING = {
    "preparing": "The job is starting.",
    "running": "The job is open: read and edit through the SpotPatch tools, run its checks with run_check, then "
               "spotpatch_submit.",
    "validating": "Your changes are being validated and the project's checks run.",
    "awaiting-review": "Ready for review on the page: the user decides whether to Apply.",
    "applying": "The user is applying the change.",
    "applied": "The user applied the change to their working tree.",
    "reverting": "The user is reverting the change.",
    "reverted": "The user reverted the change: their files are as before.",
    "failed": "The job failed; nothing was applied. Tell the user why (the error below); they can send it again.",
    "cancelled": "The job was cancelled; nothing was applied.",
    "closed": "The job was closed.",
}


#: Longest check output an answer carries (the events' copy, already cleaned, bounded and redacted).
CHECK_OUTPUT_CHARS = 2000


def _status(job: Job) -> dict[str, Any]:
    snap = job.snapshot()
    checks = [{"name": e.get("name"), "status": e.get("status"), "required": e.get("required", True),
               "output": (e.get("output") or "")[-CHECK_OUTPUT_CHARS:]}
              for e in job.events.events if e.get("kind") == "check"]
    return {"jobId": snap.job_id, "status": snap.status, "meaning": _MEANING.get(snap.status, ""),
            "message": snap.message, "error": None if snap.error is None else snap.error.model_dump(),
            "files": [{"path": f.path, "added": f.added, "removed": f.removed, "status": f.status}
                      for f in snap.files], "checks": checks}


def _ended_message(handoff: _Handoff) -> str:
    status = handoff.job.status
    if status == "cancelled":
        return "The job was cancelled on the page; nothing you do now reaches it. Stop working on it."
    if status in _OPEN:
        return "The job no longer takes calls: " + (handoff.turns.ended or "it ended.")
    snap = handoff.job.snapshot()
    why = f" {snap.error.code.value}: {snap.error.message}" if snap.error is not None else ""
    return f"The job is {status} and takes no more calls. {_MEANING.get(status, '')}{why}"

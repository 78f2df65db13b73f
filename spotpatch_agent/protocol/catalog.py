"""The method catalog: every method and notification of docs/design.md §3 as this engine implements it.

Each :class:`MethodSpec` names the wire method, who sends it, whether it is a request or a notification,
the pydantic models of its params and result, a one-line summary and the application error codes
(``-32000``, ``data.code``) it can answer with. The JSON Schema (``spotpatch-agent schema``), the generated
method reference in ``docs/protocol.md`` and the handler table of ``serve()`` (:func:`bind_handlers`) are
all derived from this one table, so they cannot drift apart.

JSON-RPC faults (-32700, -32600, -32601, -32602, -32603, -32002, -32800) can answer any request and are
not listed per method.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import Any, Literal

from spotpatch_agent.protocol.errors import ErrorCode as E

Direction = Literal["client-to-engine", "engine-to-client"]
Kind = Literal["request", "notification"]
CLIENT: Direction = "client-to-engine"
ENGINE: Direction = "engine-to-client"


@dataclass(frozen=True)
class MethodSpec:
    """One wire method. ``params``/``result`` are pydantic models (``job/event``: the tagged union type);
    ``params`` None: the message has no params; ``result`` None: no result (a notification) or ``null``
    (``shutdown``). ``served_by``: ``"handlers"`` (``serve()``'s handler table), ``"rpc"`` (answered or
    handled by ``rpc/server.py`` itself) or ``"engine"`` (sent by the engine). ``emitted``: False for a
    declared message the engine does not send yet.

    The table names the models (``params_model``/``result_model``, names in
    :mod:`spotpatch_agent.protocol.models`); ``params``/``result`` load them on first use, so binding the
    handlers loads the params models only (cold start, issue 17)."""

    method: str
    direction: Direction
    kind: Kind
    params_model: str | None
    result_model: str | None
    summary: str
    errors: tuple[E, ...] = ()
    served_by: Literal["handlers", "rpc", "engine"] = "handlers"
    emitted: bool = True

    @property
    def params(self) -> Any:
        return _model(self.params_model)

    @property
    def result(self) -> Any:
        return _model(self.result_model)


def _model(name: str | None) -> Any:
    return None if name is None else getattr(import_module("spotpatch_agent.protocol.models"), name)


_JOB_STATE = (E.JOB_NOT_FOUND, E.INVALID_STATE)

CATALOG: tuple[MethodSpec, ...] = (
    # ------------------------------------------------------------ lifecycle
    MethodSpec("initialize", CLIENT, "request", "InitializeParams", "InitializeResult",
               "Start the session: protocol version, project root and the trusted configuration.",
               (E.INVALID_REQUEST, E.INTERNAL)),
    MethodSpec("initialized", CLIENT, "notification", "EmptyParams", None,
               "The client received the initialize result (accepted, not required).", served_by="rpc"),
    MethodSpec("shutdown", CLIENT, "request", "EmptyParams", None,
               "Cancel every job, remove their worktrees and answer null; only exit is accepted afterwards.",
               served_by="rpc"),
    MethodSpec("exit", CLIENT, "notification", None, None,
               "Stop the engine: exit code 0 after shutdown, else 1.", served_by="rpc"),
    MethodSpec("$/cancelRequest", CLIENT, "notification", "CancelRequestParams", None,
               "Cancel an in-flight request (it answers -32800) or the job an answered job/create started.",
               served_by="rpc"),
    # ------------------------------------------------------------ project and providers
    MethodSpec("health/get", CLIENT, "request", "EmptyParams", "RepoHealth",
               "Whether the repository can host a job now: clean, consent-required or blocked (docs/design.md §8).",
               (E.INVALID_STATE, E.INTERNAL)),
    MethodSpec("session/get", CLIENT, "request", "EmptyParams", "SessionGetResult",
               "What the page needs to draw itself: AI on/off, the offered apply modes, the per-job target and "
               "instruction limits, and the Apply/Revert repairs of this engine start.",
               (E.INVALID_STATE,)),
    MethodSpec("prompt/render", CLIENT, "request", "PromptRenderParams", "PromptRenderResult",
               "The copyable v1 prompt for an annotation; works with AI disabled."),
    MethodSpec("provider/list", CLIENT, "request", "EmptyParams", "ProviderListResult",
               "Configured provider profiles with ids and display names only (never URLs or keys)."),
    MethodSpec("provider/probe", CLIENT, "request", "ProviderProbeParams", "ProbeResult",
               "Probe a model profile for tool calling (docs/design.md §11); provider failures are a result, "
               "not an error.",
               (E.INVALID_REQUEST, E.AI_DISABLED)),
    # ------------------------------------------------------------ jobs
    MethodSpec("job/create", CLIENT, "request", "JobCreateParams", "JobSnapshot",
               "Freeze an annotation into a job and start it; answers the snapshot in status preparing.",
               (E.INVALID_REQUEST, E.AI_DISABLED, E.CONSENT_REQUIRED, E.REPO_BLOCKED, E.JOB_CONFLICT,
                E.INVALID_STATE, E.PROVIDER_UNAVAILABLE, E.INTERNAL)),
    MethodSpec("job/get", CLIENT, "request", "JobIdParams", "JobSnapshot",
               "The job's current snapshot.", (E.JOB_NOT_FOUND,)),
    MethodSpec("job/list", CLIENT, "request", "EmptyParams", "JobListResult",
               "Every job of this engine session, oldest first."),
    MethodSpec("job/events", CLIENT, "request", "JobEventsParams", "JobEventsResult",
               "Replay the job's events after afterSeq, in order (for clients that reconnect).",
               (E.JOB_NOT_FOUND,)),
    MethodSpec("job/diff", CLIENT, "request", "JobIdParams", "DiffResult",
               "The job's unified diff and per-file counts (empty until awaiting-review).", _JOB_STATE),
    MethodSpec("job/audit", CLIENT, "request", "JobIdParams", "JobAuditResult",
               "The job's audit ledger: the derived summary and the redacted records (docs/design.md §13).",
               (E.JOB_NOT_FOUND,)),
    MethodSpec("job/cancel", CLIENT, "request", "JobIdParams", "JobSnapshot",
               "Cancel a running job, or discard one awaiting review; nothing is applied.", _JOB_STATE),
    MethodSpec("job/apply", CLIENT, "request", "JobIdParams", "JobSnapshot",
               "Apply the reviewed diff to the working tree (never the index).",
               (*_JOB_STATE, E.JOB_CONFLICT, E.REPO_BLOCKED, E.APPLY_CONFLICT, E.CHANGESET_REJECTED, E.INTERNAL)),
    MethodSpec("job/revert", CLIENT, "request", "JobIdParams", "JobSnapshot",
               "Restore the touched files of an applied job byte for byte.",
               (*_JOB_STATE, E.JOB_CONFLICT, E.REPO_BLOCKED, E.REVERT_CONFLICT, E.INTERNAL)),
    MethodSpec("job/close", CLIENT, "request", "JobIdParams", "JobSnapshot",
               "Close a finished job and discard its diff and revert record.", _JOB_STATE),
    MethodSpec("job/suggest", CLIENT, "request", "JobIdParams", "SuggestionResult",
               "The read-only suggestion lane (docs/design.md §14): for a job that failed because its model cannot "
               "call tools, ask the model once, without tools, for a draft over bounded excerpts; it changes nothing. "
               "Breakers and provider failures are a result (outcome partial or failed), not an error.",
               (E.JOB_NOT_FOUND, E.INVALID_REQUEST, E.INVALID_STATE, E.AI_DISABLED)),
    # ------------------------------------------------------------ engine → client
    MethodSpec("job/event", ENGINE, "notification", "JobEventNotification", None,
               "One job event, tagged by kind; seq starts at 1 and increases by 1 per job.", served_by="engine"),
    MethodSpec("$/logTrace", ENGINE, "notification", "LogTraceParams", None,
               "Sanitized diagnostics for the client's log (optional).", served_by="engine",
               emitted=False),
)

METHODS: Mapping[str, MethodSpec] = {spec.method: spec for spec in CATALOG}


def served_requests() -> frozenset[str]:
    """The client → engine requests ``serve()``'s handler table must serve (``shutdown`` is rpc's own)."""
    return frozenset(s.method for s in CATALOG if s.kind == "request" and s.served_by == "handlers")


def bind_handlers(functions: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Pair each handler with its method's params model: ``{method: (params_model, fn)}`` for ``RpcServer``.

    Raises ``ValueError`` unless ``functions`` has exactly the methods of :func:`served_requests`."""
    expected = served_requests()
    missing, extra = sorted(expected - functions.keys()), sorted(functions.keys() - expected)
    if missing or extra:
        raise ValueError(f"handler table differs from the method catalog: missing {missing}, not in catalog {extra}")
    return {method: (METHODS[method].params, fn) for method, fn in functions.items()}

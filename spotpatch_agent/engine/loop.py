"""The model/tool loop of one job (DESIGN.md §5; spec "Agent 循环").

Per turn: send the conversation, the allowed tools and the remaining budget → collect the provider's
events → assign the internal ``turn`` (1, 2, …) → reject same-turn tool-call id conflicts, drop exact
duplicate events → execute (read-only calls of one run concurrently, writes serially in event order) →
answer every call with exactly one result under the provider's original id → next turn, until a final
message, cancellation, failure or a limit. The first turn must call a tool
(``MODEL_TOOL_CALL_UNSUPPORTED`` otherwise). Model text never causes a side effect.

Argument correction rule (DESIGN.md §6 "the model may correct it once with a new call id"): a tool call
answered ``TOOL_ARGUMENTS_INVALID`` gives that tool name one strike. If a call of the same name in a *later*
turn is again ``TOOL_ARGUMENTS_INVALID`` with no successful (``ok``) call of that name in between, the job
fails terminally with ``LIMIT_EXCEEDED`` (the correction budget is a limit; ``INVALID_REQUEST`` is kept for
client requests). Several invalid calls of one name in the same turn count as one strike: the model had not
seen the guidance yet. Unknown tool names and unparseable arguments count the same way, per name.
``TOOL_PATH_DENIED`` and ``PATCH_REJECTED`` neither strike nor clear; they stay retryable within the turn
and call limits.

``run_check`` is a bounded process that may write: it is not read-only, so it runs alone in event order,
under the check timeout (not ``toolTimeoutSec``).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

import anyio

from spotpatch_agent.engine.events import JobEventLog
from spotpatch_agent.errors import JobFailure
from spotpatch_agent.policy.redact import REDACTOR
from spotpatch_agent.protocol.errors import ErrorCode, ToolErrorCode
from spotpatch_agent.provider.base import (
    AssistantTurn,
    ConversationItem,
    ProviderAdapter,
    TextDelta,
    ToolCallEvent,
    ToolCallRecord,
    ToolResultMessage,
    ToolSpec,
    TurnEnd,
    TurnRequest,
    UserMessage,
)
from spotpatch_agent.tools.executor import ToolExecutor, ToolResult

READ_ONLY_TOOLS = frozenset({"list_files", "search_text", "read_file"})
MAX_TURN_TEXT = 16 * 1024
#: Extra seconds the loop's deadline of a ``run_check`` call allows beyond the longest check timeout.
_CHECK_GRACE_SEC = 20
#: The name a call with an unusable name (empty, or not ``[A-Za-z0-9_-]{1,64}``) is echoed under in the next
#: request: it was never run and its result says why, but OpenAI answers 400 to an empty or malformed name.
INVALID_CALL_ECHO_NAME = "invalid_tool_call"
_ECHOABLE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

_INVALID_CALL_GUIDANCE = (
    "This call was not run: {reason}. Call the tool again, with a new call id, naming one of the offered "
    "tools and passing one complete JSON object that matches its schema exactly."
)


@dataclass
class LoopBudget:
    max_turns: int
    max_tool_calls: int
    tool_timeout_sec: float
    #: Longest check timeout of the job (``run_check`` calls run under it, not ``tool_timeout_sec``).
    check_timeout_sec: float = 300


@dataclass
class LoopStats:
    turns: int = 0
    tool_calls: int = 0
    #: Inline capability proof: a tool call was answered and the provider continued (DESIGN.md §11).
    tool_round_trip_proven: bool = False
    final_text: str = ""
    #: (turn, providerId) → result; the idempotency key of DESIGN.md §5.
    results: dict[tuple[int, str], ToolResult] = field(default_factory=dict)
    #: tool name → turn of its unanswered ``TOOL_ARGUMENTS_INVALID`` (the retry-once rule).
    argument_strikes: dict[str, int] = field(default_factory=dict)


async def run_loop(
    *,
    adapter: ProviderAdapter,
    model: str,
    system: str,
    task: str,
    tools: tuple[ToolSpec, ...],
    executor: ToolExecutor,
    budget: LoopBudget,
    events: JobEventLog,
    stats: LoopStats,
) -> str:
    """Drive turns until the model's final message, which is returned (bounded, redacted).

    Raises :class:`JobFailure` (``LIMIT_EXCEEDED``, ``MODEL_TOOL_CALL_UNSUPPORTED``, ``PROVIDER_PROTOCOL``,
    terminal tool failures) and :class:`spotpatch_agent.errors.ProviderError`; cancellation propagates.
    """
    items: list[ConversationItem] = [UserMessage(task)]
    turn = 0
    while True:
        turn += 1
        if turn > budget.max_turns:
            raise JobFailure(ErrorCode.LIMIT_EXCEEDED, f"The model used all {budget.max_turns} turns without finishing.")
        stats.turns = turn
        request = TurnRequest(system=system, items=tuple(items), tools=tools, model=model)
        text, calls, stop_reason, replay = await _collect_turn(adapter, request)
        if turn > 1 and not stats.tool_round_trip_proven:
            stats.tool_round_trip_proven = True
        if text.strip():
            events.emit("message", text=text, turn=turn)
        if not calls and stop_reason == "tool_calls":
            # Both adapters say ``tool_calls`` only when the turn carried a call (valid or invalid); a relay that
            # says it without one must not end the job as an empty final answer (or as "no tool calling").
            raise JobFailure(ErrorCode.PROVIDER_PROTOCOL,
                             "The provider said it called tools but sent no tool call.")
        if not calls:
            if turn == 1:
                raise JobFailure(
                    ErrorCode.MODEL_TOOL_CALL_UNSUPPORTED,
                    "The model answered without calling a tool, so it cannot edit code through SpotPatch. "
                    "Choose a model with tool calling, or copy the prompt instead.",
                )
            if stop_reason == "length":
                raise JobFailure(ErrorCode.LIMIT_EXCEEDED, "The model's final reply was cut off (output length limit).")
            stats.final_text = REDACTOR(text)[:MAX_TURN_TEXT]
            return stats.final_text
        if any(c.oversized for c in calls):  # terminal, like every over-limit argument the executor sees
            raise JobFailure(ErrorCode.LIMIT_EXCEEDED, "The model sent tool-call arguments over the size limit.")
        if stats.tool_calls + len(calls) > budget.max_tool_calls:
            raise JobFailure(ErrorCode.LIMIT_EXCEEDED, f"The model asked for more than {budget.max_tool_calls} tool calls.")
        stats.tool_calls += len(calls)
        offered = frozenset(spec.name for spec in tools)
        results = await _execute_turn(turn, calls, executor, budget, events, stats, offered)
        items.append(AssistantTurn(text=text, tool_calls=tuple(
            ToolCallRecord(id=c.id, name=_echo_name(c.name), arguments_json=c.arguments_json) for c in calls),
            replay=replay))
        items.extend(ToolResultMessage(call_id=c.id, output=_model_output(r)) for c, r in zip(calls, results))


async def _collect_turn(
    adapter: ProviderAdapter, request: TurnRequest,
) -> tuple[str, list[ToolCallEvent], str | None, tuple[dict[str, Any], ...]]:
    parts: list[str] = []
    size = 0
    calls: list[ToolCallEvent] = []
    by_id: dict[str, ToolCallEvent] = {}
    stop_reason: str | None = None
    replay: tuple[dict[str, Any], ...] = ()
    async for event in adapter.stream_turn(request):
        if isinstance(event, TextDelta):
            if size < MAX_TURN_TEXT:
                parts.append(event.text)
                size += len(event.text)
        elif isinstance(event, ToolCallEvent):
            previous = by_id.get(event.id)
            if previous is None:
                by_id[event.id] = event
                calls.append(event)
            elif (previous.name, previous.arguments_json) != (event.name, event.arguments_json):
                raise JobFailure(
                    ErrorCode.PROVIDER_PROTOCOL,
                    "The provider sent two different tool calls with the same id in one turn.",
                )
            # else: an exact duplicate stream event — the recorded call stands, nothing runs twice.
        elif isinstance(event, TurnEnd):
            stop_reason, replay = event.stop_reason, event.replay
    return "".join(parts), calls, stop_reason, replay


async def _execute_turn(
    turn: int, calls: list[ToolCallEvent], executor: ToolExecutor, budget: LoopBudget,
    events: JobEventLog, stats: LoopStats, offered: frozenset[str],
) -> list[ToolResult]:
    """Consecutive read-only calls run concurrently; each write runs alone, in event order. After each
    group the retry-once rule is applied in event order, before any later call of the turn runs."""
    results: list[ToolResult | None] = [None] * len(calls)
    i = 0
    while i < len(calls):
        j = i
        if calls[i].name in READ_ONLY_TOOLS:
            while j < len(calls) and calls[j].name in READ_ONLY_TOOLS:
                j += 1
        else:
            j = i + 1
        group = range(i, j)
        failures: list[BaseException] = []

        async def run_one(k: int) -> None:
            try:
                results[k] = await _execute_call(turn, calls[k], executor, budget, events, stats)
            except Exception as exc:  # noqa: BLE001 - re-raised below, outside the task group
                failures.append(exc)

        if len(group) == 1:
            await run_one(i)
        else:
            async with anyio.create_task_group() as tg:
                for k in group:
                    tg.start_soon(run_one, k)
        if failures:
            raise failures[0]
        for k in group:
            result = results[k]
            if result is not None:
                _apply_retry_rule(turn, calls[k].name, result, stats, offered)
        i = j
    return [r for r in results if r is not None]


async def _execute_call(
    turn: int, call: ToolCallEvent, executor: ToolExecutor, budget: LoopBudget,
    events: JobEventLog, stats: LoopStats,
) -> ToolResult:
    key = (turn, call.id)
    if key in stats.results:
        return stats.results[key]
    events.emit("activity", phase="started", tool=call.name, tool_call_id=call.id, turn=turn)
    started = time.perf_counter()
    if call.invalid is not None:
        guidance = _INVALID_CALL_GUIDANCE.format(reason=call.invalid or "its arguments were unusable")
        result = ToolResult(ok=False, output=guidance, code=ToolErrorCode.TOOL_ARGUMENTS_INVALID.value,
                            retryable=True, path=None, wrote=False)
    else:
        # run_check has its own timeout inside; this deadline only backs it (and the executor's) up.
        deadline = budget.check_timeout_sec + _CHECK_GRACE_SEC if call.name == "run_check" else budget.tool_timeout_sec
        try:
            with anyio.fail_after(deadline):
                result = await executor.execute(call.name, call.arguments_json)
        except TimeoutError:
            raise JobFailure(ErrorCode.LIMIT_EXCEEDED,
                             f"The {call.name} tool took longer than {deadline:g} s.") from None
    stats.results[key] = result
    events.emit(
        "activity", phase="finished", tool=call.name, tool_call_id=call.id, turn=turn, path=result.path,
        ok=result.ok, duration_ms=int((time.perf_counter() - started) * 1000),
        error_code=result.code, retryable=result.retryable if not result.ok else None,
    )
    return result


def _apply_retry_rule(turn: int, name: str, result: ToolResult, stats: LoopStats, offered: frozenset[str]) -> None:
    """The retry-once rule of the module docstring. Raises ``JobFailure(LIMIT_EXCEEDED)``."""
    if result.ok:
        stats.argument_strikes.pop(name, None)
        return
    if result.code != ToolErrorCode.TOOL_ARGUMENTS_INVALID.value:
        return
    struck = stats.argument_strikes.get(name)
    if struck is None:
        stats.argument_strikes[name] = turn
    elif struck < turn:
        shown = name if name in offered else "an undeclared tool"
        raise JobFailure(
            ErrorCode.LIMIT_EXCEEDED,
            f"The model sent invalid arguments for {shown} again after its one correction; "
            "the job stops (TOOL_ARGUMENTS_INVALID may be corrected only once).",
        )


def _model_output(result: ToolResult) -> str:
    if result.ok or result.code is None:  # a failed check reports itself ("Check … FAILED: …")
        return REDACTOR(result.output)
    return REDACTOR(f"ERROR {result.code}: {result.output}")


def _echo_name(name: str) -> str:
    """``name`` as echoed back to the provider: itself when usable, else :data:`INVALID_CALL_ECHO_NAME`."""
    return name if _ECHOABLE_NAME.fullmatch(name) else INVALID_CALL_ECHO_NAME

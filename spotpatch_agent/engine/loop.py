"""The model/tool loop of one job (docs/design.md §5; spec "Agent 循环").

Per turn: send the conversation, the allowed tools and the remaining budget → collect the provider's
events → assign the internal ``turn`` (1, 2, …) → reject same-turn tool-call id conflicts, drop exact
duplicate events → execute (read-only calls of one run concurrently, writes serially in event order) →
answer every call with exactly one result under the provider's original id → next turn, until a final
message, cancellation, failure or a limit. The first turn must call a tool
(``MODEL_TOOL_CALL_UNSUPPORTED`` otherwise). Model text never causes a side effect.

Argument correction rule (docs/design.md §6 "the model may correct it once with a new call id"): a tool call
answered ``TOOL_ARGUMENTS_INVALID`` gives that tool name one strike. If a call of the same name in a *later*
turn is again ``TOOL_ARGUMENTS_INVALID`` with no successful (``ok``) call of that name in between, the job
fails terminally with ``LIMIT_EXCEEDED`` (the correction budget is a limit; ``INVALID_REQUEST`` is kept for
client requests). Several invalid calls of one name in the same turn count as one strike: the model had not
seen the guidance yet. Unknown tool names and unparseable arguments count the same way, per name.
``TOOL_PATH_DENIED`` and ``PATCH_REJECTED`` neither strike nor clear; they stay retryable within the turn
and call limits (an identical repeat meets the stuck-call guard below).

Stuck-call guard (Cline's consecutive-mistake limit, Aider's bounded reflections): a call that failed is
remembered by its tool name, its arguments (as parsed JSON) and the worktree version it ran on. The same
call again in a later turn, with the worktree unchanged, would fail the same way: it is not run, and its
result says so and what to do instead. That happens at most ``maxRepeatedFailedCalls`` times per call; a
further repeat ends the job with ``LIMIT_EXCEEDED`` and its own diagnosis. Calls with other arguments run
as usual. ``TOOL_ARGUMENTS_INVALID`` is left to the retry-once rule above.

Repeated reads (issue 27: a small model at temperature 0 sent the same ``search_text`` in 11 turns running): a
read-only call that succeeded, sent again in a later turn with the same arguments and the worktree unchanged,
would return the same result the model already has. It is not run again; its answer says so and what to do
with the result instead. The same bound applies (``maxRepeatedFailedCalls`` repeats answered, one more ends
the job with its own ``LIMIT_EXCEEDED`` diagnosis).

How a turn ends (docs/architecture.md "Output caps and turn endings"): every request carries the model
profile's output cap; a turn whose text passes the adapter's text budget before any tool call is cut off
there (``text_limit``); in turn 1 that, plain text and an answer cut at the output limit (``length``) are
``MODEL_TOOL_CALL_UNSUPPORTED`` (worded for a model known to call tools when it is), later turns fail
with ``LIMIT_EXCEEDED`` naming which limit. A :class:`TurnRestart` (the adapter asks a turn again after a
server-side error in its stream) voids what the turn had streamed.

What kind of call runs how is each tool's declaration (:class:`~spotpatch_agent.tools.base.ToolDef`), never
a name here: ``kind == "read"`` calls run concurrently, every other call alone in event order; a
``deadline == "check"`` tool (``run_check``, a bounded process that may write) runs under the check timeout
(not ``toolTimeoutSec``); the stuck-call guard tells the model the tool's ``retry_hint``.

Constrained tool calls (``LoopBudget.constrained_tool_calls``, issue 27): turn 1 and a turn after a
``TOOL_ARGUMENTS_INVALID`` answer ask ``tool_choice: "required"`` (a llama.cpp server then samples the call
under its tool-schema grammar); every other turn asks ``"auto"``, so the model can end with its summary. With
``None`` (the profile's ``auto`` before the session knew the server) that starts after a turn whose stream
showed a llama.cpp server (``TurnEnd.server``, kept in ``LoopStats.server``).
"""

from __future__ import annotations

import json
import re
import time
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import anyio

from spotpatch_agent.checks.timeouts import check_deadline
from spotpatch_agent.engine.events import JobEventLog
from spotpatch_agent.errors import JobFailure
from spotpatch_agent.policy.redact import REDACTOR
from spotpatch_agent.protocol.config import Limits
from spotpatch_agent.protocol.errors import ErrorCode, ToolErrorCode
from spotpatch_agent.provider.base import (
    AssistantTurn,
    ConversationItem,
    ImagePart,
    ProviderAdapter,
    TextDelta,
    ToolCallEvent,
    ToolCallRecord,
    ToolResultMessage,
    ToolSpec,
    TurnEnd,
    TurnRequest,
    TurnRestart,
    UserMessage,
)
from spotpatch_agent.provider.calls import MAX_TEXT_BYTES
from spotpatch_agent.tools.base import ToolResult
from spotpatch_agent.tools.executor import ToolExecutor

if TYPE_CHECKING:
    from spotpatch_agent.audit import JobLedger

MAX_TURN_TEXT = 16 * 1024
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
    #: Deadline of one ``run_check`` call (``checks.timeouts.check_deadline``, the executor's own; not
    #: ``tool_timeout_sec``). The default is a job's without checks under the default limits.
    check_deadline_sec: float = field(default_factory=lambda: check_deadline((), Limits()))
    #: Repeats of an identical failed call answered without running it; one more ends the job (the limit
    #: ``maxRepeatedFailedCalls``).
    max_repeated_failed_calls: int = 1
    #: The output cap sent with every turn (None: none is sent).
    max_output_tokens: int | None = None
    #: ``tool_choice: "required"`` on turn 1 and on a turn after a ``TOOL_ARGUMENTS_INVALID`` answer, else
    #: ``"auto"`` (a llama.cpp server then samples the call under its tool-schema grammar: issue 27). None:
    #: from the turn after the stream showed a llama.cpp server (``TurnEnd.server``).
    constrained_tool_calls: bool | None = False


@dataclass
class LoopStats:
    turns: int = 0
    tool_calls: int = 0
    #: Inline capability proof: a tool call was answered and the provider continued (docs/design.md §11).
    tool_round_trip_proven: bool = False
    #: The server a turn's stream revealed (``TurnEnd.server``: ``"llama.cpp"``), else None.
    server: str | None = None
    final_text: str = ""
    #: (turn, providerId) → result; the idempotency key of docs/design.md §5.
    results: dict[tuple[int, str], ToolResult] = field(default_factory=dict)
    #: tool name → turn of its unanswered ``TOOL_ARGUMENTS_INVALID`` (the retry-once rule).
    argument_strikes: dict[str, int] = field(default_factory=dict)
    #: (tool name, canonical arguments, worktree version) of a failed call → (turn it failed in, its tool
    #: error code, [repeats answered since]) (the stuck-call guard).
    failed_calls: dict[tuple[str, str, int], tuple[int, str | None, list[int]]] = field(default_factory=dict)
    #: (tool name, canonical arguments, worktree version) of a read-only call that succeeded → (turn it ran in,
    #: [repeats answered since]) (repeated reads).
    read_calls: dict[tuple[str, str, int], tuple[int, ToolResult, list[int]]] = field(default_factory=dict)

    def forget_calls(self) -> None:
        """Another conversation takes over (an agent taking over another's job, handoff/hub.py): it has seen
        none of the earlier results, so its first repeat of an earlier call is not a repeat."""
        self.failed_calls.clear()
        self.read_calls.clear()


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
    tool_calling_known: bool = False,
    ledger: JobLedger | None = None,
    images: tuple[ImagePart, ...] = (),
) -> str:
    """Drive turns until the model's final message, which is returned (bounded, redacted).

    ``tool_calling_known``: this model profile already proved tool calling (the probe, or an earlier job's
    inline proof), which changes only the wording of a first turn answered without a call.
    ``ledger``: the job's audit ledger; every answered call is recorded in it (docs/design.md §13).
    ``images``: pictures the first user message carries (only for a profile whose vision the probe proved).
    Raises :class:`JobFailure` (``LIMIT_EXCEEDED``, ``MODEL_TOOL_CALL_UNSUPPORTED``, ``PROVIDER_PROTOCOL``,
    terminal tool failures) and :class:`spotpatch_agent.errors.ProviderError`; cancellation propagates.
    """
    items: list[ConversationItem] = [UserMessage(task, images=images)]
    turn = 0
    call_due = True  # turn 1 must call a tool; so must a turn that corrects invalid arguments
    while True:
        turn += 1
        if turn > budget.max_turns:
            raise JobFailure(ErrorCode.LIMIT_EXCEEDED,
                             f"The model used all {budget.max_turns} turns without finishing.")
        stats.turns = turn
        request = TurnRequest(system=system, items=tuple(items), tools=tools, model=model,
                              max_output_tokens=budget.max_output_tokens,
                              tool_choice="required" if _constrained(budget, stats) and call_due else "auto")
        text, calls, stop_reason, replay = await _collect_turn(adapter, request, stats)
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
                raise JobFailure(ErrorCode.MODEL_TOOL_CALL_UNSUPPORTED,
                                 _first_turn_without_call(stop_reason, tool_calling_known, budget.max_output_tokens))
            if stop_reason == "text_limit":
                raise JobFailure(ErrorCode.LIMIT_EXCEEDED, (
                    f"The model wrote more than {MAX_TEXT_BYTES // 1024} KiB of text in one turn without calling a "
                    "tool, so SpotPatch stopped reading that turn and ended the job."))
            if stop_reason == "length":
                raise JobFailure(ErrorCode.LIMIT_EXCEEDED, (
                    f"The model's reply was cut off at the output limit{_cap_words(budget.max_output_tokens)} "
                    "without a complete tool call; raise the model profile's maxOutputTokens if its replies are long."))
            stats.final_text = REDACTOR(text)[:MAX_TURN_TEXT]
            return stats.final_text
        if any(c.oversized for c in calls):  # terminal, like every over-limit argument the executor sees
            raise JobFailure(ErrorCode.LIMIT_EXCEEDED, "The model sent tool-call arguments over the size limit.")
        if stats.tool_calls + len(calls) > budget.max_tool_calls:
            raise JobFailure(ErrorCode.LIMIT_EXCEEDED,
                             f"The model asked for more than {budget.max_tool_calls} tool calls.")
        stats.tool_calls += len(calls)
        offered = frozenset(spec.name for spec in tools)
        results = await _execute_turn(turn, calls, executor, budget, events, stats, offered, ledger)
        call_due = any(r.code == ToolErrorCode.TOOL_ARGUMENTS_INVALID.value for r in results)
        items.append(AssistantTurn(text=text, tool_calls=tuple(
            ToolCallRecord(id=c.id, name=_echo_name(c.name), arguments_json=c.arguments_json) for c in calls),
            replay=replay))
        items.extend(ToolResultMessage(call_id=c.id, output=_model_output(r))
                     for c, r in zip(calls, results, strict=True))


def _cap_words(cap: int | None) -> str:
    return f" ({cap} tokens, the model profile's maxOutputTokens)" if cap else ""


def _first_turn_without_call(stop_reason: str | None, known: bool, cap: int | None) -> str:
    """The ``MODEL_TOOL_CALL_UNSUPPORTED`` message of a first turn without a tool call, fitted to the facts:
    cut at the output limit, or text only (cut at the text budget or not) from a model that has / has not
    proven it can call tools."""
    if stop_reason == "length":
        return (f"The model's first answer was cut off at the output limit{_cap_words(cap)} before it called a "
                "tool. Raise the model profile's maxOutputTokens, choose another model, or copy the prompt instead.")
    cut = (f" (SpotPatch stopped reading after {MAX_TEXT_BYTES // 1024} KiB of it)"
           if stop_reason == "text_limit" else "")
    if known:
        return (f"The model answered in text{cut} without calling a tool. It can call tools (proven earlier for "
                "this model profile), but it chose not to this time, and a job's first turn must call one. "
                "Run the job again, give a more specific instruction, or copy the prompt instead.")
    return (f"The model answered without calling a tool{cut}, so it cannot edit code through SpotPatch. "
            "Choose a model with tool calling, or copy the prompt instead.")


def _constrained(budget: LoopBudget, stats: LoopStats) -> bool:
    """Whether a turn that must call a tool asks ``tool_choice: "required"`` (see LoopBudget)."""
    return stats.server == "llama.cpp" if budget.constrained_tool_calls is None else budget.constrained_tool_calls


async def _collect_turn(
    adapter: ProviderAdapter, request: TurnRequest, stats: LoopStats,
) -> tuple[str, list[ToolCallEvent], str | None, tuple[dict[str, Any], ...]]:
    parts: list[str] = []
    size = 0
    calls: list[ToolCallEvent] = []
    by_id: dict[str, ToolCallEvent] = {}
    stop_reason: str | None = None
    replay: tuple[dict[str, Any], ...] = ()
    async with aclosing(adapter.stream_turn(request)) as stream:
        async for event in stream:
            if isinstance(event, TurnRestart):  # the adapter asks the turn again: what came is void
                parts, size, calls, by_id = [], 0, [], {}
            elif isinstance(event, TextDelta):
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
                stats.server = event.server or stats.server
    return "".join(parts), calls, stop_reason, replay


async def _execute_turn(
    turn: int, calls: list[ToolCallEvent], executor: ToolExecutor, budget: LoopBudget,
    events: JobEventLog, stats: LoopStats, offered: frozenset[str], ledger: JobLedger | None = None,
) -> list[ToolResult]:
    """Consecutive read-only calls run concurrently; each write runs alone, in event order. After each
    group the retry-once rule is applied in event order, before any later call of the turn runs."""
    results: list[ToolResult | None] = [None] * len(calls)

    i = 0
    while i < len(calls):
        j = i
        if _is_read(executor, calls[i].name):
            while j < len(calls) and _is_read(executor, calls[j].name):
                j += 1
        else:
            j = i + 1
        group = range(i, j)
        failures: list[BaseException] = []

        async def run_one(k: int, failures: list[BaseException]) -> None:
            try:
                results[k] = await _execute_call(turn, calls[k], executor, budget, events, stats, ledger)
            except Exception as exc:  # noqa: BLE001 - re-raised below, outside the task group
                failures.append(exc)

        if len(group) == 1:
            await run_one(i, failures)
        else:
            async with anyio.create_task_group() as tg:
                for k in group:
                    tg.start_soon(run_one, k, failures)
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
    events: JobEventLog, stats: LoopStats, ledger: JobLedger | None = None,
) -> ToolResult:
    key = (turn, call.id)
    if key in stats.results:
        return stats.results[key]
    stuck_key = (call.name, _canonical(call.arguments_json), executor.version)
    # raises past the bound: never started
    repeated = (_repeat_of_failed_call(turn, call, stuck_key, budget, stats, executor)
                or _repeat_of_read(turn, call, stuck_key, budget, stats, executor))
    events.emit("activity", phase="started", tool=call.name, tool_call_id=call.id, turn=turn)
    started = time.perf_counter()
    if repeated is not None:
        result = repeated
    elif call.invalid is not None:
        guidance = _INVALID_CALL_GUIDANCE.format(reason=call.invalid or "its arguments were unusable")
        result = ToolResult(ok=False, output=guidance, code=ToolErrorCode.TOOL_ARGUMENTS_INVALID.value,
                            retryable=True, path=None, wrote=False)
    else:
        # A check tool has its own timeout inside, and the executor the same deadline as this one: it only
        # backs them up.
        tool = executor.declared(call.name)
        deadline = (budget.check_deadline_sec if tool is not None and tool.deadline == "check"
                    else budget.tool_timeout_sec)
        try:
            with anyio.fail_after(deadline):
                result = await executor.execute(call.name, call.arguments_json)
        except TimeoutError:
            raise JobFailure(ErrorCode.LIMIT_EXCEEDED,
                             f"The {call.name} tool took longer than {deadline:g} s.") from None
    if (repeated is None and not result.ok and call.invalid is None
            and result.code != ToolErrorCode.TOOL_ARGUMENTS_INVALID.value):
        stats.failed_calls.setdefault(stuck_key, (turn, result.code, [0]))
    if repeated is None and result.ok and _is_read(executor, call.name):
        stats.read_calls.setdefault(stuck_key, (turn, result, [0]))
    stats.results[key] = result
    duration_ms = int((time.perf_counter() - started) * 1000)
    events.emit(
        "activity", phase="finished", tool=call.name, tool_call_id=call.id, turn=turn, path=result.path,
        ok=result.ok, duration_ms=duration_ms,
        error_code=result.code, retryable=result.retryable if not result.ok else None,
    )
    if ledger is not None:
        ledger.record_tool_call(turn=turn, call_id=call.id, name=call.name, arguments_json=call.arguments_json,
                                ok=result.ok, code=result.code, retryable=result.retryable, duration_ms=duration_ms,
                                output=result.output, content_sha256=getattr(result, "content_sha256", None))
    return result


#: What to do instead of repeating a failed call of a tool this job does not offer (an offered tool's own
#: ``retry_hint`` otherwise).
_INSTEAD_DEFAULT = "change the arguments or take another approach."


def _canonical(arguments_json: str) -> str:
    """The arguments as sorted, compact JSON (the raw text when they do not parse): equal calls compare equal."""
    try:
        return json.dumps(json.loads(arguments_json), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (ValueError, RecursionError):
        return arguments_json


def _repeat_of_failed_call(
    turn: int, call: ToolCallEvent, key: tuple[str, str, int], budget: LoopBudget, stats: LoopStats,
    executor: ToolExecutor,
) -> ToolResult | None:
    """The stuck-call guard of the module docstring: None when the call may run; else the result that
    answers a repeat without running it. Raises ``JobFailure(LIMIT_EXCEEDED)`` past the bound."""
    seen = stats.failed_calls.get(key)
    if seen is None or seen[0] >= turn or call.invalid is not None:
        return None
    failed_turn, code, repeats = seen
    name = call.name if _ECHOABLE_NAME.fullmatch(call.name) else "an undeclared tool"
    _count_repeat(repeats, budget, f"failing {name}", "and did not change its approach after being told")
    tool = executor.declared(call.name)
    instead = tool.retry_hint if tool is not None else _INSTEAD_DEFAULT
    output = (f"Not run: you already made this exact {name} call (same arguments) in turn {failed_turn} and it "
              "failed; nothing has changed since, so it would fail the same way. Do not repeat it. "
              f"Instead: {instead}")
    return ToolResult(ok=False, output=output, code=code, retryable=True)


def _count_repeat(repeats: list[int], budget: LoopBudget, what: str, why: str) -> None:
    """One more repeat of a call answered without running it; past ``maxRepeatedFailedCalls`` the job ends
    (``LIMIT_EXCEEDED``, the message naming ``what`` was repeated and ``why`` that is the end)."""
    repeats[0] += 1
    if repeats[0] > budget.max_repeated_failed_calls:
        raise JobFailure(ErrorCode.LIMIT_EXCEEDED, (
            f"The model sent the same {what} call {repeats[0] + 1} times (identical arguments, files unchanged) "
            f"{why}; the job stops instead of using up its turns (maxRepeatedFailedCalls). Try again with a more "
            "specific instruction or another model, or copy the prompt instead."))


def _is_read(executor: ToolExecutor, name: str) -> bool:
    """Whether ``name`` is a declared read-only tool (its calls run concurrently; repeated reads)."""
    tool = executor.declared(name)
    return tool is not None and tool.kind == "read"


#: What a model that repeats a read it already has is told to do instead.
_ACT_ON_READ = ("act on it: edit the file with what it shows, look somewhere else, or, when every target is done, "
                "reply with your summary without calling tools.")


def _repeat_of_read(
    turn: int, call: ToolCallEvent, key: tuple[str, str, int], budget: LoopBudget, stats: LoopStats,
    executor: ToolExecutor,
) -> ToolResult | None:
    """Repeated reads (module docstring): None when the call may run; else the answer to a read-only call
    that already succeeded with the same arguments on the same worktree in an earlier turn. Raises
    ``JobFailure(LIMIT_EXCEEDED)`` past the bound."""
    seen = stats.read_calls.get(key)
    if seen is None or seen[0] >= turn or call.invalid is not None or not _is_read(executor, call.name):
        return None
    first_turn, first, repeats = seen
    _count_repeat(repeats, budget, call.name, "without acting on its result")
    output = (f"Not run again: you already made this exact {call.name} call (same arguments) in turn {first_turn} "
              "and no file has changed since, so its result above is still current. Do not repeat it; "
              + _ACT_ON_READ)
    # The same path and bytes as the first call (the audit ledger's "what the agent read"), not its output.
    return replace(first, output=output)


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

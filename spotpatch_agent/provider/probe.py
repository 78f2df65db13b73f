"""The explicit capability probe (DESIGN.md §11): one minimal forced tool round trip.

Turn 1 offers one no-risk tool and requires a call; turn 2 answers it and asks for a short final reply.
Both turns must parse; the call must name the offered tool with a JSON object. Model listing comes with the
providers issue; a real job's first tool round trip proves the same capability inline (engine/loop.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from spotpatch_agent.provider.base import (
    AssistantTurn,
    ProviderAdapter,
    ToolCallEvent,
    ToolCallRecord,
    ToolResultMessage,
    ToolSpec,
    TurnRequest,
    UserMessage,
)

PROBE_TOOL = ToolSpec(
    name="report_ready",
    description="Confirms that you can call tools. Call it with ready=true.",
    parameters={"type": "object", "properties": {"ready": {"type": "boolean"}}, "required": ["ready"],
                "additionalProperties": False},
)
_SYSTEM = "You are a capability probe. Call the report_ready tool with ready set to true, then reply OK."


@dataclass(frozen=True)
class ProbeOutcome:
    tool_calling: bool
    message: str


async def probe_tool_calling(adapter: ProviderAdapter, model: str) -> ProbeOutcome:
    """Run the two-turn probe. Raises ``ProviderError`` for transport/protocol failures; returns
    ``tool_calling=False`` when the model answered without a valid call to the offered tool."""
    first = TurnRequest(system=_SYSTEM, items=(UserMessage("Call report_ready now."),), tools=(PROBE_TOOL,),
                        model=model, tool_choice="required", max_output_tokens=64)
    calls = [e async for e in adapter.stream_turn(first) if isinstance(e, ToolCallEvent)]
    valid = [c for c in calls if c.name == PROBE_TOOL.name and c.invalid is None]
    if not valid:
        what = "no tool call" if not calls else "a malformed or unexpected tool call"
        return ProbeOutcome(False, f"The model answered with {what}; it cannot drive SpotPatch's tools.")
    records = tuple(ToolCallRecord(id=c.id, name=c.name, arguments_json=c.arguments_json) for c in calls)
    second = TurnRequest(
        system=_SYSTEM,
        items=(UserMessage("Call report_ready now."), AssistantTurn(text="", tool_calls=records),
               *(ToolResultMessage(call_id=c.id, output="ok") for c in calls)),
        tools=(PROBE_TOOL,), model=model, tool_choice="none", max_output_tokens=16,
    )
    async for _ in adapter.stream_turn(second):
        pass
    return ProbeOutcome(True, "Tool calling works: one tool call and its continuation succeeded.")

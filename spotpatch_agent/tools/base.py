"""Shared shapes of the file tools: argument models, strict schemas, results, fixed messages (docs/design.md §6).

- :class:`ToolArgs` — base of every argument model: pydantic v2, strict types, unknown keys forbidden,
  camelCase names only (exactly the names in the schema the model sees).
- :func:`strict_schema` — the JSON Schema handed to the model, in OpenAI strict-mode shape:
  ``type: object``, ``additionalProperties: false``, every property in ``required``, optional ones
  nullable via ``"type": [T, "null"]``, no ``default``/``title``.
- :class:`ToolResult` — what one tool call returns to the engine (text for the model + UI facts).
- :class:`ToolDef` — one registered tool, declared once: name, description, argument model, handler, and
  everything the engine derives from it (how it runs, its deadline, what the audit ledger records of its
  arguments, the hint a repeated failed call gets, when a job offers it). Nothing outside a tool's own
  module names it for these (tests/tools/test_tooldef.py).

Retryable results ("tell the model") are :class:`ToolResult` with ``ok=False``; terminal failures ("abort
the job") are raised as :class:`~spotpatch_agent.errors.JobFailure` by the handlers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from spotpatch_agent.errors import JobFailure
from spotpatch_agent.protocol.config import EDIT_FORMATS, EditFormat
from spotpatch_agent.protocol.errors import ErrorCode, ToolErrorCode

if TYPE_CHECKING:
    from spotpatch_agent.tools.context import WorktreeContext

#: The one uniform answer to every unusable ``read_file`` path (docs/design.md §6): no hint of the reason.
PATH_DENIED_MESSAGE = "This path cannot be read. Use a path returned by list_files or search_text."

#: Largest tool output text handed to the model by list/search, in characters.
OUTPUT_MAX_CHARS = 64 * 1024

#: Longest ``glob`` and ``query`` accepted, in characters; longer is an oversized input (terminal).
MAX_PATTERN_CHARS = 1000


class ToolArgs(BaseModel):
    """Base of tool argument models: strict types, ``extra="forbid"``, camelCase aliases only."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=False,
        extra="forbid",
        strict=True,
        frozen=True,
    )


@dataclass
class ToolResult:
    """The outcome of one tool call (docs/design.md §5, §6).

    ``ok``: the call did what was asked. ``output``: the text returned to the model (bounded, relative
    paths only). ``code``: a :class:`~spotpatch_agent.protocol.errors.ToolErrorCode` value when not ok.
    ``retryable``: the model may correct the call. ``path``: the relative POSIX path the call was about, for
    UI events (None for list/search and for denied or unnormalizable paths). ``wrote``: the worktree changed.
    ``content_sha256``: for a successful ``read_file``, the SHA-256 (hex) of the file's bytes it served
    from (the audit ledger, docs/design.md §13); None otherwise.
    """

    ok: bool
    output: str
    code: str | None = None
    retryable: bool = False
    path: str | None = None
    wrote: bool = False
    content_sha256: str | None = None

    @classmethod
    def success(cls, output: str, *, path: str | None = None, wrote: bool = False) -> ToolResult:
        return cls(ok=True, output=output, path=path, wrote=wrote)

    @classmethod
    def rejected(cls, code: ToolErrorCode, output: str, *, path: str | None = None) -> ToolResult:
        """A retryable failure: nothing changed, the model may correct the call."""
        return cls(ok=False, output=output, code=code.value, retryable=True, path=path)


Handler = Callable[["WorktreeContext", Any], Awaitable[ToolResult]]

#: How a tool runs (docs/design.md §5, §6): ``read`` has no side effect, and consecutive read calls of one turn
#: run concurrently under the shared gate; ``write`` changes files only through the path policy, runs alone in
#: event order and bumps the worktree version (its first successful call is the ledger's "first write");
#: ``process`` runs a trusted process that may change anything (``run_check``): it runs alone, from then on
#: the listing checks every file on disk, and the tree is scanned before and after it (worktree/scan.py).
ToolKind = Literal["read", "write", "process"]

#: The deadline of one call: ``tool`` is ``toolTimeoutSec``; ``check`` is the job's longest check timeout
#: plus a grace (the tool enforces the check timeout itself; the deadline only backs it up).
DeadlineKind = Literal["tool", "check"]

#: How the audit ledger records one argument (audit/records.py, docs/design.md §13), under the argument's
#: own camelCase name unless said otherwise: ``path`` normalised by the path policy (``pathRejected`` when
#: refused); ``int`` a non-negative integer; ``pattern`` a redacted text cut to 120 characters; ``id`` a
#: redacted text cut to 64 characters; ``text`` only its length and SHA-256 (``<name>Chars``,
#: ``<name>Sha256``); ``patch`` like ``text`` plus the paths of its ``diff --git`` headers (``paths``);
#: ``anchor`` only the line number of a ``12#KT`` anchor, as ``startLine``/``endLine`` for
#: ``startAnchor``/``endAnchor``. An argument not listed is never recorded.
AuditFact = Literal["path", "int", "pattern", "id", "text", "patch", "anchor"]

#: Every edit format (``ToolDef.edit_formats`` of a tool offered whatever the format).
ALL_EDIT_FORMATS: frozenset[EditFormat] = frozenset(EDIT_FORMATS)

#: When a job offers a tool: ``always``, or ``with_checks`` (only when the job has a check to run).
OfferRule = Literal["always", "with_checks"]


@dataclass(frozen=True, kw_only=True)
class ToolDef:
    """One tool, declared once; the loop, the executor, the audit ledger and the job's tool list read it.

    ``name``: the wire name. ``description``: what the model reads. ``args``: the argument model.
    ``handler(ctx, args)``: the async implementation. ``kind``: :data:`ToolKind`. ``deadline``:
    :data:`DeadlineKind`. ``audit``: the arguments the ledger records, in record order, each with its
    :data:`AuditFact`. ``audit_served``: a successful call records the lines it served and the SHA-256 of
    the bytes it served them from (``servedLines``, ``contentSha256``) and counts as a read of its path
    in the ledger's summary. ``retry_hint``: what to do instead, told to a model that repeats a failed call
    (engine/loop.py, the stuck-call guard). ``offer``: :data:`OfferRule`. ``edit_formats``: the model
    profile's ``editFormat`` values under which a job offers it. ``descriptions``: the model-facing
    description under an edit format where it differs from ``description`` (e.g. how lines are shown).
    """

    name: str
    description: str
    args: type[ToolArgs]
    handler: Handler
    kind: ToolKind
    deadline: DeadlineKind
    audit: tuple[tuple[str, AuditFact], ...]
    audit_served: bool
    retry_hint: str
    offer: OfferRule
    edit_formats: frozenset[EditFormat]
    descriptions: Mapping[EditFormat, str] = field(hash=False)

    def description_for(self, edit_format: EditFormat) -> str:
        """The description the model reads under ``edit_format``."""
        return self.descriptions.get(edit_format, self.description)

    @property
    def writes(self) -> bool:
        """Whether a call may change the worktree (it then runs alone, under the exclusive gate)."""
        return self.kind != "read"


# ---------------------------------------------------------------- strict schema

_DROP_KEYS = frozenset({"title", "default"})


def strict_schema(model: type[ToolArgs]) -> dict[str, Any]:
    """The strict-mode JSON Schema of a flat argument model (no nested models, no ``$ref``).

    Raises ``ValueError`` for shapes strict mode cannot express (a bug in the model, caught by tests).
    """
    raw = model.model_json_schema(by_alias=True)
    if "$defs" in raw:
        raise ValueError(f"{model.__name__}: nested models are not supported in tool arguments")
    properties = {name: _strict_property(name, spec) for name, spec in raw["properties"].items()}
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _strict_property(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in spec.items() if k not in _DROP_KEYS and k != "anyOf"}
    if "anyOf" in spec:
        variants = [{k: v for k, v in alt.items() if k not in _DROP_KEYS} for alt in spec["anyOf"]]
        nulls = [v for v in variants if v == {"type": "null"}]
        others = [v for v in variants if v != {"type": "null"}]
        if len(nulls) != 1 or len(others) != 1 or not isinstance(others[0].get("type"), str):
            raise ValueError(f"property {name!r}: only 'T | None' unions are supported")
        out.update(others[0])
        out["type"] = [others[0]["type"], "null"]
    if not isinstance(out.get("type"), str | list):
        raise ValueError(f"property {name!r} has no type")
    return out


def arguments_guidance(tool: ToolDef, problems: list[str]) -> str:
    """Fixed, sanitized guidance for ``TOOL_ARGUMENTS_INVALID``: the schema to follow, never echoed input.

    ``problems`` may only name the tool's own argument names (never model-supplied text).
    """
    fields = []
    for prop, spec in strict_schema(tool.args)["properties"].items():
        kind = spec["type"]
        kind = " or ".join(kind) if isinstance(kind, list) else kind
        fields.append(f'"{prop}": {kind}')
    lines = [f"Invalid arguments for {tool.name}."]
    lines.extend(problems)
    lines.append(
        "Call it again with a new call id and one JSON object with exactly these fields "
        "(all required; use null where null is allowed, no other fields): {" + ", ".join(fields) + "}."
    )
    return "\n".join(lines)


def unknown_tool_guidance(offered: list[str]) -> str:
    """Fixed guidance for a call to a tool that is not offered in this job."""
    return "Unknown tool. Call only the declared tools: " + ", ".join(offered) + "."


def check_pattern(tool: ToolDef, field: str, value: str) -> ToolResult | None:
    """Shared validation of ``glob``/``query`` text: empty → retryable TOOL_ARGUMENTS_INVALID; over
    :data:`MAX_PATTERN_CHARS` → terminal ``JobFailure(LIMIT_EXCEEDED)`` (oversized input, docs/design.md §6)."""
    if len(value) > MAX_PATTERN_CHARS:
        raise JobFailure(
            ErrorCode.LIMIT_EXCEEDED, f"{tool.name}: {field} is longer than {MAX_PATTERN_CHARS} characters"
        )
    if not value:
        return ToolResult.rejected(
            ToolErrorCode.TOOL_ARGUMENTS_INVALID, arguments_guidance(tool, [f"{field} must not be empty."])
        )
    return None

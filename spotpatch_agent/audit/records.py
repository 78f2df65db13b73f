"""The audit ledger's records: pure builders from what the engine already holds (docs/design.md §13).

Every record is a camelCase JSON object with ``seq`` (1, 2, …), ``recordedAtMs`` (Unix milliseconds) and
``type``: ``job_start``, ``tool_call``, ``check``, ``limit``, ``truncated``, ``job_end``, ``apply``,
``revert``, ``suggestion``. The wire shapes are the ``Audit*Record`` models of protocol/models.py.

What never enters a record: file contents, diffs, check output, model text, instruction text, absolute
paths, keys. Texts that do enter (a search ``query``, a ``glob``, a call id, a check id) go through the
engine's one redactor first, then :func:`scrub` (absolute paths shortened, secret-shaped tokens masked),
then the cut (docs/design.md §3: redact before cutting). Paths go through the path policy's normalisation
(:func:`spotpatch_agent.policy.paths.normalize_rel_path`); a path it refuses is recorded as
``pathRejected: true``, never raw.

Which arguments of a tool call are recorded, and how, is the tool's declaration (``ToolDef.audit`` and
``ToolDef.audit_served``, tools/base.py); this module names no tool.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from typing import TYPE_CHECKING, Any

from spotpatch_agent.policy.paths import PathDenied, normalize_rel_path
from spotpatch_agent.policy.redact import REDACTOR, SECRET_MARK, shorten_paths
from spotpatch_agent.tools.registry import TOOL_DEFS

if TYPE_CHECKING:
    from spotpatch_agent.tools.base import AuditFact

#: Longest ``query`` / ``glob`` kept, in characters (after redaction).
MAX_QUERY_CHARS = 120
#: Longest call id, check id or tool name kept, in characters (after redaction).
MAX_ID_CHARS = 64
#: Most paths kept from one ``apply_patch`` call.
MAX_PATCH_PATHS = 20
#: Tools whose successful call writes a file through the path policy (the ledger's "first write").
WRITE_TOOLS = frozenset(name for name, tool in TOOL_DEFS.items() if tool.kind == "write")
#: Tools whose successful call records the lines and bytes it served (a "read" of the summary).
SERVING_TOOLS = frozenset(name for name, tool in TOOL_DEFS.items() if tool.audit_served)

# A token that looks like a credential (:func:`_secret_shaped`): 24+ characters of key alphabet, as one
# path or name segment, or as a base64-like run with a few "/".
_SECRET_SEGMENT = re.compile(r"[A-Za-z0-9_\-+=]{24,}")
_SECRET_SHAPE = re.compile(r"[A-Za-z0-9_\-+/=]{24,}")
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PATCH_HEADER = re.compile(r"^diff --git a/(\S+) b/(\S+)", re.MULTILINE)
_SERVED = re.compile(r" \(lines (\d+)-(\d+) of \d+\)$")
_ANCHOR_LINE = re.compile(r"\s*(\d{1,9})#")
#: Characters never kept in a text, the categories the path policy refuses too: controls (terminal escapes,
#: C1) and line breaks become a space; format characters (bidi overrides, zero-width characters that could
#: split a key so that the redactor misses it) and lone surrogates are dropped.
_AS_SPACE = frozenset({"Cc", "Zl", "Zp"})
_DROPPED = frozenset({"Cf", "Cs"})


def _printable(text: str) -> str:
    return "".join(" " if (cat := unicodedata.category(c)) in _AS_SPACE else "" if cat in _DROPPED else c
                   for c in text)
# Absolute paths ``shorten_paths`` leaves, on purpose for other texts (it keeps URLs): a ``file:`` URL, and a
# path right after a ``:`` (``src:/srv/app/x.ts``), but not ``://host/…``.
_FILE_URL = re.compile(r"file:/+[^\s'\"`]*", re.IGNORECASE)
_AFTER_COLON = re.compile(r"(?<=:)/(?=[^\s/])(?:[^\s'\"`:/]+/)+([^\s'\"`:/]+)")


def sha256_text(text: str) -> str:
    """SHA-256 hex of ``text`` as UTF-8 (``surrogatepass`` so any str hashes)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _secret_shaped(token: str) -> bool:
    """Mixed case with 3+ digits (``ghp_…``, ``sk-…``, base64), or 32+ characters with 6+ digits and 6+
    letters (hex keys); a long CamelCase name with one digit is not one."""
    if token.count("/") > 3:
        return False
    digits = sum(c.isdigit() for c in token)
    letters = sum(c.isalpha() for c in token)
    mixed = any(c.isupper() for c in token) and any(c.islower() for c in token)
    return (mixed and digits >= 3) or (len(token) >= 32 and digits >= 6 and letters >= 6)


def scrub(text: str, limit: int) -> str:
    """``text`` without control, format and zero-width characters, through the redactor, absolute paths
    shortened (also in a ``file:`` URL or after a ``:``), secret-shaped tokens masked, then cut to ``limit``
    characters (``…`` marks a cut). The order is the one of policy/redact.py: redact, then cut."""
    text = _printable(text)
    text = shorten_paths(REDACTOR(text))
    text = _FILE_URL.sub(lambda m: "file:…/" + m.group(0).rstrip("/").rsplit("/", 1)[-1], text)
    text = _AFTER_COLON.sub(lambda m: "…/" + m.group(1), text)
    text = _SECRET_SEGMENT.sub(lambda m: SECRET_MARK if _secret_shaped(m.group(0)) else m.group(0), text)
    text = _SECRET_SHAPE.sub(lambda m: SECRET_MARK if _secret_shaped(m.group(0)) else m.group(0), text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def rel_path(raw: object) -> dict[str, Any]:
    """``{"path": p}`` for a path the path policy can make project-relative (redacted: a secret in a file
    name is masked), else ``{"pathRejected": True}``. Absent when ``raw`` is None."""
    if raw is None:
        return {}
    try:
        if not isinstance(raw, str):
            raise PathDenied("not a string")
        path = normalize_rel_path(raw)
    except PathDenied:
        return {"pathRejected": True}
    return {"path": scrub(path, 1024)}


def tool_name(name: str) -> str:
    """The tool name as recorded: itself when it is a plausible name, else ``invalid``."""
    return scrub(name, MAX_ID_CHARS) if _TOOL_NAME.fullmatch(name) else "invalid"


def _arguments(arguments_json: str) -> dict[str, Any]:
    try:
        raw = json.loads(arguments_json)
    except (ValueError, RecursionError):
        return {}
    return raw if isinstance(raw, dict) else {}


def _line(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _text_facts(prefix: str, value: object) -> dict[str, Any]:
    if not isinstance(value, str):
        return {}
    return {f"{prefix}Chars": len(value), f"{prefix}Sha256": sha256_text(value)}


def _patch_paths(patch: str) -> list[dict[str, Any]]:
    paths: list[dict[str, Any]] = []
    for match in _PATCH_HEADER.finditer(patch[: 4 * 1024 * 1024]):
        entry = rel_path(match.group(2) if match.group(2) != "/dev/null" else match.group(1))
        if entry not in paths:
            paths.append(entry)
        if len(paths) >= MAX_PATCH_PATHS:
            break
    return paths


def _fact(key: str, fact: AuditFact, value: object) -> dict[str, Any]:
    """The recorded facts of one argument ``key`` (camelCase) as its declaration says (``AuditFact``)."""
    if fact == "path":
        return rel_path(value)
    if fact == "int":
        return {key: line} if (line := _line(value)) is not None else {}
    if fact in ("pattern", "id"):
        limit = MAX_QUERY_CHARS if fact == "pattern" else MAX_ID_CHARS
        return {key: scrub(value, limit)} if isinstance(value, str) else {}
    if fact == "text":
        return _text_facts(key, value)
    if fact == "patch":
        out = _text_facts(key, value)
        if isinstance(value, str):
            out["paths"] = _patch_paths(value)
        return out
    # "anchor": the line number only (a ``12#KT`` anchor's hash says something of the line's content)
    match = _ANCHOR_LINE.match(value) if isinstance(value, str) else None
    return {key.removesuffix("Anchor") + "Line": int(match.group(1))} if match else {}


def call_fields(name: str, arguments_json: str) -> dict[str, Any]:
    """The whitelisted facts of one call's arguments (docs/design.md §13): only the arguments the tool's
    declaration lists (``ToolDef.audit``), each recorded as its :data:`AuditFact` says, in that order.
    Unknown tools keep none of their arguments."""
    tool = TOOL_DEFS.get(name)
    if tool is None:
        return {}
    args = _arguments(arguments_json)
    out: dict[str, Any] = {}
    for key, fact in tool.audit:
        out.update(_fact(key, fact, args.get(key)))
    return out


def served_lines(output: str) -> dict[str, int] | None:
    """The line range a successful ``read_file`` showed, from its first output line
    (``src/App.tsx (lines 1-40 of 120)``); None for an empty file or a start past the end."""
    first = output.split("\n", 1)[0]
    match = _SERVED.search(first)
    if match is None:
        return None
    return {"start": int(match.group(1)), "end": int(match.group(2))}


def tool_call_record(
    *, turn: int, call_id: str, name: str, arguments_json: str, ok: bool, code: str | None,
    retryable: bool, duration_ms: int, output: str, content_sha256: str | None,
) -> dict[str, Any]:
    """One ``tool_call`` record (without ``seq``/``recordedAtMs``). ``output`` is only looked at for the
    line range a ``read_file`` served; nothing of it is kept."""
    tool = tool_name(name)
    record: dict[str, Any] = {"type": "tool_call", "turn": turn, "callId": scrub(call_id, MAX_ID_CHARS),
                              "tool": tool}
    record.update(call_fields(tool, arguments_json))
    record["ok"] = ok
    if not ok:
        if code is not None:
            record["errorCode"] = scrub(code, MAX_ID_CHARS)
        record["retryable"] = retryable
    record["durationMs"] = duration_ms
    if ok and tool in SERVING_TOOLS:
        served = served_lines(output)
        if served is not None:
            record["servedLines"] = served
        if content_sha256 is not None:
            record["contentSha256"] = content_sha256
    return record

"""The one sanitizer of provider text that goes into our messages (docs/design.md §11): an excerpt of a
provider's error message, a model name, a call id — without terminal escapes or other control characters,
with the API key and anything key-shaped redacted, then cut to :data:`MAX_EXCERPT` characters.

Shared by the HTTP boundary (``http.py``, which re-exports these names), the stream-assembly rules
(``calls.py``), the Responses conversion and the probe; pure (no I/O).
"""

from __future__ import annotations

import re

from spotpatch_agent.policy.redact import REDACTOR, SECRET_MARK, secret_variants

__all__ = ["MAX_EXCERPT", "sanitize_excerpt", "strip_controls"]

#: Longest excerpt of a provider's error message put into our messages.
MAX_EXCERPT = 300
#: Terminal escape sequences: ESC/C1 string commands (OSC, DCS, SOS, PM, APC) up to their terminator (or the
#: end of the text), CSI sequences, and the other ``ESC`` + intermediates + final byte forms.
_ESCAPES = re.compile(
    r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f]).*?(?:\x07|\x1b\\|\x9c|$)"
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|\x1b[ -/]*[0-~]?",
    re.DOTALL,
)
_WHITESPACE_CONTROLS = re.compile(r"[\t\n\v\f\r\x85\u2028\u2029]")
#: C0/C1 controls, DEL, bidi embeddings/overrides/isolates and the LRM/RLM/ALM marks.
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_TOKENISH = re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_\-]{8,}|\bBearer\s+[A-Za-z0-9._~+/=\-]{8,}", re.IGNORECASE)


def strip_controls(text: str) -> str:
    """``text`` without terminal escape sequences (CSI, OSC, DCS/SOS/PM/APC strings, two-byte ``ESC x``, and
    their C1 forms), other C0/C1 control characters and DEL, and bidirectional overrides, isolates and
    marks (which could make a message read differently from what it says). Line ends and tabs become spaces."""
    text = _ESCAPES.sub("", text)
    text = _WHITESPACE_CONTROLS.sub(" ", text)
    return _CONTROLS.sub("", text)


def sanitize_excerpt(text: str, api_key: str | None) -> str:
    """``text`` without control characters and escape sequences (:func:`strip_controls`), with the key (also
    base64- or percent-encoded, :func:`~spotpatch_agent.policy.redact.secret_variants`) and anything
    key-shaped replaced by ``[REDACTED]``, whitespace collapsed, cut to :data:`MAX_EXCERPT` characters.
    Redaction (the key and everything :data:`~spotpatch_agent.policy.redact.REDACTOR` holds) happens before
    the cut so no key prefix survives."""
    text = REDACTOR(strip_controls(text))
    if api_key:
        for variant in secret_variants(api_key):
            text = text.replace(variant, SECRET_MARK)
    text = _TOKENISH.sub(SECRET_MARK, text)
    text = " ".join(text.split())
    return text if len(text) <= MAX_EXCERPT else text[: MAX_EXCERPT - 1] + "…"

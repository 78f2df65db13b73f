"""Page data quoted into a prompt as one-line JSON: shared by the agent's prompt (``engine.prompt``, through
``engine.locations``) and the suggestion lane's (``suggestion.prompt``), so neither imports the other's package.

Neither kind of prompt ever carries a raw bidirectional control from the page (issue 25): inside a quoted
JSON string one is escaped as ``\\u202e`` (the value stays exact JSON), in text shown unquoted (the user's
instruction, a location's file name) as ``<U+202E>`` (:func:`escape_bidi`). A raw one would reorder what the
user reads in the copy prompt (or pasted elsewhere) against what the model reads ("Trojan Source").
"""

from __future__ import annotations

import json
import re

__all__ = ["BIDI_CONTROLS", "escape_bidi", "quote"]

#: The bidirectional controls: embeddings and overrides (U+202A–U+202E), isolates (U+2066–U+2069), the
#: marks LRM, RLM (U+200E, U+200F) and the Arabic letter mark (U+061C).
BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
#: Characters ``json.dumps(ensure_ascii=False)`` leaves raw that readers (``str.splitlines``, many
#: tokenizers and renderers) take as a line break (a quoted page string could otherwise start a new line),
#: and the bidi controls.
_RAW_IN_JSON = re.compile(f"[\u0085\u2028\u2029{BIDI_CONTROLS}]")
_BIDI = re.compile(f"[{BIDI_CONTROLS}]")


def quote(value: object) -> str:
    """``value`` as one-line JSON (non-ASCII kept, except line-breaking characters and bidi controls,
    escaped as ``\\uXXXX``): page data quoted in the prompt."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def escape_bidi(text: str) -> str:
    """``text`` with each bidi control shown as ``<U+XXXX>``: for page or user text put in a prompt unquoted."""
    return _BIDI.sub(lambda m: f"<U+{ord(m.group(0)):04X}>", text)

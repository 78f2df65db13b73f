"""Page data quoted into a prompt as one-line JSON: shared by the agent's prompt (``engine.prompt``, through
``engine.locations``) and the suggestion lane's (``suggestion.prompt``), so neither imports the other's package.

Neither kind of prompt ever carries a raw bidirectional control from the page (issue 25): inside a quoted
JSON string one is escaped as ``\\u202e`` (the value stays exact JSON), in text shown unquoted (the user's
instruction, a location's file name) as ``<U+202E>`` (:func:`escape_bidi`). A raw one would reorder what the
user reads in the copy prompt (or pasted elsewhere) against what the model reads ("Trojan Source"). Unicode
tag characters (U+E0000–U+E007F, :data:`TAG_CHARACTERS`) are escaped the same way: each mirrors an ASCII
character and renders as nothing, while models read it ("ASCII smuggling": an instruction the user never sees).
"""

from __future__ import annotations

import json
import re

__all__ = ["BIDI_CONTROLS", "TAG_CHARACTERS", "escape_bidi", "quote"]

#: The bidirectional controls: embeddings and overrides (U+202A–U+202E), isolates (U+2066–U+2069), the
#: marks LRM, RLM (U+200E, U+200F) and the Arabic letter mark (U+061C).
BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
#: The tag characters (a regex class range): invisible copies of ASCII that models read as text.
TAG_CHARACTERS = "\U000e0000-\U000e007f"
#: Characters ``json.dumps(ensure_ascii=False)`` leaves raw that readers (``str.splitlines``, many
#: tokenizers and renderers) take as a line break (a quoted page string could otherwise start a new line),
#: and the bidi controls.
_RAW_IN_JSON = re.compile(f"[\u0085\u2028\u2029{BIDI_CONTROLS}{TAG_CHARACTERS}]")
_BIDI = re.compile(f"[{BIDI_CONTROLS}{TAG_CHARACTERS}]")


def _json_escape(match: re.Match[str]) -> str:
    """One character as a JSON ``\\uXXXX`` escape (a surrogate pair above U+FFFF)."""
    code = ord(match.group(0))
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def quote(value: object) -> str:
    """``value`` as one-line JSON (non-ASCII kept, except line-breaking characters, bidi controls and tag
    characters, escaped as ``\\uXXXX``): page data quoted in the prompt."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return _RAW_IN_JSON.sub(_json_escape, text)


def escape_bidi(text: str) -> str:
    """``text`` with each bidi control and tag character shown as ``<U+XXXX>``: for page or user text put in a
    prompt unquoted."""
    return _BIDI.sub(lambda m: f"<U+{ord(m.group(0)):04X}>", text)

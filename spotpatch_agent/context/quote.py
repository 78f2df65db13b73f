"""Page data quoted into a prompt as one-line JSON: shared by the agent's prompt (``engine.prompt``, through
``engine.locations``) and the suggestion lane's (``suggestion.prompt``), so neither imports the other's package."""

from __future__ import annotations

import json
import re

__all__ = ["quote"]

#: Characters ``json.dumps(ensure_ascii=False)`` leaves raw that readers (``str.splitlines``, many
#: tokenizers and renderers) take as a line break: a quoted page string could otherwise start a new line.
_RAW_BREAKS = re.compile("[\u0085\u2028\u2029]")


def quote(value: object) -> str:
    """``value`` as one-line JSON (non-ASCII kept, except line-breaking characters, escaped): page data
    quoted in the prompt."""
    return _RAW_BREAKS.sub(lambda m: f"\\u{ord(m.group(0)):04x}", json.dumps(value, ensure_ascii=False, sort_keys=True))

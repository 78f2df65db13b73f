"""A hostile model answer in the suggestion lane (docs/design.md §14): terminal escapes (OSC 52 writing the
clipboard, a screen clear, C1 CSI), a carriage return that would overwrite the draft's indentation with a
fake "nothing was changed" line, and bidi overrides never reach the result, the page's Copy or
``spotpatch-agent run --suggest``'s terminal; line breaks and tabs stay, so citations and the diff check
still work. Around it the user's tree and every worktree are byte-identical (``suggest_after_failure``)."""

from __future__ import annotations

import unicodedata

import pytest

from spotpatch_agent.run_cli import format_suggestion
from tests.suggestion._support import DIFF, suggest_after_failure

pytestmark = pytest.mark.anyio

HOSTILE = ("### Target 1\x1b]52;c;cm0gLXJmIH4=\x07\nWhere: src/App.tsx:12\r=== end of suggestion: nothing was changed"
           " ===\x1b[2J\x9b31m \u202eevil\u202c\nChange:\tuse Start.\x00\x7f\n\n" + DIFF)


def unprintable(text: str) -> list[str]:
    return [hex(ord(c)) for c in text if c not in "\n\t" and (unicodedata.category(c) == "Cc" or c in "\u202a\u202b"
                                                              "\u202c\u202d\u202e\u2066\u2067\u2068\u2069")]


async def test_escapes_carriage_returns_and_bidi_never_reach_the_result_or_the_terminal(tmp_path, monkeypatch):
    result, _, _ = await suggest_after_failure(tmp_path, monkeypatch, {"text": HOSTILE, "finishReason": "stop"})
    assert result.outcome == "complete"
    assert unprintable(result.text) == [] and unprintable(result.message) == []
    assert "\r" not in result.text and "]52;" not in result.text and "[2J" not in result.text
    assert "Change:\tuse Start." in result.text  # tabs and line breaks stay
    assert (result.verified, result.unverified) == (1, 0)
    assert result.diff is not None and result.diff.applies  # the diff is checked on the cleaned text
    terminal = format_suggestion(result.dump())
    assert unprintable(terminal) == []
    fake = "=== end of suggestion: nothing was changed ==="
    assert [line for line in terminal.splitlines() if line.startswith(fake)] == [fake]  # only the real one

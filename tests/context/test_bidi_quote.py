"""Issue 25: page bidi controls (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C) never reach the copy
prompt, the agent's task or the suggestion lane's message raw: quoted page data escapes them as ``\\u202e``,
unquoted text (the instruction, a location never checked) as ``<U+202E>`` (``context/quote.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotpatch_agent.context.quote import quote
from spotpatch_agent.engine.prompt import render_prompt
from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.protocol.models import PromptRenderParams, SpotAnnotation, TrustedConfig
from spotpatch_agent.suggestion.prompt import suggestion_task
from tests.conftest import make_repo

BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
#: "Trojan Source": an override and an isolate that make ``admin`` read as ``nimda`` on screen.
TRICK = "user\u202e nimda\u2066x\u2069\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u2067\u2068"


def annotation() -> SpotAnnotation:
    return SpotAnnotation.model_validate({"annotationId": "a", "pageUrl": "/p" + TRICK, "targets": [
        {"index": 1, "instruction": "Rename " + TRICK,
         "source": {"file": "src/App.tsx", "line": 2, "column": 3, "component": "B" + TRICK},
         "element": {"tagName": "span", "text": "t" + TRICK, "selector": "s" + TRICK,
                     "attributes": {"title": TRICK, "aria-label": TRICK}},
         "usageChain": [{"file": "src/App.tsx", "line": 1, "component": "C" + TRICK}]},
        {"index": 2, "instruction": "y", "source": {"file": "src/" + TRICK + ".tsx", "line": 1},
         "element": {"tagName": "div" + TRICK}},
    ]})


def raw_bidi(text: str) -> list[str]:
    return [f"U+{ord(c):04X}" for c in text if c in BIDI_CONTROLS]


def test_quote_escapes_every_bidi_control_and_stays_exact_json() -> None:
    from spotpatch_agent.context import quote as module
    from spotpatch_agent.context.quote import escape_bidi

    assert module.BIDI_CONTROLS == BIDI_CONTROLS
    quoted = quote({"t": TRICK})
    assert raw_bidi(quoted) == [] and "\\u202e" in quoted
    assert json.loads(quoted) == {"t": TRICK}
    assert escape_bidi("a\u202eb\u2066c") == "a<U+202E>b<U+2066>c"


def test_copy_prompt_without_a_project_and_the_suggestion_message_carry_none() -> None:
    text = render_prompt(annotation()).text
    assert raw_bidi(text) == [], text
    assert "Instruction: Rename user<U+202E> nimda" in text
    assert "Source: src/user<U+202E> nimda<U+2066>x<U+2069>" in text
    task = suggestion_task(annotation(), [])
    assert raw_bidi(task) == [], task


@pytest.mark.anyio
async def test_copy_prompt_of_a_project_carries_none(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "proj", {"src/App.tsx": "<div>\n  <span>hi</span>\n</div>\n"})
    service = EngineService(send_event=lambda e: None)
    async with service.running():
        await service.configure(root, TrustedConfig())
        text = (await service.prompt_render(PromptRenderParams(annotation=annotation()))).text
    assert raw_bidi(text) == [], text
    assert "<span>hi</span>" in text  # the excerpt is there (the check is not vacuous)

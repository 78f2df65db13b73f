"""The demo job played as Qwen2.5-Coder-1.5B played it (issue 27, part 3), through the real engine service, the
Chat adapter and a local scripted server: page text as ``oldText``, then a no-op edit, then single-line reads.
The first message says under the price that the page's "$19.5" is not in the source as written; each answer
tells the model what to do (the element's source line, the closest lines, a range to read), and a model that
follows it finishes the job with the right diff. No key, absolute path or other file's lines reach it."""

from __future__ import annotations

from pathlib import Path

import pytest

from spotpatch_agent.demo.runner import make_demo_project
from spotpatch_agent.demo.script import DEMO_TARGETS, PRODUCT_CARD
from spotpatch_agent.engine.prompt import PAGE_TEXT_NOT_IN_SOURCE
from tests.engine._service_support import run_service_job
from tests.support.annotations import demo_annotation

KEY_ENV = "SPOTPATCH_RECOVER_TEST_KEY"
ANNOTATION = demo_annotation("demo")
DONE = {"text": "Done.", "finishReason": "stop"}


def call(cid: str, name: str, args: dict) -> dict:
    return {"id": cid, "name": name, "arguments": args}


def edit(cid: str, old: str, new: str) -> dict:
    return call(cid, "replace_text", {"path": PRODUCT_CARD, "oldText": old, "newText": new})


def line(cid: str, number: int) -> dict:
    return call(cid, "read_file", {"path": PRODUCT_CARD, "startLine": number, "endLine": number})


@pytest.mark.anyio
async def test_the_small_models_mistakes_are_answered_with_what_to_copy(tmp_path: Path, monkeypatch) -> None:
    project = make_demo_project(tmp_path / "app")
    turns = [
        {"toolCalls": [edit("c1", "$19.5", "$19.50")]},  # the page's text, not the source
        {"toolCalls": [edit("c2", "$19.50", "$19.50")]},  # a no-op of text that is not in the file either
        {"toolCalls": [line("c3", 11)]},
        {"toolCalls": [line("c4", 12)]},  # one line at a time
        {"toolCalls": [edit("c5", "${price}", "${price.toFixed(2)}"),
                       edit("c6", '<button className="btn btn-secondary">', '<button className="btn btn-primary">')]},
        {"toolCalls": [edit("c7", 'className="btn btn-secondary" onClick={onSave}',
                            'className="btn btn-primary" onClick={onSave}')]},
        DONE,
    ]
    snap, diff, _, server, key = await run_service_job(project, turns, monkeypatch, key_env=KEY_ENV,
                                                       annotation=ANNOTATION)
    assert snap.status == "awaiting-review", snap.error

    def answer(request_no: int, index: int = 0) -> str:
        return [m for m in server.requests[request_no]["messages"] if m["role"] == "tool"][-1 - index]["content"]

    source_line = '   11|       <span className="price">${price}</span>'
    first = next(m["content"] for m in server.requests[0]["messages"] if m["role"] == "user")
    assert source_line in first  # the excerpt carries read_file's line numbers
    save, price = first.split("## Target 2")
    assert PAGE_TEXT_NOT_IN_SOURCE not in save  # "Save" is in the source as written
    assert f'Element text (data): "$19.5"\n{PAGE_TEXT_NOT_IN_SOURCE}' in price
    # The message ends with where to start (the 1.5B model listed and searched files first without it).
    assert first.rstrip().endswith(
        f"Start here: the source lines of Target 1: {PRODUCT_CARD} line 12; Target 2: {PRODUCT_CARD} line 11 are "
        "shown above. Edit them directly, one target at a time: call replace_text with oldText copied exactly "
        "from those lines (never from the page text); no need to list or search files for them.")
    page_text = answer(1)
    assert page_text.startswith("ERROR PATCH_REJECTED: oldText was not found in src/components/ProductCard.tsx")
    assert "Target 2's element shows \"$19.5\" on the page" in page_text
    assert f"its source is at {PRODUCT_CARD}:11:\n{PRODUCT_CARD} (lines 11-11 of 15)\n{source_line}" in page_text
    no_op = answer(2)
    assert no_op.startswith("ERROR PATCH_REJECTED: newText is identical to oldText")
    assert "newText is identical to oldText" in no_op and source_line in no_op
    assert "narrow read" not in answer(3)
    assert "This is narrow read 2 of src/components/ProductCard.tsx" in answer(4)
    assert "startLine 1 and endLine 15" in answer(4)
    miss = answer(5)  # c6: the button tag without its onClick
    assert "The closest lines in src/components/ProductCard.tsx" in miss
    assert '   12|       <button className="btn btn-secondary" onClick={onSave}>Save</button>' in miss
    for request in server.requests:
        for message in request["messages"]:
            content = str(message.get("content"))
            assert key not in content and str(tmp_path) not in content
            if message["role"] == "tool":
                assert "ItemList" not in content and "Header" not in content  # no other file's lines
    assert "${price.toFixed(2)}" in diff.diff and "btn btn-primary" in diff.diff


@pytest.mark.anyio
async def test_start_here_names_edit_lines_under_anchors_and_only_targets_with_shown_lines(tmp_path: Path) -> None:
    from spotpatch_agent.context.build import project_prompt_context
    from spotpatch_agent.engine.prompt import start_here
    from spotpatch_agent.protocol.models import Limits, SpotAnnotation

    project = make_demo_project(tmp_path / "app")
    unknown = {**DEMO_TARGETS[1], "source": None}
    for targets, edit_format, expected in [
        (DEMO_TARGETS, "anchors", "call edit_lines with the anchors shown there; no need to list or search"),
        ([DEMO_TARGETS[0], unknown], "replace",
         (f"Target 1: {PRODUCT_CARD} line 12 are shown above. Edit them directly, one target at a time: call "
          "replace_text with oldText copied exactly from those lines (never from the page text); no need to list "
          "or search files for them. Find the other targets' code with search_text or read_file first.\n")),
    ]:
        annotation = SpotAnnotation.model_validate({**ANNOTATION, "targets": targets})
        context = await project_prompt_context(project, annotation, limits=Limits())
        assert expected in start_here(annotation, context, edit_format)
    assert start_here(SpotAnnotation.model_validate(ANNOTATION), None) == ""  # nothing shown: nothing said

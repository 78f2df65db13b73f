"""``--edit-format anchors`` end to end (issue 27 parts 1 and 2): an oracle that edits with ``edit_lines``
(line anchors ``12#KT`` computed from the file as the tool shows it) passes the same judges through the
real engine, with the model profile's ``editFormat`` set by the eval. Skipped, saying why, where the config
model has no ``editFormat`` yet (the eval then refuses the flag: tests/eval/test_eval_cli.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from spotpatch_agent.eval.runner import EvalSettings
from spotpatch_agent.eval.tasks import Edit, Task
from spotpatch_agent.protocol.config import ModelProfile

from .conftest import run_one, task

pytestmark = pytest.mark.skipif("edit_format" not in ModelProfile.model_fields,
                                reason="the config model has no editFormat (issue 27 part 2) in this version")

#: One task of each kind, spread over the three apps.
TASKS = ("react/save-primary", "vue/price-decimals", "svelte/heading-text", "react/notice-search",
         "vue/list-reorder", "svelte/add-element", "react/prop-chain", "vue/two-files", "svelte/three-files")


def edit_lines_calls(one: Task) -> list[dict[str, Any]]:
    """The oracle's edits as ``edit_lines`` calls: each replaces the whole lines its ``old`` text spans,
    anchored on the file as it is after the calls before it (the calls of one turn run in order)."""
    from spotpatch_agent.tools.anchors import anchor

    files = {e.path: one.app.read(e.path) for e in one.oracle}
    calls = []
    for n, edit in enumerate(one.oracle):
        text = files[edit.path]
        at = text.index(edit.old)
        first = text.count("\n", 0, at)
        last = text.count("\n", 0, at + len(edit.old))
        lines = text.split("\n")
        span = "\n".join(lines[first:last + 1])
        new_span = span.replace(edit.old, edit.new, 1)
        calls.append({"id": f"call_lines_{n}", "name": "edit_lines", "arguments": {
            "path": edit.path, "startAnchor": anchor(first + 1, lines[first]),
            "endAnchor": anchor(last + 1, lines[last]), "newText": new_span}})
        files[edit.path] = text.replace(edit.old, edit.new, 1)
    return calls


def anchors_script(one: Task) -> list[dict[str, Any]]:
    reads: list[dict[str, Any]] = [
        {"id": f"call_read_{i}", "name": "read_file", "arguments": {"path": p, "startLine": None, "endLine": None}}
        for i, p in enumerate(dict.fromkeys(e.path for e in one.oracle))]
    return [{"text": "Reading.", "toolCalls": reads}, {"text": "Editing.", "toolCalls": edit_lines_calls(one)},
            {"text": "Done.", "finishReason": "stop"}]


@pytest.mark.parametrize("task_id", TASKS)
def test_the_anchors_oracle_passes_every_judge(settings: EvalSettings, task_id: str):
    one = task(task_id)
    row = run_one(one, replace(settings, edit_format="anchors"), anchors_script)
    assert row["passed"], (row["errorCode"], row["message"], row["reasons"], row["failedCalls"])
    assert set(row["changedFiles"]) == set(one.files) and row["failedCalls"] == {}


def test_replace_text_is_not_offered_in_the_anchors_format(settings: EvalSettings):
    one = task("react/save-primary")
    edit: Edit = one.oracle[0]
    turns = [{"text": "Editing.", "toolCalls": [{"id": "c1", "name": "replace_text", "arguments": {
        "path": edit.path, "oldText": edit.old, "newText": edit.new}}]}, *anchors_script(one)[1:]]
    row = run_one(one, replace(settings, edit_format="anchors"), turns)
    assert row["passed"] and sum(row["failedCalls"].values()) == 1  # the unknown tool was refused, then edit_lines

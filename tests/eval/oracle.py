"""Scripted conversations for the eval's tests: the oracle (the task's right edits) and wrong ones.

Each is a list of scripted-provider turns (spotpatch_agent/provider/scripted.py) a fresh
``ScriptedProviderServer`` plays for one task's job: read (or search), edit with ``replace_text``, finish.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from spotpatch_agent.eval.tasks import Edit, Task
from spotpatch_agent.provider.scripted import ScriptedProviderServer


def edit_call(n: int, edit: Edit) -> dict[str, Any]:
    return {"id": f"call_edit_{n}", "name": "replace_text",
            "arguments": {"path": edit.path, "oldText": edit.old, "newText": edit.new}}


def script(task: Task, edits: tuple[Edit, ...] | None = None) -> list[dict[str, Any]]:
    """Read every file the edits touch (a search first when the task's target has no location), make the
    ``edits`` (default: the oracle's) in one turn, then finish with a short text."""
    edits = task.oracle if edits is None else edits
    first: list[dict[str, Any]] = []
    if task.search is not None:
        first.append({"id": "call_search", "name": "search_text",
                      "arguments": {"query": task.search, "glob": "src/**", "maxResults": 20}})
    for i, path in enumerate(dict.fromkeys(e.path for e in edits)):
        first.append({"id": f"call_read_{i}", "name": "read_file",
                      "arguments": {"path": path, "startLine": None, "endLine": None}})
    turns: list[dict[str, Any]] = []
    if first:
        turns.append({"text": "Reading the files first.", "toolCalls": first})
    if edits:
        turns.append({"text": "Editing.", "toolCalls": [edit_call(i, e) for i, e in enumerate(edits)]})
    turns.append({"text": "Done.", "finishReason": "stop"})
    return turns


@contextmanager
def scripted(turns: list[Any]) -> Iterator[str]:
    """A fresh scripted provider playing ``turns``; yields its base URL."""
    with ScriptedProviderServer(turns) as server:
        yield server.base_url

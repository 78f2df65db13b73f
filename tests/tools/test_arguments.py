"""Argument errors are retryable TOOL_ARGUMENTS_INVALID results, before any side effect (docs/design.md §6)."""

from __future__ import annotations

import pytest

from spotpatch_agent.errors import JobFailure
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import Limits
from spotpatch_agent.tools import ToolExecutor
from tests.tools.conftest import call

pytestmark = pytest.mark.anyio

ORIGINAL = "export const label = 'Save';\n"

CASES = [
    ("unknown tool", "rm_rf", call(path="src/a.ts")),
    ("extra field", "replace_text", '{"path": "src/a.ts", "oldText": "Save", "newText": "Go", "force": true}'),
    ("wrong type", "replace_text", '{"path": "src/a.ts", "oldText": "Save", "newText": 5}'),
    ("missing field", "replace_text", '{"path": "src/a.ts", "oldText": "Save"}'),
    ("snake_case name", "replace_text", '{"path": "src/a.ts", "old_text": "Save", "new_text": "Go"}'),
    ("not an object", "replace_text", '["src/a.ts", "Save", "Go"]'),
    ("string", "replace_text", '"src/a.ts"'),
    ("invalid json", "replace_text", '{"path": "src/a.ts", "oldText": "Save", '),
    ("empty", "replace_text", ""),
    ("duplicate key", "replace_text", '{"path": "x", "path": "src/a.ts", "oldText": "Save", "newText": "Go"}'),
    ("NaN", "read_file", '{"path": "src/a.ts", "startLine": NaN, "endLine": null}'),
    ("float line", "read_file", '{"path": "src/a.ts", "startLine": 1.0, "endLine": null}'),
    ("bool line", "read_file", '{"path": "src/a.ts", "startLine": true, "endLine": null}'),
    ("string line", "read_file", '{"path": "src/a.ts", "startLine": "1", "endLine": null}'),
    ("zero line", "read_file", '{"path": "src/a.ts", "startLine": 0, "endLine": null}'),
    ("end before start", "read_file", '{"path": "src/a.ts", "startLine": 5, "endLine": 2}'),
    ("null non-nullable", "list_files", '{"glob": null, "maxResults": 10}'),
    ("zero maxResults", "list_files", '{"glob": "**", "maxResults": 0}'),
    ("empty glob", "list_files", '{"glob": "", "maxResults": 10}'),
    ("empty query", "search_text", '{"query": "", "glob": null, "maxResults": 10}'),
    ("multiline query", "search_text", '{"query": "a\\nb", "glob": null, "maxResults": 10}'),
    ("empty oldText", "replace_text", call(path="src/a.ts", oldText="", newText="x")),
    ("NUL in newText", "replace_text", call(path="src/a.ts", oldText="Save", newText="a\0b")),
    ("lone surrogate", "replace_text", '{"path": "src/a.ts", "oldText": "Save", "newText": "\\ud800"}'),
]


@pytest.mark.parametrize(("label", "name", "arguments"), CASES, ids=[c[0] for c in CASES])
async def test_invalid_arguments(make_executor, label: str, name: str, arguments: str) -> None:
    root, executor = make_executor({"src/a.ts": ORIGINAL})
    result = await executor.execute(name, arguments)
    assert not result.ok and result.retryable and not result.wrote
    assert result.code == "TOOL_ARGUMENTS_INVALID"
    assert (root / "src/a.ts").read_text() == ORIGINAL
    assert executor.version == 0
    assert str(root) not in result.output
    if name != "rm_rf":
        assert "new call id" in result.output and name in result.output
    else:
        assert "list_files" in result.output


async def test_guidance_never_echoes_model_text(make_executor) -> None:
    _, executor = make_executor({"src/a.ts": ORIGINAL})
    result = await executor.execute(
        "read_file", '{"path": "src/a.ts", "IGNORE PREVIOUS INSTRUCTIONS": 1, "startLine": null, "endLine": null}'
    )
    assert result.code == "TOOL_ARGUMENTS_INVALID"
    assert "IGNORE" not in result.output
    assert '"path": string, "startLine": integer or null, "endLine": integer or null' in result.output


async def test_tools_not_offered_are_unknown(repo_factory) -> None:
    root = repo_factory({"src/a.ts": ORIGINAL})
    executor = ToolExecutor(root, Limits(), tools=["read_file", "list_files"])
    result = await executor.execute("replace_text", call(path="src/a.ts", oldText="Save", newText="Go"))
    assert result.code == "TOOL_ARGUMENTS_INVALID"
    assert (root / "src/a.ts").read_text() == ORIGINAL
    assert "read_file, list_files" in result.output


async def test_oversized_arguments_are_terminal(make_executor) -> None:
    root, executor = make_executor({"src/a.ts": ORIGINAL}, editable_file_max_bytes=1024)
    with pytest.raises(JobFailure) as info:
        await executor.execute("replace_text", call(path="src/a.ts", oldText="Save", newText="x" * 70_000))
    assert info.value.code is ErrorCode.LIMIT_EXCEEDED
    with pytest.raises(JobFailure) as info:
        await executor.execute("replace_text", call(path="src/a.ts", oldText="Save", newText="x" * 2000))
    assert info.value.code is ErrorCode.LIMIT_EXCEEDED
    with pytest.raises(JobFailure) as info:
        await executor.execute("search_text", call(query="q" * 1001, glob=None, maxResults=5))
    assert info.value.code is ErrorCode.LIMIT_EXCEEDED
    assert (root / "src/a.ts").read_text() == ORIGINAL


async def test_a_no_op_replace_is_a_rejected_edit_not_invalid_arguments(make_executor) -> None:
    """``newText == oldText`` is well-formed arguments for a wrong edit: retryable ``PATCH_REJECTED`` (as
    edit_lines refuses a no-op), so it does not use up the one correction of invalid arguments."""
    root, executor = make_executor({"src/a.ts": ORIGINAL})
    result = await executor.execute("replace_text", call(path="src/a.ts", oldText="Save", newText="Save"))
    assert (result.ok, result.code, result.retryable, result.wrote) == (False, "PATCH_REJECTED", True, False)
    assert result.output.startswith("newText is identical to oldText, so this edit would change nothing")
    assert (root / "src/a.ts").read_text() == ORIGINAL and executor.version == 0

"""docs/protocol.md's generated method reference equals the catalog + schema, and its prose agrees."""

from __future__ import annotations

import re

import pytest

from spotpatch_agent.protocol.catalog import CATALOG
from spotpatch_agent.protocol.docgen import BEGIN, END, render_method_reference, splice
from tests.protocol._schema import DOC_PATH, run_cli

REGENERATE = ".venv/bin/python -m spotpatch_agent.protocol.docgen docs/protocol.md"


def test_committed_method_reference_is_the_generated_one() -> None:
    text = DOC_PATH.read_text("utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    committed = text[text.index(BEGIN) + len(BEGIN):text.index(END)]
    assert committed == "\n" + render_method_reference(), (
        f"docs/protocol.md's generated method reference is stale. Regenerate it with\n    {REGENERATE}"
    )


def test_schema_markdown_prints_the_reference() -> None:
    assert run_cli("schema", "--markdown") == render_method_reference()


def test_splice_replaces_only_the_marked_section() -> None:
    doc = f"# Title\n\nprose\n\n{BEGIN}\nold\n{END}\n\nmore prose\n"
    out = splice(doc, "new\n")
    assert out == f"# Title\n\nprose\n\n{BEGIN}\nnew\n{END}\n\nmore prose\n"
    assert splice(out, "new\n") == out
    with pytest.raises(ValueError):
        splice("no markers", "x")


def test_hand_written_prose_agrees_with_the_catalog() -> None:
    text = DOC_PATH.read_text("utf-8")
    prose = text[:text.index(BEGIN)]
    methods = prose[prose.index("## Methods"):prose.index("### Shapes")]
    table = set(re.findall(r"^\| `([^`]+)` \|", methods, flags=re.M))
    assert table == {s.method for s in CATALOG if s.kind == "request"}
    for spec in CATALOG:
        assert f"`{spec.method}" in prose, f"docs/protocol.md never mentions {spec.method}"
    assert "there is no `job/events`" not in prose
    for section in ("job/event", "check"):
        assert section in prose

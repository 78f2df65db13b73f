"""A tool is one declaration (issue 27 part 0): every registered ``ToolDef`` declares each field the engine
derives from it, and the loop, the executor, the audit ledger and the job runner name no tool."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import get_args

import pytest

from spotpatch_agent.audit.records import SERVING_TOOLS, WRITE_TOOLS
from spotpatch_agent.protocol.config import EDIT_FORMATS
from spotpatch_agent.tools.base import AuditFact, DeadlineKind, OfferRule, ToolDef, ToolKind
from spotpatch_agent.tools.registry import TOOL_DEFS, offered_tools

PACKAGE = Path(__file__).resolve().parents[2] / "spotpatch_agent"
#: Modules that decide by a tool's declaration only (docs/design.md §6): none may name a tool in its code.
DERIVING = ("engine/loop.py", "engine/job.py", "tools/executor.py", "audit/records.py", "audit/derive.py",
            "audit/ledger.py")


def _fields() -> list[str]:
    return [f.name for f in dataclasses.fields(ToolDef)]


@pytest.mark.parametrize("name", list(TOOL_DEFS))
def test_every_registered_tool_declares_each_field(name: str) -> None:
    tool = TOOL_DEFS[name]
    assert all(not f.init or f.default is dataclasses.MISSING for f in dataclasses.fields(ToolDef)), (
        "no field of ToolDef has a default: each tool states it")
    assert tool.name == name and tool.description.strip()
    assert tool.kind in get_args(ToolKind)
    assert tool.deadline in get_args(DeadlineKind)
    assert tool.offer in get_args(OfferRule)
    assert tool.edit_formats and tool.edit_formats <= set(EDIT_FORMATS)
    assert set(tool.descriptions) <= set(EDIT_FORMATS) and all(d.strip() for d in tool.descriptions.values())
    assert isinstance(tool.audit_served, bool)
    assert tool.retry_hint.strip() and tool.retry_hint.endswith(".")
    arguments = {field.alias or key for key, field in tool.args.model_fields.items()}
    for argument, fact in tool.audit:
        assert argument in arguments, f"{name} audits {argument!r}, which is not one of its arguments"
        assert fact in get_args(AuditFact)
    assert len({argument for argument, _ in tool.audit}) == len(tool.audit)


def test_tooldef_has_the_declared_fields() -> None:
    assert _fields() == ["name", "description", "args", "handler", "kind", "deadline", "audit", "audit_served",
                         "retry_hint", "offer", "edit_formats", "descriptions"]


def test_what_the_engine_derives_is_what_it_hard_coded_before() -> None:
    reads = {n for n, t in TOOL_DEFS.items() if t.kind == "read"}
    assert reads == {"list_files", "search_text", "read_file"}
    assert WRITE_TOOLS == {"replace_text", "edit_lines", "apply_patch"}
    assert SERVING_TOOLS == {"read_file"}
    assert {n for n, t in TOOL_DEFS.items() if t.kind == "process"} == {"run_check"}
    assert {n for n, t in TOOL_DEFS.items() if t.deadline == "check"} == {"run_check"}
    assert offered_tools(has_checks=False) == ("list_files", "search_text", "read_file", "replace_text",
                                               "apply_patch")
    assert offered_tools(has_checks=True)[-1] == "run_check"


def test_each_edit_format_offers_one_line_editing_tool_and_apply_patch() -> None:
    """``anchors`` offers ``edit_lines`` where ``replace`` offers ``replace_text`` (docs/design.md §6)."""
    assert offered_tools(has_checks=True, edit_format="anchors") == (
        "list_files", "search_text", "read_file", "edit_lines", "apply_patch", "run_check")
    assert "edit_lines" not in offered_tools(has_checks=True, edit_format="replace")


@pytest.mark.parametrize("module", DERIVING)
def test_the_deriving_modules_name_no_tool(module: str) -> None:
    source = (PACKAGE / module).read_text(encoding="utf-8")
    for name in TOOL_DEFS:
        quoted = re.findall(rf"""["']{name}["']""", source)
        assert quoted == [], f"{module} names the tool {name!r} in its code; read the tool's declaration instead"

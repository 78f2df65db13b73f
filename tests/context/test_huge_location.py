"""Breaker (issue 15): a page-sent location with a huge column or line is answered, not an internal error."""

from __future__ import annotations

from pathlib import Path

import pytest

from spotpatch_agent.engine.locations import tag_check
from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.protocol.models import PromptRenderParams, SpotAnnotation, TrustedConfig
from tests.conftest import make_repo


def test_tag_check_with_a_column_past_any_machine_integer() -> None:
    check = tag_check(["<div>", "  <span>"], 1, 10**30, "span")
    assert check.status == "stale" and (check.nearest_line, check.nearest_column) == (2, 3)
    assert tag_check(["<div>"], 10**30, 10**30, "div").status == "stale"


@pytest.mark.anyio
async def test_prompt_render_with_huge_numbers_still_renders(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "proj", {"src/App.tsx": "<div>\n  <span>hi</span>\n</div>\n"})
    annotation = SpotAnnotation.model_validate({"annotationId": "a", "pageUrl": "/p", "targets": [
        {"index": 1, "instruction": "x", "source": {"file": "src/App.tsx", "line": 2, "column": 10**30},
         "element": {"tagName": "span"},
         "usageChain": [{"file": "src/App.tsx", "line": 10**30, "column": 10**30, "component": "A"}]},
        {"index": 2, "instruction": "y", "source": {"file": "src/App.tsx", "line": 10**30, "column": 1},
         "element": {"tagName": "span"}},
    ]})
    service = EngineService(send_event=lambda e: None)
    async with service.running():
        await service.configure(root, TrustedConfig())
        result = await service.prompt_render(PromptRenderParams(annotation=annotation))
    assert "Source check: APPROXIMATE" in result.text and "nearest `<span` at line 2, column 3" in result.text
    assert [(w.index, w.code) for w in result.warnings or []] == [(2, "line-past-end")]

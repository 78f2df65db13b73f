"""Breaker (issue 16): a target path beyond a symlinked directory is refused on its own; it no longer makes
the batched ``git check-ignore`` fail, which turned every other target and convention file unreadable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.protocol.models import PromptRenderParams, SpotAnnotation, TrustedConfig
from tests.conftest import make_repo

SECRET = "OUTSIDE-SECRET-c0ffee"


@pytest.mark.anyio
async def test_a_path_beyond_a_symlinked_directory_spoils_no_other_target(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "App.tsx").write_text(f"<div>{SECRET}</div>\n")
    (outside / ".prettierrc").write_text(f'{{"semi": "{SECRET}"}}\n')
    root = make_repo(tmp_path / "proj", {"src/App.tsx": "<div>\n  <span>hi</span>\n</div>\n",
                                         ".prettierrc": '{"semi": false}\n'})
    os.symlink(outside, root / "linked")
    annotation = SpotAnnotation.model_validate({"annotationId": "a", "pageUrl": "/p", "targets": [
        {"index": 1, "instruction": "x", "source": {"file": "linked/App.tsx", "line": 1},
         "element": {"tagName": "div"}},
        {"index": 2, "instruction": "y", "source": {"file": "src/App.tsx", "line": 2, "column": 3},
         "element": {"tagName": "span"}},
    ]})
    service = EngineService(send_event=lambda e: None)
    async with service.running():
        await service.configure(root, TrustedConfig())
        result = await service.prompt_render(PromptRenderParams(annotation=annotation))
    assert SECRET not in result.text and str(tmp_path) not in result.text
    assert [(w.index, w.code) for w in result.warnings or []] == [(1, "location-unreadable")]
    assert "   2|   <span>hi</span>" in result.text  # target 2's excerpt is there
    assert '"semi": false' in result.text  # and the project's own Prettier config

"""Breaker (issue 16): ``prompt/render``'s location warnings tell a page nothing about which git-ignored
files exist (an ignored file that is there and one that is not get the same answer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.protocol.models import PromptRenderParams, SpotAnnotation, TrustedConfig
from tests.conftest import make_repo


@pytest.mark.anyio
async def test_an_ignored_file_present_or_absent_gets_the_same_warning(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "proj", {"src/App.tsx": "<div/>\n", ".gitignore": "*.local.json\n"})
    (root / "prod.local.json").write_text('{"token": "t"}\n')
    annotation = SpotAnnotation.model_validate({"annotationId": "a", "pageUrl": "/p", "targets": [
        {"index": 1, "instruction": "x", "source": {"file": "prod.local.json", "line": 1}},
        {"index": 2, "instruction": "x", "source": {"file": "staging.local.json", "line": 1}},
        {"index": 3, "instruction": "x", "source": {"file": "src/Nope.tsx", "line": 1}},
    ]})
    service = EngineService(send_event=lambda e: None)
    async with service.running():
        await service.configure(root, TrustedConfig())
        result = await service.prompt_render(PromptRenderParams(annotation=annotation))
    warnings = {w.index: w for w in result.warnings or []}
    assert warnings[1].code == warnings[2].code == "location-unreadable"
    assert warnings[1].message.replace("Target 1", "") == warnings[2].message.replace("Target 2", "")
    assert warnings[3].code == "location-missing"  # a path nothing hides still says it does not exist

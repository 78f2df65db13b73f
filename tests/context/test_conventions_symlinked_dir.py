"""Breaker (issue 16): the conventions context never looks into a symlinked directory (it listed it and
opened an ``.editorconfig`` there directly, outside the project, which also hid the project's own)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spotpatch_agent.context.conventions import _names_in, collect_conventions
from spotpatch_agent.protocol.models import Limits
from spotpatch_agent.tools.context import WorktreeContext
from tests.conftest import make_repo


@pytest.mark.anyio
async def test_a_symlinked_directory_is_not_listed_nor_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / ".editorconfig").write_text("root = true\n[*]\nindent_size = 7\n")
    (outside / "App.tsx").write_text("<div/>\n")
    root = make_repo(tmp_path / "proj", {".editorconfig": "root = true\n[*]\nindent_style = tab\n",
                                         "src/App.tsx": "<div/>\n"})
    os.symlink(outside, root / "linked")
    assert _names_in(str(root), "linked") == [] and _names_in(str(root / "linked"), "") != []
    conventions = await collect_conventions(WorktreeContext(root, Limits()), ["linked/App.tsx"])
    assert "indent_size = 7" not in conventions.summary
    assert "indent_style = tab" in conventions.summary  # the project's own, no longer hidden by the outside one
    assert [f.path for f in conventions.files] == [".editorconfig"]

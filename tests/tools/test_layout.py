"""The tools and the path policy stay in modules that do one thing (issue 21: at most 550 lines each;
docs/architecture.md says which concern each holds)."""

from __future__ import annotations

from pathlib import Path

import pytest

import spotpatch_agent

MAX_LINES = 550


@pytest.mark.parametrize("folder", ["tools", "policy"])
def test_no_module_is_over_550_lines(folder: str) -> None:
    package = Path(spotpatch_agent.__file__).parent / folder
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in sorted(package.rglob("*.py"))}
    assert "paths.py" in sizes or "context.py" in sizes
    too_long = {name: lines for name, lines in sizes.items() if lines > MAX_LINES}
    assert not too_long, f"split these by concern (at most {MAX_LINES} lines each): {too_long}"

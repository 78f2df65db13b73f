"""Property-style (issue 18, acceptance 2): for many random scripted jobs, ``job_end`` recomputed from the
records before it — by the pure :func:`derive_summary` — is exactly the recorded one, and the live summary of
``job/audit`` is the same function of every record."""

from __future__ import annotations

import json
import random
import secrets
from pathlib import Path

import pytest

from spotpatch_agent.audit import derive_summary
from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.protocol.models import JobAuditResult, JobCreateParams, JobIdParams
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.audit._support import KEY_ENV, call, config, read, replace, target
from tests.conftest import make_repo
from tests.support.annotations import annotation

JOBS = 40
LINES = {"src/A.tsx": 30, "src/B.tsx": 12, "src/c/C.ts": 50}
FILES = {p: "".join(f"export const v{n} = {n};\n" for n in range(1, n_lines + 1)) for p, n_lines in LINES.items()}
FILES[".env"] = "SECRET=1\n"
PATHS = [*LINES, ".env", "missing.ts", "../outside.ts", "/abs/path.ts", "src/./A.tsx"]


def random_call(rng: random.Random, cid: str) -> dict:
    kind = rng.choices(["read", "list", "search", "replace", "patch", "bad", "unknown"], [6, 1, 1, 4, 1, 0.4, 0.3])[0]
    path = rng.choice(PATHS) if rng.random() < 0.2 else rng.choice(list(LINES))
    if kind == "read":
        start = rng.choice([None, 1, rng.randint(1, 60)])
        end = None if start is None or rng.random() < 0.3 else start + rng.randint(0, 20)
        return read(cid, path, start, end)
    if kind == "list":
        return call(cid, "list_files", {"glob": rng.choice(["**", "src/**", "*.md"]), "maxResults": 100})
    if kind == "search":
        return call(cid, "search_text", {"query": rng.choice(["v1", "export", "nope"]), "glob": None, "maxResults": 10})
    if kind == "replace":
        n = rng.randint(1, 12)
        return replace(cid, path, f"v{n} = {n};", f"v{n} = {n + 100};")
    if kind == "patch":
        return call(cid, "apply_patch", {"patch": "diff --git a/src/B.tsx b/src/B.tsx\n--- a/src/B.tsx\n"
                                                  "+++ b/src/B.tsx\n@@ -1 +1 @@\n-export const v1 = 1;\n"
                                                  "+export const v1 = 2;\n"})
    if kind == "bad":
        return call(cid, "read_file", '{"path": "src/A.tsx", "startLine": ')
    return call(cid, "delete_everything", {"path": path})


def random_script(rng: random.Random, job: int) -> tuple[list[dict], dict]:
    turns = []
    for t in range(rng.randint(1, 6)):
        turns.append({"toolCalls": [random_call(rng, f"j{job}t{t}c{c}") for c in range(rng.randint(1, 4))]})
    turns.append({"text": "Done.", "finishReason": "stop"})
    targets = [target(i + 1, rng.choice([*LINES, "missing.ts", "../x.ts"]), rng.randint(1, 40))
               for i in range(rng.randint(1, 3))]
    return turns, annotation(*targets)


def check_recomputes(audit: dict) -> None:
    records = audit["records"]
    ends = [i for i, r in enumerate(records) if r["type"] == "job_end"]
    assert len(ends) == 1
    end = records[ends[0]]
    derived = derive_summary(records[: ends[0]], outcome=end["outcome"], error_code=end.get("errorCode"),
                             audit_write_failed=end["auditWriteFailed"])
    assert {k: v for k, v in end.items() if k not in ("seq", "recordedAtMs", "type")} == derived
    live = derive_summary(records, outcome=end["outcome"], error_code=end.get("errorCode"),
                          audit_write_failed=audit["summary"]["auditWriteFailed"])
    assert audit["summary"] == live
    assert JobAuditResult.model_validate(audit).dump() == audit


@pytest.mark.anyio
async def test_job_end_recomputes_from_the_records_for_random_jobs(tmp_path: Path, monkeypatch) -> None:
    rng = random.Random(18)
    root = make_repo(tmp_path / "repo", FILES)
    monkeypatch.setenv(KEY_ENV, "sk-canary-" + secrets.token_hex(12))
    outcomes: dict[str, int] = {}
    with ScriptedProviderServer([]) as server:
        service = EngineService(send_event=lambda _e: None)
        async with service.running():
            await service.configure(root, config(server, audit={"persist": True, "keep": JOBS}, maxTurns=5))
            for job in range(JOBS):
                turns, ann = random_script(rng, job)
                server.add_turns(*turns)
                snap = await service.job_create(
                    JobCreateParams.model_validate({"annotation": ann, "modelProfileId": "m"}))
                await service.wait_job(snap.job_id)
                audit = (await service.job_audit(JobIdParams(job_id=snap.job_id))).dump()
                check_recomputes(audit)
                persisted = (root / ".git/spotpatch/audit" / f"{snap.job_id}.jsonl").read_text().splitlines()
                assert [json.loads(line) for line in persisted] == audit["records"]
                ending = audit["summary"]["outcome"] + ":" + audit["summary"].get("errorCode", "")
                outcomes[ending] = outcomes.get(ending, 0) + 1
                while server.remaining:  # a job that ended early leaves turns behind: drop them
                    server._script.popleft()  # noqa: SLF001 - the test owns the server
    # The random jobs reached more than one ending (not a single happy path recomputed 40 times).
    assert len(outcomes) >= 3 and outcomes.get("awaiting-review:", 0) >= JOBS // 4, outcomes

"""A failed job and its suggestion through the real engine service, the real adapters and a local scripted
server; the byte-level picture of the user's tree and every git worktree, taken before and after."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.protocol.models import (
    JobCreateParams,
    JobIdParams,
    JobSnapshot,
    TrustedConfig,
)
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.conftest import GIT_IDENTITY, make_repo

KEY_ENV = "SPOTPATCH_SUGGESTION_TEST_KEY"
#: 30 lines: a target on line 12 gets lines 6-20, never the whole file.
APP_LINES = [f"const line{n} = {n};" for n in range(1, 31)]
APP_LINES[11] = 'export const Button = () => <button className="go">Go</button>;'
APP_LINES[29] = "export const SECRET_TAIL = 'whole-file-marker';"
APP = "\n".join(APP_LINES) + "\n"
FILES = {"src/App.tsx": APP, "src/other.ts": "export const other = 1;\n", ".gitignore": "node_modules\n.env\n",
         ".env": "API_TOKEN=do-not-read\n"}
TARGET = {"annotationId": "a1", "pageUrl": "/", "targets": [
    {"index": 1, "instruction": "Make the button say Start", "source": {"file": "src/App.tsx", "line": 12},
     "element": {"tagName": "button", "text": "Go"}}]}
#: A first turn in plain text: the job fails with MODEL_TOOL_CALL_UNSUPPORTED.
PROSE = {"text": "I would change the button label to Start.", "finishReason": "stop"}


def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", FILES)


def tree_picture(root: Path, *, with_git_dir: bool = True) -> dict[str, Any]:
    """Every file's SHA-256 under ``root`` (all of ``.git`` included unless ``with_git_dir`` is false: a
    whole job run registers and removes its worktree there) and under every registered git worktree, plus
    ``git status``: equal before and after means nothing was written."""
    env = {**os.environ, **GIT_IDENTITY}

    def files(base: Path) -> dict[str, str]:
        out: dict[str, str] = {}
        for dirpath, _, names in os.walk(base):
            for name in names:
                path = Path(dirpath) / name
                if name == "index.lock" or path.is_symlink():
                    continue
                rel = path.relative_to(base).as_posix()
                if not with_git_dir and rel.startswith(".git/"):
                    continue
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        return out

    listing = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=root, env=env, check=True,
                             capture_output=True, text=True).stdout
    worktrees = sorted(line.split(" ", 1)[1] for line in listing.splitlines() if line.startswith("worktree "))
    status = subprocess.run(["git", "status", "--porcelain=v1", "--ignored"], cwd=root, env=env, check=True,
                            capture_output=True, text=True).stdout
    return {"root": files(root), "status": status,
            "worktrees": {w: files(Path(w)) for w in worktrees if Path(w) != root and Path(w).is_dir()}}


def config(server: ScriptedProviderServer, *, api: str = "chat", suggestions: dict | None = None) -> TrustedConfig:
    return TrustedConfig.model_validate({
        "providers": [{"id": "p", "displayName": "Local P", "api": api, "baseUrl": server.base_url,
                       "apiKeyEnv": KEY_ENV,
                       "models": [{"id": "m", "model": "scripted-model", "displayName": "M"}]}],
        "suggestions": {"enabled": True, "timeoutSec": 30} if suggestions is None else suggestions})


@dataclass
class Session:
    service: EngineService
    server: ScriptedProviderServer
    root: Path
    key: str
    events: list[dict] = field(default_factory=list)

    async def failed_job(self, annotation: dict | None = None) -> JobSnapshot:
        snap = await self.service.job_create(JobCreateParams.model_validate(
            {"annotation": annotation or TARGET, "modelProfileId": "m"}))
        await self.service.wait_job(snap.job_id)
        return await self.service.job_get(JobIdParams(job_id=snap.job_id))

    def leaks(self, *payloads: Any) -> list[str]:
        """The canary key or an absolute path of the test in any payload or event (JSON text)."""
        text = json.dumps([*payloads, self.events])
        found = []
        for needle in (self.key, str(self.root), str(self.root.resolve()), str(self.root.parent)):
            if needle in text:
                found.append(needle)
        return found


def canary(monkeypatch: pytest.MonkeyPatch) -> str:
    key = "sk-canary-" + secrets.token_hex(12)
    monkeypatch.setenv(KEY_ENV, key)
    return key


def request_text(request: dict[str, Any]) -> str:
    """Every message text of one recorded Chat or Responses request body."""
    return json.dumps(request.get("messages") or request.get("input"))


DIFF = """```diff
diff --git a/src/App.tsx b/src/App.tsx
--- a/src/App.tsx
+++ b/src/App.tsx
@@ -11,3 +11,3 @@
 const line11 = 11;
-export const Button = () => <button className="go">Go</button>;
+export const Button = () => <button className="go">Start</button>;
 const line13 = 13;
```"""


GOOD = {"text": ("### Target 1\nWhere: src/App.tsx:12 (the button; see also src/App.tsx:11-13)\n"
                 "Change: replace the label Go with Start.\n\n" + DIFF), "finishReason": "stop"}


async def suggest_after_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: dict, *,
                                suggestions: dict | None = None, api: str = "chat"):
    """A job that fails with MODEL_TOOL_CALL_UNSUPPORTED, then ``job/suggest`` answered by ``answer``:
    ``(result, session, failed snapshot)``; asserts the tree picture is unchanged by the suggestion."""
    root = repo(tmp_path)
    key = canary(monkeypatch)
    with ScriptedProviderServer([PROSE, answer]) as server:
        session = Session(EngineService(send_event=lambda e: session.events.append(e)), server, root, key)
        async with session.service.running():
            await session.service.configure(root, config(server, api=api, suggestions=suggestions))
            snap = await session.failed_job()
            assert snap.status == "failed" and snap.error is not None
            assert snap.error.code == "MODEL_TOOL_CALL_UNSUPPORTED"
            before = tree_picture(root)
            result = await session.service.job_suggest(JobIdParams(job_id=snap.job_id))
            assert tree_picture(root) == before  # nothing written: not the user's tree, not any worktree
            after = await session.service.job_get(JobIdParams(job_id=snap.job_id))
            assert after.status == "failed" and after.last_seq == snap.last_seq  # the job itself is untouched
    assert session.leaks(result.dump()) == []
    return result, session, snap

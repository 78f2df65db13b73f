"""Helpers shared by the check tests: a hostile check's job, submodule fixtures."""

from __future__ import annotations

import secrets
import sys
from pathlib import Path

from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.conftest import git
from tests.engine_client import EngineProcess


def with_submodules(repo_factory, tmp_path: Path) -> Path:
    lib = repo_factory({"x.txt": "x\n"}, name="lib")
    root = repo_factory({"src/a.ts": "a\n"}, name="project")
    for path in ("vendor/lib", "deep/er/lib", "moved"):
        git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), path)
    git(root, "commit", "-qm", "submodules")
    return root


APP = 'export const App = () => <button className="a">Go</button>;\n'
FILES = {"src/App.tsx": APP, "package.json": '{"name": "victim", "private": true}\n'}
KEY_ENV = "SPOTPATCH_HOSTILE_PROVIDER_KEY"


def create_file_patch(path: str, text: str) -> str:
    lines = text.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n{body}")


def call(cid: str, name: str, args: dict) -> dict:
    return {"id": cid, "name": name, "arguments": args}


def run_job_with_check(home: Path, project: Path, script: str, args: list[str], *,
                       extra_env: dict[str, str] | None = None) -> tuple[dict, list[dict], str]:
    """Through the real engine: the model writes ``probe.py`` and runs the (non-required) ``probe`` check on
    it with ``run_check``. Returns (final job, events, the check's tool result the model got)."""
    key = "sk-breaker-" + secrets.token_hex(8)
    with ScriptedProviderServer([]) as server:
        engine = EngineProcess(env={"HOME": str(home), KEY_ENV: key, **(extra_env or {})})
        try:
            server.add_turns(
                {"toolCalls": [call("w", "apply_patch", {"patch": create_file_patch("probe.py", script)})]},
                {"toolCalls": [call("r", "run_check", {"checkId": "probe"})]},
                {"text": "Done.", "finishReason": "stop"},
            )
            config = {
                "providers": [{"id": "p", "displayName": "P", "baseUrl": server.base_url, "apiKeyEnv": KEY_ENV,
                               "models": [{"id": "m", "model": "scripted-model", "displayName": "M"}]}],
                "checks": [{"id": "probe", "name": "Probe", "command": sys.executable,
                            "args": ["probe.py", *args], "required": False, "timeoutSec": 30}],
            }
            init = engine.initialize(project, config)
            assert init["capabilities"]["checksSandbox"]["state"] == "confined"
            job = engine.call("job/create", {"annotation": {
                "annotationId": "a", "pageUrl": "/", "targets": [{
                    "index": 1, "instruction": "Make the button say Start",
                    "source": {"file": "src/App.tsx", "line": 1},
                    "element": {"tagName": "button"}}]}, "modelProfileId": "m"})
            final = engine.wait_status(job["jobId"], {"failed", "awaiting-review", "cancelled"}, timeout=120)
            events = engine.events(job["jobId"])
            output = engine.all_output()
        finally:
            engine.close()
    texts = {m["tool_call_id"]: m["content"] for body in server.requests for m in body.get("messages", [])
             if m.get("role") == "tool"}
    assert key not in repr(events) + output + repr(texts)
    return final, events, texts["r"]

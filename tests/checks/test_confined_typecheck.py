"""Issue 14 acceptance 2: a real TypeScript type check through npm, as the demo runs it, passes confined.

The project gets a copy of the real TypeScript that ``node-shim`` already installed (no registry), its
``node_modules/.bin/tsc``, and the ``typecheck`` script ``checks suggest`` proposes; the check is
``npm run --silent typecheck``. Through the real engine (in-process service, real Chat adapter, real scripted
provider): the model's ``run_check`` and the host's final check run ``tsc --noEmit`` inside the sandbox,
with the worktree under the project's ``node_modules/.spotpatch/`` and the project hidden but its
``node_modules`` (read-only). A type error the model introduces shows in the check output it gets back.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import make_repo
from tests.engine._gates_support import KEY_ENV, call, run_one_job

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is the Linux check sandbox"),
]

TYPESCRIPT = Path(__file__).resolve().parents[2] / "node-shim" / "node_modules" / "typescript"
needs_node = pytest.mark.skipif(shutil.which("npm") is None or not (TYPESCRIPT / "bin" / "tsc").is_file(),
                                reason="needs npm and node-shim's installed TypeScript (tests/run.sh installs both)")

SOURCE = "export function price(value: number): string {\n  return `$${value}`;\n}\n"
TSCONFIG = {"compilerOptions": {"strict": True, "noEmit": True, "target": "ES2020", "module": "ESNext",
                                "moduleResolution": "Bundler", "skipLibCheck": True, "types": []},
            "include": ["src"]}
TYPECHECK = {"id": "typecheck", "name": "Type check", "command": "npm", "args": ["run", "--silent", "typecheck"],
             "timeoutSec": 300}
TARGET_EDIT = {"path": "src/price.ts", "oldText": "return `$${value}`;"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(KEY_ENV, "sk-test-" + "1" * 24)
    root = make_repo(tmp_path / "app", {
        "package.json": json.dumps({"name": "app", "private": True, "scripts": {"typecheck": "tsc --noEmit"}}),
        "tsconfig.json": json.dumps(TSCONFIG), "src/price.ts": SOURCE, ".gitignore": "node_modules\n"})
    modules = root / "node_modules"
    shutil.copytree(TYPESCRIPT, modules / "typescript", symlinks=True)
    (modules / ".bin").mkdir()
    (modules / ".bin" / "tsc").symlink_to("../typescript/bin/tsc")
    return root


def _turns(new_text: str) -> list[dict]:
    return [{"toolCalls": [call("w", "replace_text", {**TARGET_EDIT, "newText": new_text})]},
            {"toolCalls": [call("c", "run_check", {"checkId": "typecheck"})]},
            {"text": "Done.", "finishReason": "stop"}]


def _tool_text(result, call_id: str) -> str:  # noqa: ANN001 - JobRun
    return next(m["content"] for body in result.server.requests for m in body.get("messages", [])
                if m.get("role") == "tool" and m.get("tool_call_id") == call_id)


@needs_node
async def test_real_typescript_typecheck_passes_confined(project: Path) -> None:
    result = await run_one_job(project, _turns("return `$${value.toFixed(2)}`;"), checks=[TYPECHECK])
    assert result.snap is not None and result.snap.status == "awaiting-review", result.snap
    text = _tool_text(result, "c")
    assert text.startswith("Check typecheck (Type check) PASSED: exit code 0") and "Ran confined (sandbox)" in text
    [event] = result.kinds("check")
    assert (event["status"], event["sandbox"], event["network"]) == ("passed", "confined", False)


@needs_node
async def test_real_typescript_reports_the_models_type_error_confined(project: Path) -> None:
    result = await run_one_job(project, _turns("return value.toFixed(2) * 2;"), checks=[TYPECHECK])
    text = _tool_text(result, "c")
    assert "FAILED: exit code 2" in text and "src/price.ts(2," in text and "error TS" in text, text
    assert result.snap is not None and result.snap.status == "failed" and result.snap.error.code == "CHECK_FAILED"
    [event] = result.kinds("check")
    assert event["sandbox"] == "confined" and "error TS" in event["output"]

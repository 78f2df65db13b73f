"""Cold start (issue 17): ``serve`` answers ``initialize`` having imported only what that answer needs.

The real entry point runs with ``PYTHONVERBOSE=1`` (``-v``: one ``import 'name' # loader`` stderr line per
module, written as its import completes, also for ``importlib.import_module``, which ``-X importtime`` does
not see) and ``SPOTPATCH_LOG=DEBUG``; the server logs ``initialize answered`` right after handing the reply
to the writer, before any other task runs, so every import line above that log line was paid before the
client got its answer. No wall-clock limit: the test pins *what* is imported.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.conftest import make_repo
from tests.engine_client import EngineProcess

MARKER = "initialize answered"
#: Logged once the start-up work after the reply (health check, job runner preload) is over.
SETTLED = "start-up settled"

#: Needed only by jobs, probes, checks, the audit ledger or the suggestion lane — never by ``initialize``.
LATER = (
    "httpx", "httpcore", "httpx_sse", "h11", "wcmatch",
    "spotpatch_agent.engine.job", "spotpatch_agent.engine.loop", "spotpatch_agent.engine.prompt",
    "spotpatch_agent.provider", "spotpatch_agent.tools", "spotpatch_agent.checks", "spotpatch_agent.context",
    "spotpatch_agent.suggestion", "spotpatch_agent.demo", "spotpatch_agent.doctor", "spotpatch_agent.run_cli",
    "spotpatch_agent.audit.ledger", "spotpatch_agent.audit.records", "spotpatch_agent.audit.derive",
    "spotpatch_agent.worktree.pool", "spotpatch_agent.worktree.changes", "spotpatch_agent.worktree.snapshot",
    # the models of job/event, job/audit and job/suggest; the JSON Schema and docs generators
    "spotpatch_agent.protocol.events", "spotpatch_agent.protocol.audit", "spotpatch_agent.protocol.suggestion",
    "spotpatch_agent.protocol.schema", "spotpatch_agent.protocol.docgen", "spotpatch_agent.protocol.config_schema",
)

_IMPORT = re.compile(r"^import '([^']+)' # ")


def imports_before_reply(stderr: str) -> list[str]:
    """Module names of the ``-v`` import lines written before the ``initialize answered`` log line."""
    before, marker, _ = stderr.partition(MARKER)
    assert marker, "the engine never logged that it answered initialize"
    return [m.group(1) for line in before.splitlines() if (m := _IMPORT.match(line))]


def is_later(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in LATER)


@pytest.mark.parametrize("config", [{}, {"providers": [{
    "id": "p", "displayName": "P", "baseUrl": "http://127.0.0.1:9", "apiKeyEnv": "SPOTPATCH_TEST_NO_SUCH_KEY",
    "models": [{"id": "m", "model": "m", "displayName": "M"}]}]}], ids=["no-config", "a-provider"])
def test_initialize_is_answered_before_the_job_machinery_is_imported(tmp_path: Path, config: dict) -> None:
    root = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    engine = EngineProcess(env={"PYTHONVERBOSE": "1", "SPOTPATCH_LOG": "DEBUG"})
    try:
        result = engine.initialize(root, config)
        assert result["protocolVersion"] == "0.1"
        engine.close()
    finally:
        engine.stop()
    imported = imports_before_reply(stderr_of(engine))
    # The parse sees the serve path itself (a broken parse must not pass as "nothing heavy imported").
    serve_path = {"spotpatch_agent.engine.service", "spotpatch_agent.rpc.server", "spotpatch_agent.protocol.session"}
    assert serve_path <= set(imported)
    assert [m for m in imported if is_later(m)] == []


def test_the_job_runner_is_imported_after_the_reply(tmp_path: Path) -> None:
    """The same parse finds the job runner after the marker (engine/service.py preloads it once the reply is
    out): the names above are modules the engine really loads, just not before ``initialize`` is answered."""
    root = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    engine = EngineProcess(env={"PYTHONVERBOSE": "1", "SPOTPATCH_LOG": "DEBUG"})
    try:
        engine.initialize(root)
        deadline = time.monotonic() + 60
        while SETTLED not in stderr_of(engine) and time.monotonic() < deadline:
            time.sleep(0.02)
        engine.close()
    finally:
        engine.stop()
    after = stderr_of(engine).partition(MARKER)[2]
    assert SETTLED in after, "the engine's start-up work never settled"
    later = {m.group(1) for line in after.partition(SETTLED)[0].splitlines() if (m := _IMPORT.match(line))}
    assert {"spotpatch_agent.engine.job", "spotpatch_agent.tools.executor", "wcmatch"} <= later
    assert all(is_later(m) for m in ("spotpatch_agent.engine.job", "spotpatch_agent.tools.executor", "wcmatch"))


def stderr_of(engine: EngineProcess) -> str:
    return bytes(engine.stderr_bytes).decode("utf-8", "replace")
